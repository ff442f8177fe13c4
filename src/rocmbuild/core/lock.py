"""Advisory file locks (flock). The kernel drops a lock when its holder dies (SIGKILL included),
so there is never a stale lock to clean up; SIGINT/SIGTERM unwind through ``held``'s ``finally``
and release it at once. The holder writes its pid into the file, so a waiter can say whom it
waits for."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from rocmbuild.core import fsutil, log

PID_WIDTH = 20
"""The holder's pid is written right-aligned in this many characters (and a newline)."""


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip() or "0")
        if pid > 0:
            return f", held by pid {pid}"
    return ""


def open_lock(path: Path) -> int:
    """A read-write descriptor of the lock file ``path`` (created if missing): a regular file
    with no other name (``fsutil.open_regular``: never through a symlink, never a FIFO or a
    directory; and no hard link to another file, which writing the holder would change);
    NotRegular (an OSError naming ``path``) otherwise."""
    fd = fsutil.open_regular(path, os.O_RDWR | os.O_CREAT)
    if os.fstat(fd).st_nlink > 1:
        os.close(fd)
        raise fsutil.NotRegular(errno.EMLINK, "is a hard link to another file, not a lock of "
                                "its own", os.fspath(path))
    return fd


@contextlib.contextmanager
def held(path: Path, what: str, shared: bool = False) -> Iterator[None]:
    """Hold an exclusive (or ``shared``) lock on ``path`` (created if missing); ``what`` names
    it for people. Only an exclusive holder writes its pid. A lock path that is a symlink, a
    directory, a FIFO or a hard link is refused (``open_lock``: ``fsutil.NotRegular``, an
    OSError naming it), never followed or written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock(path)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"waiting for {what} ({path}{_holder(fd)})")
            fcntl.flock(fd, mode)
        if shared:
            yield
            return
        with contextlib.suppress(OSError):  # only informative: a full disk must not stop us
            # the same length every time, over whatever is there: no truncation, which costs
            # a cache hit milliseconds (ext4 writes a file truncated to 0 out when it is closed)
            os.pwrite(fd, f"{os.getpid():>{PID_WIDTH}}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
