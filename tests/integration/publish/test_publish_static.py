"""Static index: PEP 503/691/658/700 pages, immutability, pip against file:// and http.server,
dry-run, broken wheels, promote. Everything real: pip, http.server, wheels from `pip wheel`."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest
from publish_helpers import (
    clean_env,
    free_port,
    make_wheel,
    pip_install,
    rocmbuild,
    snapshot,
    wait_for_http,
)


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, real_wheels: dict[str, Path]) -> Path:
    index = tmp_path_factory.mktemp("idx") / "index"
    rocmbuild(
        "publish",
        str(real_wheels["tiny"]),
        str(real_wheels["tiny_old"]),
        str(real_wheels["other"]),
        "--index",
        str(index),
        check=True,
    )
    return index


def test_pages_follow_peps(published: Path, real_wheels: dict[str, Path]) -> None:
    simple = published / "stable" / "simple"
    root = (simple / "index.html").read_text()
    assert '<a href="tiny-pkg/">tiny-pkg</a>' in root
    assert '<a href="other-pkg/">other-pkg</a>' in root
    page = (simple / "tiny-pkg" / "index.html").read_text()
    whl = real_wheels["tiny"]
    assert "+" in whl.name
    quoted = whl.name.replace("+", "%2B")
    meta = published / "stable" / "files" / (whl.name + ".metadata")
    meta_sha = sha(meta)
    assert f'href="../../files/{quoted}#sha256={sha(whl)}"' in page
    assert 'data-requires-python="&gt;=3.8"' in page
    assert f'data-core-metadata="sha256={meta_sha}"' in page
    assert f'data-dist-info-metadata="sha256={meta_sha}"' in page
    with zipfile.ZipFile(whl) as zf:
        inside = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        assert meta.read_bytes() == zf.read(inside)
    # the served wheel is the same bytes
    assert (published / "stable" / "files" / whl.name).read_bytes() == whl.read_bytes()
    # PEP 691 + 700 JSON
    pj = json.loads((simple / "tiny-pkg" / "index.json").read_text())
    assert pj["meta"]["api-version"] == "1.1"
    assert pj["name"] == "tiny-pkg"
    assert pj["versions"] == ["0.9", "1.0+rocm6.2.gfx942"]
    f = next(x for x in pj["files"] if x["filename"] == whl.name)
    assert f["hashes"] == {"sha256": sha(whl)}
    assert f["size"] == whl.stat().st_size
    assert f["url"] == f"../../files/{quoted}"
    assert f["requires-python"] == ">=3.8"
    assert f["core-metadata"] == {"sha256": meta_sha}
    assert f["upload-time"].endswith("Z") and "T" in f["upload-time"]
    rj = json.loads((simple / "index.json").read_text())
    assert [p["name"] for p in rj["projects"]] == ["other-pkg", "tiny-pkg"]


def test_pip_installs_from_file_url(published: Path, tmp_path: Path) -> None:
    url = (published / "stable" / "simple").as_uri() + "/"
    proc = pip_install(url, tmp_path / "t", "tiny-pkg==1.0+rocm6.2.gfx942")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1.0+rocm6.2.gfx942" in (tmp_path / "t" / "tiny_pkg" / "__init__.py").read_text()


def test_pip_installs_through_http_server(published: Path, tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(published),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/stable/simple/"
        wait_for_http(base, server, "python -m http.server")
        # the JSON form is served by path for clients that ask for it
        data = json.loads(urllib.request.urlopen(base + "other-pkg/index.json").read())
        assert data["name"] == "other-pkg"
        proc = pip_install(base, tmp_path / "t", "other.pkg")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (tmp_path / "t" / "other_pkg" / "__init__.py").exists()
        # pip picks the newest version (local label sorts above 0.9)
        proc = pip_install(base, tmp_path / "t2", "tiny-pkg")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "rocm6.2" in (tmp_path / "t2" / "tiny_pkg" / "__init__.py").read_text()
    finally:
        server.terminate()
        server.wait(10)


def test_identical_republish_is_noop_and_different_bytes_refused(tmp_path: Path) -> None:
    index = tmp_path / "index"
    a = make_wheel(tmp_path / "a", "immut", "1.0", payload="A = 1\n")
    b = make_wheel(tmp_path / "b", "immut", "1.0", payload="B = 2\n")
    assert a.name == b.name and sha(a) != sha(b)
    rocmbuild("publish", str(a), "--index", str(index), check=True)
    before = snapshot(index / "stable")
    again = rocmbuild("publish", str(a), "--index", str(index))
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stderr
    assert snapshot(index / "stable") == before
    bad = rocmbuild("publish", str(b), "--index", str(index))
    assert bad.returncode == 9
    assert a.name in bad.stderr and sha(a) in bad.stderr and sha(b) in bad.stderr
    assert snapshot(index / "stable") == before
    # also refused in another stage: one filename, one set of bytes, across the index
    bad2 = rocmbuild("publish", str(b), "--index", str(index), "--stage", "staging")
    assert bad2.returncode == 9 and sha(b) in bad2.stderr


def test_adding_a_wheel_rewrites_only_touched_pages(tmp_path: Path) -> None:
    index = tmp_path / "index"
    w1 = make_wheel(tmp_path / "w", "alpha", "1.0")
    w2 = make_wheel(tmp_path / "w", "beta", "1.0")
    w3 = make_wheel(tmp_path / "w", "alpha", "1.1")
    rocmbuild("publish", str(w1), str(w2), "--index", str(index), check=True)
    simple = index / "stable" / "simple"
    beta = [
        simple / "beta" / "index.html",
        simple / "beta" / "index.json",
        index / "stable" / "files" / w2.name,
    ]
    alpha = simple / "alpha" / "index.html"
    st_before = {p: p.stat() for p in [*beta, alpha]}
    time.sleep(0.02)
    rocmbuild("publish", str(w3), "--index", str(index), check=True)
    for p in beta:
        st = p.stat()
        assert (st.st_ino, st.st_mtime_ns) == (st_before[p].st_ino, st_before[p].st_mtime_ns), p
    assert alpha.stat().st_ino != st_before[alpha].st_ino
    assert "alpha-1.1-py3-none-any.whl" in alpha.read_text()


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    index = tmp_path / "index"
    w1 = make_wheel(tmp_path / "w", "dry", "1.0")
    w2 = make_wheel(tmp_path / "w", "dry", "2.0")
    proc = rocmbuild("publish", str(w1), "--index", str(index), "--dry-run", check=True)
    assert "would add dry-1.0-py3-none-any.whl" in proc.stderr
    assert not index.exists()
    rocmbuild("publish", str(w1), "--index", str(index), check=True)
    before = snapshot(index)
    proc = rocmbuild(
        "publish", str(w1), str(w2), "--index", str(index), "--dry-run", "--json", check=True
    )
    data = json.loads(proc.stdout)
    assert data["dry_run"] is True
    assert [a["file"] for a in data["added"]] == [w2.name]
    assert [u["file"] for u in data["unchanged"]] == [w1.name]
    assert "simple/dry/index.html" in data["pages"]
    assert snapshot(index) == before


def test_broken_wheels_are_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    broken = work / "broken"
    w = make_wheel(broken, "bad", "1.0")
    proc = rocmbuild("--workdir", str(work), "publish", str(w))
    assert proc.returncode == 9 and "failed validation" in proc.stderr and w.name in proc.stderr
    copy = tmp_path / "elsewhere" / w.name
    copy.parent.mkdir()
    shutil.copy(w, copy)
    proc = rocmbuild("--workdir", str(work), "publish", str(copy))
    assert proc.returncode == 9 and "failed validation" in proc.stderr and sha(w) in proc.stderr
    assert not (work / "index" / "stable").exists()
    good = make_wheel(tmp_path / "good", "bad", "1.0", payload="FIXED = True\n")
    proc = rocmbuild("--workdir", str(work), "publish", str(good))
    assert proc.returncode == 0, proc.stderr
    assert (work / "index" / "stable" / "files" / good.name).exists()


def test_staging_then_promote(tmp_path: Path) -> None:
    index = tmp_path / "index"
    host = make_wheel(tmp_path / "w", "torchy", "2.0+rocm6.2")
    dev = tmp_path / "w" / "torchy-2.0+rocm6.2-cp311-cp311-linux_x86_64.whl"
    shutil.copy(host, dev)  # second file of the same release (different tag)
    other = make_wheel(tmp_path / "w", "torchy", "1.0")
    env = clean_env(ROCMBUILD_INDEX=str(index))
    rocmbuild("publish", str(host), str(dev), str(other), "--stage", "staging", env=env, check=True)
    assert not (index / "stable").exists()
    before = snapshot(index)
    proc = rocmbuild(
        "promote",
        "Torchy==2.0+rocm6.2",
        "--from",
        "staging",
        "--to",
        "stable",
        "--dry-run",
        env=env,
        check=True,
    )
    assert "would add" in proc.stderr
    assert snapshot(index) == before
    rocmbuild("promote", "torchy==2.0+rocm6.2", env=env, check=True)
    stable = json.loads((index / "stable" / "simple" / "torchy" / "index.json").read_text())
    assert sorted(f["filename"] for f in stable["files"]) == sorted([host.name, dev.name])
    assert stable["versions"] == ["2.0+rocm6.2"]
    # staging keeps its files; promoting again is a no-op
    assert (
        len(
            json.loads((index / "staging" / "simple" / "torchy" / "index.json").read_text())[
                "files"
            ]
        )
        == 3
    )
    again = rocmbuild("promote", "torchy==2.0+rocm6.2", env=env, check=True)
    assert "nothing to do" in again.stderr
    missing = rocmbuild("promote", "torchy==9.9", env=env)
    assert missing.returncode == 9 and "torchy==9.9" in missing.stderr
    assert (
        pip_install(
            (index / "stable" / "simple").as_uri() + "/", tmp_path / "t", "torchy"
        ).returncode
        == 0
    )
    assert "2.0+rocm6.2" in (tmp_path / "t" / "torchy" / "__init__.py").read_text()


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["publish", "{tmp}/nope-1.0-py3-none-any.whl"], 9, "no such wheel file"),
        (["publish", "{tmp}/notawheel.whl"], 9, "not a wheel filename"),
        (["publish", "{tmp}/x-1.0-py3-none-any.whl", "--stage", "../up"], 2, "--stage"),
        (
            [
                "publish",
                "{tmp}/x-1.0-py3-none-any.whl",
                "--index",
                "http://127.0.0.1:9/",
                "--stage",
                "staging",
            ],
            2,
            "--stage",
        ),
        (["promote", "x-1.0", "--index", "{tmp}/i"], 2, "NAME==VERSION"),
        (["promote", "x==1.0", "--index", "{tmp}/i"], 9, "stage 'staging' does not exist"),
    ],
)
def test_bad_input_one_line_error(tmp_path: Path, args: list[str], code: int, text: str) -> None:
    (tmp_path / "notawheel.whl").write_bytes(b"x")
    make_wheel(tmp_path, "x", "1.0")
    proc = rocmbuild(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert proc.returncode == code, proc.stderr
    assert text in proc.stderr
    assert "hint:" in proc.stderr


def test_rocm_views_hold_only_their_rocm(tmp_path: Path) -> None:
    """A host-bound wheel (METADATA ``Requires-External: rocm (>=X.Y,<X.Y+1)``, as the tag stage
    writes it) is listed in ``<stage>/rocmX.Y/simple/`` next to the all-wheels view, and only
    there: pip on a ROCm 6.2 host, pointed at the rocm6.2 view, installs the 6.2 build although
    the 6.4 build is the higher version in the all-wheels view. A wheel without a ROCm is in no
    view; a later publish adds to a view without touching the other one's pages."""
    index = tmp_path / "index"
    w62 = make_wheel(tmp_path / "w", "hostbound", "1.0+rocm6.2.gfx942",
                     metadata_extra="Requires-External: rocm (>=6.2,<6.3)\n")
    w64 = make_wheel(tmp_path / "w", "hostbound", "1.0+rocm6.4.gfx942",
                     metadata_extra="Requires-External: rocm (>=6.4,<6.5)\n")
    plain = make_wheel(tmp_path / "w", "plain", "1.0")
    res = rocmbuild("publish", str(w62), str(w64), str(plain), "--index", str(index),
                    "--dry-run", "--json", check=True)
    pages = json.loads(res.stdout)["pages"]
    assert "rocm6.2/simple/hostbound/index.json" in pages and "rocm6.4/simple/index.html" in pages
    assert not any(p.startswith("rocm") and "plain" in p for p in pages)
    rocmbuild("publish", str(w62), str(w64), str(plain), "--index", str(index), check=True)
    stage = index / "stable"
    assert sorted(p.name for p in stage.iterdir()) == ["files", "rocm6.2", "rocm6.4", "simple"]
    view = json.loads((stage / "rocm6.2/simple/hostbound/index.json").read_bytes())
    assert [f["filename"] for f in view["files"]] == [w62.name]
    page = stage / "rocm6.2/simple/hostbound"
    link = urllib.parse.unquote(view["files"][0]["url"])
    assert (page / link).resolve() == (stage / "files" / w62.name).resolve()
    assert not (stage / "rocm6.2/simple/plain").exists()
    root = json.loads((stage / "rocm6.2/simple/index.json").read_bytes())
    assert [p["name"] for p in root["projects"]] == ["hostbound"]
    assert 'href="../rocm6.2/simple/"' in (stage / "simple/index.html").read_text()

    url = (stage / "rocm6.2/simple").as_uri() + "/"
    proc = pip_install(url, tmp_path / "t62", "hostbound")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rocm6.2" in (tmp_path / "t62/hostbound/__init__.py").read_text()
    proc = pip_install((stage / "simple").as_uri() + "/", tmp_path / "tall", "hostbound")
    assert proc.returncode == 0 and "rocm6.4" in (tmp_path / "tall/hostbound/__init__.py"
                                                   ).read_text()
    proc = pip_install(url, tmp_path / "tp", "plain")
    assert proc.returncode != 0  # not in the ROCm view

    kept = (stage / "rocm6.4/simple/hostbound/index.json").stat().st_ino
    w62b = make_wheel(tmp_path / "w", "hostbound", "1.1+rocm6.2.gfx942",
                      metadata_extra="Requires-External: rocm (>=6.2,<6.3)\n")
    rocmbuild("publish", str(w62b), "--index", str(index), check=True)
    assert (stage / "rocm6.4/simple/hostbound/index.json").stat().st_ino == kept
    view = json.loads((stage / "rocm6.2/simple/hostbound/index.json").read_bytes())
    assert [f["filename"] for f in view["files"]] == [w62.name, w62b.name]
