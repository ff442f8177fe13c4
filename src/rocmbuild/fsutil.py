"""Writing files so that no reader (and no crash) ever sees a partial one.

Every write goes to a temporary file in a private directory next to the target (so the temporary
file already has the target's name, which ``wheel.wheelfile.WheelFile`` needs), is fsynced, and is
renamed over the target with ``os.replace``; then the target's directory is fsynced so the rename
itself survives a power loss. A killed writer leaves at most a ``.tmp-*`` directory behind, never a
half-written target.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

TMP_PREFIX = ".tmp-"  # names of temporaries; whoever owns a tree may remove leftovers by it


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (creations, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path, *, sync_dir: bool = True) -> Iterator[Path]:
    """Yield a temporary path with ``path``'s file name, in the same directory tree; when the block
    exits cleanly, fsync it and rename it over ``path`` (then fsync the directory unless
    ``sync_dir`` is False: a caller that fsyncs the directory itself later, once, passes False).
    On an exception the temporary is removed and ``path`` is untouched."""
    path = Path(path)
    tmp_dir = Path(tempfile.mkdtemp(dir=path.parent, prefix=TMP_PREFIX))
    tmp = tmp_dir / path.name
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
        if sync_dir:
            fsync_dir(path.parent)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def write_atomic(path: Path, data: bytes | str, *, sync_dir: bool = True) -> None:
    """Write ``data`` (str is UTF-8 encoded) to ``path``: all of it, or nothing."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path, sync_dir=sync_dir) as tmp:
        tmp.write_bytes(blob)


def copy_atomic(src: Path, dst: Path, *, link: bool = False, sync_dir: bool = True) -> None:
    """Put the bytes of ``src`` at ``dst`` (replacing it): all of them, or nothing. With ``link``,
    a hard link (same inode, no copy) when both are on one filesystem, else a copy."""
    with atomic_path(dst, sync_dir=sync_dir) as tmp:
        if link:
            try:
                os.link(src, tmp)
                return
            except OSError:
                pass  # another filesystem, or no hard links there: copy
        shutil.copyfile(src, tmp)
