"""The pending-validation record (``nightly/pending.py``): written atomically, read back as
untrusted JSON (bad inputs refused with the key named, the file left where it is), listed per
run. In-process, real files."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core import untrusted
from rocmbuild.nightly import pending

KEY = "ab" * 32
RUN = "20261201T020000Z"


def rec(cell: str = "fa.triton.gfx942", run: str = RUN) -> pending.PendingWheel:
    return pending.record(run, cell, KEY, "flash_attn-2.8.3-py3-none-any.whl", "flash-attn",
                          "2.8.3", "import flash_attn needs the module 'triton'")


def test_round_trip_and_listing(tmp_path: Path) -> None:
    p = pending.write(tmp_path, rec())
    assert p == tmp_path / "pending" / "fa.triton.gfx942.json"
    back = pending.read(p)
    assert back == replace(rec(), since=back.since) and back.since > 0
    pending.write(tmp_path, rec("other.cell", "20261202T020000Z"))
    found, warnings = pending.listed(tmp_path)
    assert [r.cell_id for r in found] == ["fa.triton.gfx942", "other.cell"] and not warnings
    assert [r.cell_id for r in pending.listed(tmp_path, RUN)[0]] == ["fa.triton.gfx942"]
    pending.remove(tmp_path, "fa.triton.gfx942")
    pending.remove(tmp_path, "fa.triton.gfx942")  # twice: nothing to remove is fine
    assert [r.cell_id for r in pending.listed(tmp_path)[0]] == ["other.cell"]
    assert pending.listed(tmp_path / "none") == ([], [])


@pytest.mark.parametrize(("change", "key"), [
    ({"version": 2}, "version"),
    ({"version": True}, "version"),
    ({"run": "yesterday"}, "run"),
    ({"cell": "../etc"}, "cell"),
    ({"cell": 7}, "cell"),
    ({"cache_key": "abc"}, "cache_key"),
    ({"cache_key": "G" * 64}, "cache_key"),
    ({"wheel": "../x.whl"}, "wheel"),
    ({"wheel": "x.tar.gz"}, "wheel"),
    ({"project": None}, "project"),
    ({"reason": "x" * 2000}, "reason"),
    ({"since": -1}, "since"),
    ({"since": "now"}, "since"),
])
def test_bad_fields_are_refused_naming_the_key(change: dict[str, object], key: str) -> None:
    data = {**rec().to_json(), **change}
    with pytest.raises(untrusted.BadJson, match=key):
        pending.parse(data)


def test_bad_files_are_warned_about_and_left(tmp_path: Path) -> None:
    d = tmp_path / "pending"
    d.mkdir()
    pending.write(tmp_path, rec())
    (d / "notjson.json").write_text("{", encoding="utf-8")
    (d / "list.json").write_text("[]", encoding="utf-8")
    (d / "deep.json").write_text("[" * 40 + "]" * 40, encoding="utf-8")
    nan = json.dumps(rec().to_json()).replace('"since": ', '"since": NaN, "x": ')
    (d / "nan.json").write_text(nan, encoding="utf-8")
    (d / "big.json").write_bytes(b" " * (pending.MAX_BYTES + 1))
    (d / "renamed.json").write_text(json.dumps(rec().to_json()), encoding="utf-8")
    os.symlink(d / "fa.triton.gfx942.json", d / "link.json")
    os.mkfifo(d / "fifo.json")  # must not hang
    (d / "notes.txt").write_text("ignored", encoding="utf-8")
    found, warnings = pending.listed(tmp_path)
    assert [r.cell_id for r in found] == ["fa.triton.gfx942"]
    names = sorted(Path(w.split(":")[0]).name for w in warnings)
    assert names == ["big.json", "deep.json", "fifo.json", "link.json", "list.json",
                     "nan.json", "notjson.json", "renamed.json"]
    assert any("not the file's name" in w for w in warnings)
    assert all(p.exists() or p.is_symlink() for p in d.iterdir())  # nothing removed


def test_a_record_is_checked_against_the_cached_wheel_it_claims() -> None:
    """``mismatch``: the wheel under the record's cache key must be the record's own (file name,
    project, version, sha256); another cell's wheel (an edited cache_key) never passes."""
    sha = "cd" * 32
    r = replace(rec(), sha256=sha)
    own = "flash_attn-2.8.3-py3-none-any.whl"
    assert r.mismatch(own, "flash-attn", "2.8.3", sha) is None
    other = "flash_attn-2.8.3+rocm6.2.gfx90a-cp312-cp312-linux_x86_64.whl"
    assert "not the record's flash_attn-2.8.3" in (r.mismatch(other, "flash-attn", "2.8.3",
                                                             sha) or "")
    assert "is aiter 2.8.3" in (r.mismatch(own, "aiter", "2.8.3", sha) or "")
    assert "sha256 efefefefefefefef" in (r.mismatch(own, "flash-attn", "2.8.3", "ef" * 32) or "")
    # a record from before the sha256 was kept: the name, project and version still decide
    assert rec().mismatch(own, "flash-attn", "2.8.3", "ef" * 32) is None


@pytest.mark.parametrize("sha", ["x" * 64, "AB" * 32, "ab" * 31, 5])
def test_a_bad_sha256_in_a_record_is_refused(tmp_path: Path, sha: object) -> None:
    data = rec().to_json() | {"sha256": sha}
    with pytest.raises(untrusted.BadJson, match="sha256"):
        pending.parse(data)
