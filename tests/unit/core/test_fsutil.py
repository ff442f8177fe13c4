"""rocmbuild.core.fsutil: whole files or nothing, never edited in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmbuild.core import fsutil


def test_write_atomic_creates_and_replaces(tmp_path: Path) -> None:
    p = tmp_path / "report.json"
    fsutil.write_atomic(p, b"one")
    assert p.read_bytes() == b"one"
    fsutil.write_atomic(p, "twó")
    assert p.read_bytes() == "twó".encode()
    assert sorted(tmp_path.iterdir()) == [p]  # no temporary left behind


def test_replace_is_a_new_inode(tmp_path: Path) -> None:
    """A reader holding the old file keeps reading the old bytes: the file is not rewritten."""
    p = tmp_path / "index.html"
    fsutil.write_atomic(p, b"old")
    with open(p, "rb") as reader:
        fsutil.write_atomic(p, b"new")
        assert reader.read() == b"old"
    assert p.read_bytes() == b"new"


def test_failure_leaves_target_and_directory_untouched(tmp_path: Path) -> None:
    p = tmp_path / "w.whl"
    p.write_bytes(b"complete")
    with pytest.raises(RuntimeError), fsutil.atomic_path(p) as tmp:
        # the temporary has the target's name (WheelFile needs it) in a private dir next to it
        assert tmp.name == p.name and tmp.parent.parent == tmp_path
        assert tmp.parent.name.startswith(fsutil.TMP_PREFIX)
        tmp.write_bytes(b"parti")
        raise RuntimeError("killed halfway")
    assert p.read_bytes() == b"complete"
    assert sorted(tmp_path.iterdir()) == [p]


def test_copy_atomic_copies_or_links(tmp_path: Path) -> None:
    src = tmp_path / "a.whl"
    src.write_bytes(b"wheel bytes")
    dst = tmp_path / "out" / "a.whl"
    dst.parent.mkdir()
    dst.write_bytes(b"stale")
    fsutil.copy_atomic(src, dst)
    assert dst.read_bytes() == b"wheel bytes"
    assert dst.stat().st_ino != src.stat().st_ino
    linked = tmp_path / "out" / "b.whl"
    fsutil.copy_atomic(src, linked, link=True)
    assert linked.stat().st_ino == src.stat().st_ino  # same filesystem: a hard link
    assert sorted(p.name for p in dst.parent.iterdir()) == ["a.whl", "b.whl"]


def test_copy_missing_source_leaves_nothing(tmp_path: Path) -> None:
    dst = tmp_path / "a.whl"
    with pytest.raises(FileNotFoundError):
        fsutil.copy_atomic(tmp_path / "missing.whl", dst, link=True)
    assert list(tmp_path.iterdir()) == []


def test_fsync_dir_needs_a_directory(tmp_path: Path) -> None:
    fsutil.fsync_dir(tmp_path)
    f = tmp_path / "f"
    f.write_bytes(b"")
    fsutil.fsync_file(f)
    with pytest.raises(NotADirectoryError):
        fsutil.fsync_dir(f)
    assert os.listdir(tmp_path) == ["f"]


@pytest.mark.parametrize(("name", "problem"), [
    ("flash-attn", None),
    ("a" * 255 + ".t", "has a part of 257 bytes"),
    ("x/" + "é" * 128, "has a part of 256 bytes"),       # bytes, not characters
    ("/".join(["d" * 200] * 21), "is 4220 bytes long"),
    ("a\0b", "holds a NUL character"),
])
def test_name_problem(name: str, problem: str | None) -> None:
    """A name that becomes a path is checked before a call takes it (ENAMETOOLONG)."""
    from rocmbuild.core import fsutil

    got = fsutil.name_problem(name)
    assert (got is None) if problem is None else (got is not None and problem in got)
    if problem is not None and "\0" not in name:
        with pytest.raises(OSError):
            os.stat(name)
