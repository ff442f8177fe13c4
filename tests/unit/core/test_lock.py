"""core.lock: a lock is a regular file of its own. A symlink (to a file or a directory), a
directory, a FIFO or a hard link to another file at a lock's path is refused with
``fsutil.NotRegular`` naming that path, at once; what it points at is left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmbuild.core import fsutil, lock

PRECIOUS = "a file the lock must never write\n"


SHAPES = ["symlink", "dangling", "dir-symlink", "directory", "fifo", "hardlink"]


def put_shape(path: Path, victim: Path, shape: str) -> None:
    """Make ``path`` one of SHAPES (not a lock file of its own); ``victim`` is the file a
    symlink or hard link names (also used by the nightly lock's test)."""
    if shape == "symlink":
        path.symlink_to(victim)
    elif shape == "dangling":
        path.symlink_to(victim.parent / "nowhere")
    elif shape == "dir-symlink":
        path.symlink_to(victim.parent, target_is_directory=True)
    elif shape == "directory":
        path.mkdir()
    elif shape == "fifo":
        os.mkfifo(path)
    else:
        os.link(victim, path)


def _shape(tmp_path: Path, shape: str) -> Path:
    path = tmp_path / "locks" / "x.lock"
    path.parent.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    put_shape(path, victim, shape)
    return path


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("shared", [False, True])
def test_a_lock_that_is_not_a_file_of_its_own_is_refused(tmp_path: Path, shape: str,
                                                          shared: bool) -> None:
    path = _shape(tmp_path, shape)
    with pytest.raises(fsutil.NotRegular) as exc, lock.held(path, "the test lock", shared):
        pass
    assert exc.value.filename == str(path) and exc.value.strerror
    assert (tmp_path / "victim.txt").read_text() == PRECIOUS
    assert not (tmp_path / "nowhere").exists()


def test_a_lock_of_its_own_is_taken_and_records_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "x.lock"
    with lock.held(path, "the test lock"):
        assert int(path.read_text()) == os.getpid()
    with lock.held(path, "the test lock", shared=True):
        pass
