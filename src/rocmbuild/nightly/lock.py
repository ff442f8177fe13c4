"""One nightly per workspace: a non-blocking flock on ``<workdir>/nightly.lock`` plus a JSON
record of the holder (pid, host, start time) in the same file.

A second start fails at once (``Busy``) naming the holder. The kernel drops the flock when its
holder dies, so a record left behind (the holder was killed, the machine rebooted) is stale: the
next nightly takes the lock over and says whose it was (``RunReport.lock_note``).

The lock is opened as every lock is (``core.lock.open_lock``): a ``nightly.lock`` that is a
symlink, a directory, a FIFO or a hard link to another file is refused (a usage error naming
it), never followed, waited on or truncated. The record is untrusted (``core.untrusted``): its
fields are shown with control characters replaced, so that a ``host`` holding terminal escapes
never reaches the terminal raw.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, lock, untrusted
from rocmbuild.core.errors import Busy, UsageError

NAME = "nightly.lock"
_MAX = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HINT = ("the nightly makes its lock itself: remove what stands at that path, or give another "
         "workdir (workdir in nightly.toml, or --workdir)")


def _read(fd: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, untrusted.BadJson):
        data = untrusted.loads(os.pread(fd, _MAX, 0) or b"{}")
        if isinstance(data, dict):
            return data
    return {}


def _shown(value: str, limit: int) -> str:
    """A record's text as it may be echoed: control characters (escape sequences among them)
    replaced by ``?``, at most ``limit`` characters."""
    return _CONTROL.sub("?", value[:limit])


def describe(rec: dict[str, Any]) -> str:
    pid, host, started = rec.get("pid"), rec.get("host"), rec.get("started")
    parts = [f"pid {pid}" if type(pid) is int and 0 < pid < 1 << 32 else "an unknown pid"]
    if isinstance(host, str) and host:
        parts.append(f"on {_shown(host, 100)}")
    if isinstance(started, str) and started:
        parts.append(f"since {_shown(started, 40)}")
    return " ".join(parts)


def _open(workdir: Path, path: Path) -> int:
    """The lock's descriptor; UsageError naming the path when the workdir or the lock is not
    what it must be (a file where the workdir belongs, a symlink or directory as the lock)."""
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        return lock.open_lock(path)
    except fsutil.NotRegular as exc:
        raise UsageError(f"{path}: {exc.strerror}; not a nightly lock", hint=_HINT) from None
    except OSError as exc:
        raise fsutil.os_error(UsageError, "nightly lock", exc, workdir, _HINT) from None


@contextlib.contextmanager
def held(workdir: Path, run_id: str) -> Iterator[str]:
    """Hold the workspace's nightly lock; yields the note about a stale holder taken over ("" when
    there was none). Raises Busy at once when a live nightly holds it."""
    path = workdir / NAME
    fd = _open(workdir, path)
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
