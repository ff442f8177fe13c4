"""nightly.lock: the lock of one nightly per workspace, in process. Not a regular file of its
own (a symlink to a file, a directory, a FIFO, a hard link) is refused with one usage error
naming it, what it points at unchanged; a workdir that is a file is named too; the holder's
record is shown with its control characters replaced (no terminal escape reaches stderr)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from rocmbuild.core.errors import Busy, UsageError
from rocmbuild.nightly import lock
from tests.unit.core.test_lock import SHAPES, put_shape

PRECIOUS = "the user's own file\n"


@pytest.mark.parametrize("shape", SHAPES)
def test_a_nightly_lock_that_is_not_a_lock_file_is_refused(tmp_path: Path, shape: str) -> None:
    work = tmp_path / "build"
    work.mkdir()
    path, victim = work / lock.NAME, tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    put_shape(path, victim, shape)
    with pytest.raises(UsageError) as exc, lock.held(work, "r1"):
        pass
    assert exc.value.message.startswith(f"{path}: ") and "not a nightly lock" in exc.value.message
    assert exc.value.hint and "workdir" in exc.value.hint
    assert victim.read_text() == PRECIOUS and not (tmp_path / "nowhere").exists()


def test_a_workdir_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "build").write_text("not a directory\n")
    with pytest.raises(UsageError) as exc, lock.held(tmp_path / "build" / "sub", "r1"):
        pass
    assert f"{tmp_path / 'build'}: is a file, not a directory" in exc.value.message
    assert ".tmp" not in exc.value.message


def test_the_holders_record_is_shown_without_control_characters(tmp_path: Path) -> None:
    """A live holder (this test holds the flock) whose record's host carries an OSC title
    sequence, a CSI and a bell: Busy names the holder with each control character as ``?``."""
    path = tmp_path / lock.NAME
    path.write_text(json.dumps({"pid": 4242, "host": "node\x1b]0;owned\x07\x1b[2J\x9b1m",
                                "started": "2026-12-01T00:00:00Z\r\n"}))
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Busy) as exc, lock.held(tmp_path, "r2"):
            pass
    finally:
        os.close(fd)
    msg = exc.value.message
    assert "pid 4242 on node?]0;owned??[2J?1m since 2026-12-01T00:00:00Z??" in msg, msg
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in msg)


@pytest.mark.parametrize("record", [b"[" * 100_000, bytes(range(256)), b'{"pid": 1e999}',
                                    b'{"pid": true, "host": 7}'])
def test_a_damaged_record_is_an_unknown_holder(tmp_path: Path, record: bytes) -> None:
    (tmp_path / lock.NAME).write_bytes(record)
    with lock.held(tmp_path, "r1") as note:
        assert note in ("", "took over the nightly lock of an unknown pid, which ended without "
                        "releasing it")
