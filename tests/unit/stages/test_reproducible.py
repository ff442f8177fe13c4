"""Reproducible wheels, on real zip files: the tag stage's rewrite (order, dates, modes, RECORD,
build tag), the source's SOURCE_DATE_EPOCH (real tar and zip archives), the build record in the
cache, the build tag in the plan, and verify's comparison of two wheels."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from rocmbuild.artifacts.results import Artifacts
from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.cache import store as cache
from rocmbuild.core.errors import NotReproduced, UsageError
from rocmbuild.pipeline.verify import _first_difference, compare, require_reproduced
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.sources.archive import extract_dated
from rocmbuild.stages.context import ZIP_EPOCH, source_date_epoch
from rocmbuild.stages.tag import retag
from tests.unit.plan.test_render import HOST

NV = "pkg-1.0"
EPOCH = 1700000000  # 2023-11-14T22:13:20Z


def raw_wheel(path: Path, order: list[str], date: tuple[int, ...], mode: int) -> Path:
    """A backend's wheel: the same content, written in ``order`` with ``date`` and ``mode``."""
    files = {
        "pkg/__init__.py": b"x = 1\n",
        "pkg/tool.sh": b"#!/bin/sh\n",
        f"{NV}.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\nBody\n",
        f"{NV}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: x\nTag: py3-none-any\n",
        f"{NV}.dist-info/RECORD": b"",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name in order:
            info = zipfile.ZipInfo(name, date)  # type: ignore[arg-type]
            bits = 0o755 if name.endswith(".sh") else mode
            info.external_attr = (0o100000 | bits) << 16
            zf.writestr(info, files[name])
    return path


def test_two_backend_wheels_give_the_same_bytes(tmp_path: Path) -> None:
    names = ["pkg/__init__.py", "pkg/tool.sh", f"{NV}.dist-info/METADATA",
             f"{NV}.dist-info/WHEEL", f"{NV}.dist-info/RECORD"]
    a = raw_wheel(tmp_path / "a" / "pkg-1.0-py3-none-any.whl", names, (2024, 5, 1, 1, 2, 4),
                  0o664)
    b = raw_wheel(tmp_path / "b" / "pkg-1.0-py3-none-any.whl", names[::-1],
                  (2025, 1, 2, 3, 4, 6), 0o600)
    assert a.read_bytes() != b.read_bytes()
    ta = retag(a, tmp_path / "oa", "rocm6.2.gfx942", {"recipe": "pkg"}, EPOCH)
    tb = retag(b, tmp_path / "ob", "rocm6.2.gfx942", {"recipe": "pkg"}, EPOCH)
    assert ta.read_bytes() == tb.read_bytes()
    with zipfile.ZipFile(ta) as zf:
        infos = zf.infolist()
    names_out = [i.filename for i in infos]
    info_dir = "pkg-1.0+rocm6.2.gfx942.dist-info"
    assert names_out == ["pkg/__init__.py", "pkg/tool.sh", f"{info_dir}/METADATA",
                         f"{info_dir}/WHEEL", f"{info_dir}/rocmbuild.json", f"{info_dir}/RECORD"]
    assert {i.date_time for i in infos} == {time.gmtime(EPOCH)[:6]}
    modes = {i.filename: (i.external_attr >> 16) & 0o7777 for i in infos}
    assert modes["pkg/tool.sh"] == 0o755 and modes["pkg/__init__.py"] == 0o644
    assert set(modes.values()) == {0o644, 0o755}
    with WheelFile(ta) as wf:  # checks every member against the RECORD the rewrite wrote
        for n in wf.namelist():
            wf.read(n)


def test_dates_are_clamped_to_1980(tmp_path: Path) -> None:
    src = raw_wheel(tmp_path / "a" / "pkg-1.0-py3-none-any.whl", ["pkg/__init__.py",
                    f"{NV}.dist-info/METADATA"], (2024, 1, 1, 0, 0, 0), 0o644)
    out = retag(src, tmp_path / "o", "rocm6.2", {}, 0)
    with zipfile.ZipFile(out) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_build_tag_goes_into_the_name_and_wheel(tmp_path: Path) -> None:
    src = raw_wheel(tmp_path / "a" / "pkg-1.0-py3-none-any.whl", ["pkg/__init__.py",
                    f"{NV}.dist-info/METADATA", f"{NV}.dist-info/WHEEL"], (2024, 1, 1, 0, 0, 0),
                    0o644)
    out = retag(src, tmp_path / "o", "rocm6.2", {"build_tag": "2"}, EPOCH, "2")
    assert out.name == "pkg-1.0+rocm6.2-2-py3-none-any.whl"
    w = read_wheel(out)
    assert w.build == (2, "")
    with zipfile.ZipFile(out) as zf:
        wheel_txt = zf.read("pkg-1.0+rocm6.2.dist-info/WHEEL").decode()
    assert "Build: 2\n" in wheel_txt and "Tag: py3-none-any" in wheel_txt


def test_render_checks_the_build_tag_and_keys_it() -> None:
    recipe = load(find_recipe("flash-attn")).on_line("2.8-fork")
    base = render(recipe, Target(arch="gfx942"), HOST)
    tagged = render(recipe, Target(arch="gfx942", build_tag="1"), HOST)
    assert base.build_tag == "" and "build_tag" not in base.to_json()
    assert tagged.build_tag == "1" and tagged.cache_key != base.cache_key
    with pytest.raises(UsageError, match="--build-tag: 'x1' is not a build tag"):
        render(recipe, Target(arch="gfx942", build_tag="x1"), HOST)


def test_inputs_json_leaves_out_this_hosts_state() -> None:
    recipe = load(find_recipe("flash-attn")).on_line("2.8-fork")
    few = render(recipe, Target(arch="gfx942", jobs=1), HOST).inputs_json()
    many = render(recipe, Target(arch="gfx942", jobs=9), HOST).inputs_json()
    assert few == many
    assert "jobs" not in few and "jobs_reason" not in few and "recipe_path" not in few
    assert few["env"]["MAX_JOBS"] == "{jobs}"


def test_archive_epoch_is_the_newest_member(tmp_path: Path) -> None:
    tgz = tmp_path / "s.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        for name, mtime in (("s/a.py", 1600000000), ("s/b.py", 1650000000), ("s/c", 0)):
            info = tarfile.TarInfo(name)
            info.mtime, info.size = mtime, 1
            tf.addfile(info, io.BytesIO(b"x"))
    z = tmp_path / "s.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(zipfile.ZipInfo("s/a.py", (2001, 2, 3, 4, 5, 6)), "x")
        zf.writestr(zipfile.ZipInfo("s/b.py", (1999, 1, 1, 0, 0, 0)), "x")
    # the fetch stage takes the date from the extraction's own pass over the members
    assert extract_dated(tgz, tmp_path / "t") == (tmp_path / "t", 1650000000)
    assert extract_dated(z, tmp_path / "z") == (tmp_path / "z", 981173106)  # 2001-02-03T04:05:06Z
    assert (tmp_path / "t/b.py").read_text() == (tmp_path / "z/a.py").read_text() == "x"


def test_source_date_epoch_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert source_date_epoch(Artifacts(source_date_epoch=EPOCH)) == EPOCH
    assert source_date_epoch(Artifacts()) == ZIP_EPOCH  # a path source
    assert source_date_epoch(Artifacts(source_date_epoch=5)) == ZIP_EPOCH
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    assert source_date_epoch(Artifacts(source_date_epoch=EPOCH)) == 1800000000


def test_build_record_is_stored_and_delivered_beside_the_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK wheel bytes")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    entry = cache.store(tmp_path / "c", "k" * 64, wheel, sha, {}, record={"timings": {"a": 1}})
    hit = cache.lookup(tmp_path / "c", "k" * 64)
    assert hit is not None and cache.build_record(hit) == {"timings": {"a": 1}}
    out = cache.deliver(entry, tmp_path / "wheels")
    rec = tmp_path / "wheels" / "pkg-1.0-py3-none-any.whl.build.json"
    assert out.read_bytes() == b"PK wheel bytes" and json.loads(rec.read_text()) == {
        "timings": {"a": 1}}
    rec.unlink()
    cache.deliver(entry, tmp_path / "wheels")  # a no-op delivery still puts the record back
    assert rec.is_file()


def _zip(path: Path, members: list[tuple[str, bytes, tuple[int, ...]]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, date in members:
            zf.writestr(zipfile.ZipInfo(name, date), data)  # type: ignore[arg-type]
    return path


def test_compare_names_the_differing_members(tmp_path: Path) -> None:
    d = (2020, 1, 1, 0, 0, 0)
    a = _zip(tmp_path / "a/p-1-py3-none-any.whl", [("p/x.py", b"1", d), ("p/y.py", b"2", d),
                                                   ("p-1.dist-info/RECORD", b"r1", d)])
    b = _zip(tmp_path / "b/p-1-py3-none-any.whl", [("p/x.py", b"1", (2021, 1, 1, 0, 0, 0)),
                                                   ("p/y.py", b"22", d), ("p/z.py", b"", d),
                                                   ("p-1.dist-info/RECORD", b"r2", d)])
    res = compare(a, "a" * 64, b, "b" * 64)
    assert not res.reproduced
    assert [(m.name, m.what) for m in res.differences] == [
        ("p/y.py", "content"), ("p-1.dist-info/RECORD", "content"),
        ("p/x.py", "zip fields: date_time"), ("p/z.py", "only in the rebuild")]
    assert res.differences[0].size == 1 and res.differences[0].rebuilt_size == 2
    with pytest.raises(NotReproduced, match=r"first: p/y\.py \(content\)") as exc:
        require_reproduced(res)
    assert exc.value.exit_code == 13
    same = compare(a, "a" * 64, a, "a" * 64)
    assert same.reproduced and same.differences == ()
    require_reproduced(same)


def test_compare_reports_member_order(tmp_path: Path) -> None:
    d = (2020, 1, 1, 0, 0, 0)
    a = _zip(tmp_path / "a/p-1-py3-none-any.whl", [("p/x.py", b"1", d), ("p/y.py", b"2", d)])
    b = _zip(tmp_path / "b/p-1-py3-none-any.whl", [("p/y.py", b"2", d), ("p/x.py", b"1", d)])
    res = compare(a, "a" * 64, b, "b" * 64)
    assert res.differences == () and "another order" in res.notes[0]


def test_first_difference_names_the_key_path() -> None:
    here = {"host": {"torch": "2.13.0"}, "archs": ["gfx942"]}
    there = {"host": {"torch": "2.12.0"}, "archs": ["gfx942"]}
    assert _first_difference(here, there) == "host.torch: '2.13.0' here, '2.12.0' in the wheel"
    assert _first_difference(here, here) is None
