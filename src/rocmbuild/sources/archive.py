"""Safe extraction of a tar or zip archive into a fresh directory (no absolute paths, no ``..``,
no links out, no device files; tarfile's ``data`` filter on top), and the archive's date: the
newest member's modification time, the SOURCE_DATE_EPOCH of a build from it."""

from __future__ import annotations

import calendar
import lzma
import os
import shutil
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from rocmbuild.core.errors import FetchError


def extract(archive: Path, dest: Path) -> Path:
    """Extract safely into a fresh ``dest``; returns the source root (the single top dir)."""
    return extract_dated(archive, dest)[0]


def extract_dated(archive: Path, dest: Path) -> tuple[Path, int | None]:
    """``extract``, and the archive's epoch from the members it read: the newest member's
    modification time (an sdist's own time, the SOURCE_DATE_EPOCH of its build), None when no
    member is dated; one pass over the archive, not a second one for the date.

    Refused as unsafe (FetchError, nothing left behind): absolute member paths, ``..``, links
    that leave the tree, device files and fifos. A truncated or unreadable archive, or one that
    is not a tar or zip at all, is a FetchError too, and so is an OSError writing the tree."""
    unsafe = "the archive is unsafe; check the source pin (url and sha256)"
    try:
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".extract-"))
    except OSError as exc:
        raise FetchError(f"{dest.parent}: cannot create the extraction directory: "
                         f"{exc.strerror or exc}",
                         hint="check that the workdir is a writable directory with free space"
                         ) from exc
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    why = _unsafe_name(info.filename)
                    if why is None and (info.external_attr >> 16) & 0o170000 == 0o120000:
                        why = "a symbolic link"
                    if why:
                        raise FetchError(f"{archive.name}: unsafe member refused: "
                                         f"{info.filename!r} is {why}", hint=unsafe)
                zf.extractall(tmp)
                epoch = _zip_epoch(zf.infolist())
        else:
            with tarfile.open(archive) as tf:
                for member in tf.getmembers():
                    why = _unsafe_name(member.name) or _unsafe_tar_member(member)
                    if why:
                        raise FetchError(f"{archive.name}: unsafe member refused: "
                                         f"{member.name!r} is {why}", hint=unsafe)
                try:
                    tf.extractall(tmp, filter="data")
                except tarfile.FilterError as exc:
                    raise FetchError(f"{archive.name}: unsafe member refused: {exc}",
                                     hint=unsafe) from exc
                epoch = _tar_epoch(tf.getmembers())  # read once, kept by tarfile
        entries = list(tmp.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
        os.replace(root, dest)
        return dest, epoch
    except FetchError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError, zlib.error,
            lzma.LZMAError) as exc:
        first = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        raise FetchError(f"{archive.name}: not a readable tar or zip archive "
                         f"(truncated, corrupt or another format: {first})",
                         hint="check the source pin; delete the cached download "
                         f"{archive} to fetch it again") from exc
    except OSError as exc:
        where = exc.filename or dest
        raise FetchError(f"{archive.name}: extracting into {where} failed: "
                         f"{exc.strerror or exc}",
                         hint="check free space and permissions of the workdir "
                         "(--workdir / ROCMBUILD_WORKDIR)") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _newest(times: Iterator[int]) -> int | None:
    try:
        return max((t for t in times if t > 0), default=None)
    except (ValueError, OverflowError):  # a date no clock has (an infinite pax mtime)
        return None


def _zip_epoch(infos: list[zipfile.ZipInfo]) -> int | None:
    return _newest(calendar.timegm((*i.date_time, 0, 0, 0)) for i in infos)


def _tar_epoch(members: list[tarfile.TarInfo]) -> int | None:
    return _newest(int(m.mtime) for m in members)


def _unsafe_name(name: str) -> str | None:
    """Why an archive member's name is unsafe, or None."""
    if name.startswith(("/", "\\")) or (len(name) > 2 and name[1] == ":" and name[2] in "/\\"):
        return "an absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "a path with '..'"
    return None


def _unsafe_tar_member(m: tarfile.TarInfo) -> str | None:
    if m.isdev() or m.isfifo():
        return "a device file or fifo"
    if m.issym() or m.islnk():
        target = m.linkname if m.islnk() else os.path.join(os.path.dirname(m.name), m.linkname)
        if m.linkname.startswith("/") or os.path.normpath(target).startswith(".."):
            return f"a link out of the tree (to {m.linkname!r})"
    return None
