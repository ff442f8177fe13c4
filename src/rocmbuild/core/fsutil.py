"""Writing files so that no reader (and no crash) ever sees a partial one.

Every write goes to a temporary file in a private directory next to the target (so the temporary
file already has the target's name, which ``wheel.wheelfile.WheelFile`` needs), is fsynced, and is
renamed over the target with ``os.replace``; then the target's directory is fsynced so the rename
itself survives a power loss. A killed writer leaves at most a ``.tmp-*`` directory behind, never a
half-written target. ``read_capped`` is the other direction: a small file we did not write, read
once, never through a symlink, never blocking on a FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from rocmbuild.core.errors import RocmbuildError

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
    import tempfile  # only where something is written: a cache hit writes nothing here

    path = Path(path)
    try:
        tmp_dir = Path(tempfile.mkdtemp(dir=path.parent, prefix=TMP_PREFIX))
    except OSError as exc:  # named by the directory, never by the temporary's random name
        raise OSError(exc.errno, exc.strerror, os.fspath(path.parent)) from None
    tmp = tmp_dir / path.name
    try:
        yield tmp
        try:
            fsync_file(tmp)
            os.replace(tmp, path)
        except OSError as exc:  # e.g. a directory at ``path``: named, not the temporary
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
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


WORKDIR_HINT = ("check that the workdir (--workdir / ROCMBUILD_WORKDIR) and the cache dir "
                "(--cache-dir / ROCMBUILD_CACHE_DIR) are writable directories with free space, "
                "and move away a file that stands where a directory belongs")


def in_the_way(path: Path) -> Path | None:
    """The first of ``path``'s parents (or ``path``) that exists and is not a directory."""
    for p in reversed((path, *path.parents)):
        if os.path.lexists(p) and not p.is_dir():
            return p
    return None


def os_error(error: type[RocmbuildError], what: str, exc: OSError, where: Path,
             hint: str) -> RocmbuildError:
    """``error`` for an OSError met while doing ``what``: one line naming the path (the file in
    the way when a directory was expected; ``where`` for a full disk, or when the OSError names
    no path) and the system's reason."""
    reason = exc.strerror or type(exc).__name__
    if exc.filename is None or exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # a full disk is ``where``'s; the OSError may name the file read (shutil.copyfile)
        return error(f"{what}: writing under {where}: {reason}", hint=hint)
    path = Path(os.fsdecode(exc.filename))
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        blocker = in_the_way(path)
        if blocker is not None:
            return error(f"{what}: {blocker}: is a file, not a directory", hint=hint)
    return error(f"{what}: {path}: {reason}", hint=hint)


@contextlib.contextmanager
def os_errors(error: type[RocmbuildError], what: str, where: Path, hint: str) -> Iterator[None]:
    """Turn an OSError raised in the block into ``error`` (see ``os_error``); whoever writes in
    the block writes atomically or cleans up in ``finally``, so nothing partial is left."""
    try:
        yield
    except OSError as exc:
        raise os_error(error, what, exc, where, hint) from exc


def shown(path: Path) -> Path:
    """``path`` as the user sees it: relative to the current directory when inside it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def touch(path: Path) -> None:
    """Set ``path``'s mtime to now (a record of its last use, which `cache prune` reads); a
    read-only file system is not an error."""
    with contextlib.suppress(OSError):
        os.utime(path, follow_symlinks=False)


def disk_bytes(tree: Path) -> int:
    """Disk blocks used by the files under ``tree`` (symlinks not followed; 0 when absent): the
    one disk-use walk (preflight's measured tree, a nightly cell's disk)."""
    total = 0
    stack = [tree]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False):
                        stack.append(Path(e.path))
        except OSError:
            continue
    return total


NAME_MAX = 255
PATH_MAX = 4095
"""Linux's limits, in bytes: a longer name is ENAMETOOLONG from every call that takes it."""


def name_problem(path: str | Path) -> str | None:
    """Why ``path`` (a name a user wrote that becomes a path: a recipe, a stack member, a
    dependency, a flag's file) can be no path here, checked before any call takes it (None:
    it can): a part longer than NAME_MAX bytes, the whole longer than PATH_MAX, or a NUL."""
    text = os.fspath(path)
    if "\0" in text:
        return "holds a NUL character"
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > PATH_MAX:
        return f"is {len(raw)} bytes long (a path is at most {PATH_MAX})"
    longest = max((len(p) for p in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        return f"has a part of {longest} bytes (a file name is at most {NAME_MAX})"
    return None


class TooLarge(ValueError):
    """``read_capped``: the file is larger than the limit."""


class NotRegular(OSError):
    """``open_regular``: the path is a symlink, a directory, a FIFO or a device."""


_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of the regular file ``path`` (``flags`` as for ``os.open``, e.g. ``O_RDWR |
    O_CREAT`` for a lock), never through a symlink and never blocking on a FIFO: NotRegular (an
    OSError naming ``path``) for anything else; other OSErrors as they come. For every file we
    did not just make: locks, state, reports, manifests, memos, baselines, configs."""
    try:
        fd = os.open(path, flags | _OPEN, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(errno.ELOOP, "is a symbolic link, which rocmbuild does not follow",
                             os.fspath(path)) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):  # ENXIO: a FIFO opened to write
            raise NotRegular(exc.errno, "is not a regular file", os.fspath(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(errno.EINVAL, "is not a regular file", os.fspath(path))
    if not flags & (os.O_WRONLY | os.O_RDWR):
        os.set_blocking(fd, True)
    return fd


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, read once (``open_regular``: NotRegular for a
    symlink, FIFO or directory); TooLarge when it is larger than ``limit`` bytes; OSError from
    the open as it comes."""
    with os.fdopen(open_regular(path), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit} bytes")
    return data
