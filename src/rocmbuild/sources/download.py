"""Verified downloads into the cache: ``<cache>/downloads/<sha256>/<name>``, written to a temp
file, checked against the pinned sha256 and only then renamed into place (a half-downloaded or
wrong file is never used); a recipe's [[downloads]] merged into one cached directory per
variable.

Credentials never come from the recipe (``recipe.check`` refuses a URL holding them): an http(s)
request carries Basic auth for its host from ``~/.netrc``, or the file ``NETRC`` names, as curl,
git and pip read it (urllib reads no netrc). Each request of a redirect chain gets its own
host's entry, never the first host's."""

from __future__ import annotations

import base64
import hashlib
import netrc
import os
import shutil
import stat
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from rocmbuild.core import fsutil, log
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import FetchError
from rocmbuild.core.log import redact
from rocmbuild.sources.archive import extract
from rocmbuild.sources.retry import retry


def download(url: str, sha256: str, cache: Path, what: str = "source.sdist.url") -> Path:
    """The verified archive in the cache, downloading it if needed. ``what``: the recipe key
    that names the URL, for messages."""
    # the path's last part (never the host part, which may hold user:password@)
    name = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1] or "source.tar.gz"
    dest = cache / "downloads" / sha256 / name
    if dest.is_file():
        if sha256_file(dest) == sha256:
            fsutil.touch(dest.parent)  # its last use, for `cache prune`
            return dest
        log.warn(f"{dest}: cached file does not match its sha256; downloading again")
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    web = urllib.parse.urlsplit(url).scheme.lower() in ("http", "https")
    opener = urllib.request.build_opener(_NetrcAuth(netrc_file() if web else None))

    def attempt() -> Path:
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
        tmp = Path(tmp_name)
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "rocmbuild"})
            try:
                resp = opener.open(req, timeout=60)
            except urllib.error.HTTPError as exc:
                exc.close()  # its response body holds the socket; the retry opens a new one
                raise
            total = int(resp.headers.get("Content-Length") or 0)
            h = hashlib.sha256()
            got = 0
            with os.fdopen(fd, "wb") as out, resp:
                last_report = time.monotonic()
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
                    h.update(chunk)
                    got += len(chunk)
                    if log.level() >= 1 and time.monotonic() - last_report > 2:
                        pct = f" ({100 * got // total}%)" if total else ""
                        log.info(f"  downloading {name}: {got / 1e6:.1f} MB{pct}")
                        last_report = time.monotonic()
                out.flush()
                os.fsync(out.fileno())
            if total and got != total:
                raise OSError(f"short read: {got} of {total} bytes")
            actual = h.hexdigest()
            if actual != sha256:
                raise _Mismatch(actual)
            os.replace(tmp, dest)
            return dest
        finally:
            if tmp.exists():
                tmp.unlink()

    try:
        return retry(f"download {redact(url)} ({what})", attempt, dest.parent)
    except _Mismatch as exc:
        raise FetchError(
            f"{redact(url)}: sha256 mismatch: the recipe pins {sha256}, the download is "
            f"{exc.actual}",
            hint="the file changed upstream or the pin is wrong; nothing was extracted",
        ) from exc


MAX_NETRC = 1 << 20
"""A netrc file larger than this is no netrc file (a few lines per host)."""
NETRC_HINT = ("write it as `machine <host> login <user> password <token>` lines (NETRC names "
              "another file than ~/.netrc)")


def netrc_file() -> netrc.netrc | None:
    """The netrc file the user keeps (``NETRC``, else ``~/.netrc``), parsed; None when there is
    none. It is read only when it is a regular file (a FIFO would block the fetch) of at most
    MAX_NETRC bytes; a problem is a FetchError naming the file and line, never a token of it."""
    path = Path(os.environ.get("NETRC") or os.path.expanduser("~/.netrc"))
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FetchError(f"{path}: cannot read: {exc.strerror or exc}", hint=NETRC_HINT) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_NETRC:
        raise FetchError(f"{path}: not a netrc file (a regular file of at most {MAX_NETRC} "
                         "bytes)", hint=NETRC_HINT)
    try:
        return netrc.netrc(str(path))
    except netrc.NetrcParseError as exc:  # its message may quote a password: the line only
        raise FetchError(f"{path}: line {exc.lineno}: not a netrc entry we can read",
                         hint=NETRC_HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise FetchError(f"{path}: cannot read: {why or exc}", hint=NETRC_HINT) from None


class _NetrcAuth(urllib.request.BaseHandler):
    """Basic auth for each http(s) request's host from the netrc file, as an unredirected
    header: a redirect to another host is a new request, with that host's entry or none."""

    def __init__(self, entries: netrc.netrc | None) -> None:
        self.entries = entries

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        host = urllib.parse.urlsplit(req.full_url).hostname
        found = self.entries.authenticators(host) if self.entries and host else None
        if found and not req.has_header("Authorization"):
            login, _account, password = found
            token = base64.b64encode(f"{login}:{password or ''}".encode()).decode("ascii")
            req.add_unredirected_header("Authorization", f"Basic {token}")
        return req

    https_request = http_request


class _Mismatch(Exception):
    def __init__(self, actual: str) -> None:
        super().__init__(actual)
        self.actual = actual


class Pinned(Protocol):
    """One [[downloads]] entry as ``fetch_downloads`` reads it (a recipe's Download is one)."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def extract(self) -> bool: ...
    @property
    def env(self) -> str: ...
    @property
    def subdir(self) -> str: ...


def fetch_downloads(downloads: Sequence[Pinned], cache: Path
                    ) -> tuple[tuple[str, Path], ...]:
    """A plan's [[downloads]], verified and cached by sha256: variable -> path. A single
    download that is not extracted is handed over as the file; otherwise the downloads naming
    one variable are extracted (or copied) into one directory, in recipe order, cached under
    ``<cache>/extracted/<digest of their sha256s>`` (made aside and renamed into place); a
    download's ``subdir`` hands over that directory of the extracted tree instead (the first
    one of the variable's downloads that names one)."""
    groups: dict[str, list[tuple[int, Path, bool]]] = {}
    for i, d in enumerate(downloads):
        f = download(d.url, d.sha256, cache, f"downloads {d.name}: url")
        groups.setdefault(d.env, []).append((i, f, d.extract))
    out: list[tuple[str, Path]] = []
    for var, items in groups.items():
        if len(items) == 1 and not items[0][2]:
            out.append((var, items[0][1]))
            continue
        key = hashlib.sha256("\0".join(
            f"{downloads[i].sha256}:{int(x)}" for i, _, x in items).encode()).hexdigest()
        dest = cache / "extracted" / key[:32]
        fsutil.touch(dest)  # its last use, for `cache prune` (nothing when not there yet)
        if not dest.is_dir():
            dest.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{key[:12]}-"))
            try:
                merged = work / "tree"
                merged.mkdir()
                for i, f, unpack in items:
                    if unpack:
                        part = extract(f, work / f"part{i}")
                        shutil.copytree(part, merged, symlinks=True, dirs_exist_ok=True)
                    else:
                        shutil.copy2(f, merged / f.name)
                os.replace(merged, dest)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        sub = next((downloads[i].subdir for i, _, _ in items if downloads[i].subdir), "")
        inside = dest / sub
        if sub and (not inside.is_dir() or inside.is_symlink()):
            raise FetchError(f"downloads {downloads[items[0][0]].name}: the archive has no "
                             f"directory {sub!r} (subdir)",
                             hint="check the recipe's [[downloads]] subdir against the archive")
        out.append((var, inside))
    return tuple(out)
