"""Advisory file locks (flock). The kernel drops a lock when its holder dies, so there is never
a stale lock to clean up; a waiter says what it waits for."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from rocmbuild import log


@contextlib.contextmanager
def held(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing); ``what`` names it for people."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"waiting for {what} ({path})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
