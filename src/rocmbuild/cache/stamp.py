"""The verified stamp: ``<cache>/wheels/<key>/verified.json``, what the wheel's ``stat`` was when
its bytes were last hashed and matched entry.json's sha256. A lookup whose wheel has the same
size, mtime, ctime and inode as the stamp records, for the same recorded sha256, trusts it and
reads none of the wheel's bytes: a no-change nightly over 60 cells of 300 MB wheels stats 60
files instead of hashing 36 GB. Anything else (no stamp, a stamp that is not ours, another stat,
another sha256) is a full hash, then a fresh stamp: never a silent hit.

What a stamp cannot see: a change that leaves the stat as it was. Every write through the file
system moves ctime (which no call can set back) and a replaced file has another inode, so what
slips through is a change below the file system (bit rot, a write to the block device, a file
system bug) or one within the same timestamp tick as the file's last change. That tick is why a
stamp is written, and trusted, only when it was taken ``RACY_NS`` after the wheel's last change
(git's "racy" rule). What the stat misses, delivery catches: ``store.deliver`` and
``store.copy_to`` hash every byte they hand out, so a stamp only ever decides "this entry is
unchanged, nothing to do" (the nightly's SKIP), never what is installed or published.

The stamp is untrusted input (``core.untrusted``); writing it is best effort (a read-only cache
just hashes again) and leaves the entry's mtimes as they were (``cache prune``'s LRU reads them).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import fsutil, untrusted

NAME = "verified.json"
RACY_NS = 2_000_000_000
"""A stamp taken less than this after the wheel's last change (ctime) is not trusted: a write in
the same timestamp tick would not move the stat (coarse clocks, 2 s on some file systems)."""
_MAX_BYTES = 4096
_NS = 1 << 62  # bounds for the nanosecond fields (finite, well past the year 2100)


@dataclass(frozen=True)
class Stamp:
    """A wheel's stat when its bytes matched ``sha256``, and when that was (``verified_ns``, the
    wall clock read before the hash began)."""

    sha256: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    verified_ns: int

    def to_json(self) -> str:
        return json.dumps({"sha256": self.sha256, "size": self.size, "mtime_ns": self.mtime_ns,
                           "ctime_ns": self.ctime_ns, "ino": str(self.ino),
                           "verified_ns": self.verified_ns}, indent=1, sort_keys=True)


def now() -> int:
    """The clock a stamp's ``verified_ns`` is read from (before hashing)."""
    return time.time_ns()


def of(st: os.stat_result, sha256: str, verified_ns: int) -> Stamp:
    return Stamp(sha256, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, verified_ns)


def read(entry_dir: Path) -> Stamp | None:
    """The entry's stamp, or None: none there, or one that is not what ``write`` writes."""
    try:
        d = untrusted.obj(untrusted.read_json(entry_dir / NAME, _MAX_BYTES), NAME)
        ino = untrusted.text(d.get("ino"), "ino", 24)
        if not ino.isdigit() or not ino.isascii():
            return None
        return Stamp(untrusted.text(d.get("sha256"), "sha256", 64),
                     untrusted.integer(d.get("size"), "size", 1, _NS),
                     untrusted.integer(d.get("mtime_ns"), "mtime_ns", -_NS, _NS),
                     untrusted.integer(d.get("ctime_ns"), "ctime_ns", -_NS, _NS),
                     int(ino), untrusted.integer(d.get("verified_ns"), "verified_ns", 0, _NS))
    except (OSError, untrusted.BadJson):
        return None


def racy(s: Stamp) -> bool:
    """Taken too soon after the wheel's last change to vouch for it."""
    return s.verified_ns - max(s.ctime_ns, s.mtime_ns) < RACY_NS


def trusted(s: Stamp | None, st: os.stat_result, sha256: str) -> bool:
    """Whether ``s`` vouches for the wheel whose stat is ``st`` and whose recorded sha256 is
    ``sha256``: every field the same, and not racy."""
    return s is not None and not racy(s) and s == of(st, sha256, s.verified_ns)


def write(entry_dir: Path, s: Stamp) -> None:
    """Record ``s`` beside entry.json (atomically), when it is not racy; the entry directory's
    mtime, and so ``cache prune``'s last use, stays as it was. Never raises."""
    if racy(s):
        return
    with contextlib.suppress(OSError):
        before = entry_dir.lstat()
        times = (before.st_atime_ns, before.st_mtime_ns)
        fsutil.write_atomic(entry_dir / NAME, s.to_json(), sync_dir=False)
        os.utime(entry_dir / NAME, ns=times, follow_symlinks=False)
        os.utime(entry_dir, ns=times, follow_symlinks=False)
