"""One nightly per workspace: a non-blocking flock on ``<workdir>/nightly.lock`` plus a JSON
record of the holder (pid, host, start time) in the same file.

A second start fails at once (``Busy``) naming the holder. The kernel drops the flock when its
holder dies, so a record left behind (the holder was killed, the machine rebooted) is stale: the
next nightly takes the lock over and says whose it was (``RunReport.lock_note``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocmbuild.core.errors import Busy

NAME = "nightly.lock"
_MAX = 4096


def _read(fd: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
        data = json.loads(os.pread(fd, _MAX, 0).decode() or "{}")
        if isinstance(data, dict):
            return data
    return {}


def describe(rec: dict[str, Any]) -> str:
    pid, host, started = rec.get("pid"), rec.get("host"), rec.get("started")
    parts = [f"pid {pid}" if isinstance(pid, int) else "an unknown pid"]
    if isinstance(host, str) and host:
        parts.append(f"on {host[:100]}")
    if isinstance(started, str) and started:
        parts.append(f"since {started[:40]}")
    return " ".join(parts)


@contextlib.contextmanager
def held(workdir: Path, run_id: str) -> Iterator[str]:
    """Hold the workspace's nightly lock; yields the note about a stale holder taken over ("" when
    there was none). Raises Busy at once when a live nightly holds it."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{path}: another nightly is running here ({describe(_read(fd))})",
                       hint="wait for it to finish, or run this one with another workdir") \
                from None
        stale = _read(fd)
        note = ""
        if stale.get("pid") is not None:
            note = (f"took over the nightly lock of {describe(stale)}, which ended without "
                    "releasing it")
        record = {"pid": os.getpid(), "host": socket.gethostname(), "run": run_id,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        try:
            yield note
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # a clean end leaves no record: nothing to take over
    finally:
        os.close(fd)
