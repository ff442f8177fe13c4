"""Fetch: put a fresh copy of the pinned source at ``<workdir>/src/<recipe>/<key>/``.

- sdist: downloaded once into ``<cache>/downloads/<sha256>/`` (temp file, verified, renamed: a
  half-downloaded file is never used), checked against the pinned sha256 before anything is
  extracted, extracted with tarfile's ``data`` filter (no absolute paths, no ``..``, no links out).
- git: a mirror per URL in ``<cache>/git/``, cloned locally and checked out at the pinned commit,
  then the selected submodules.
- path: a copy of a local tree.
Network operations are tried three times with backoff (ROCMBUILD_RETRY_BACKOFF seconds, doubled)
when ``classify`` calls the failure transient; a repository or commit that does not exist, a 404,
a missing file are reported at once with the tool's own words.
"""

from __future__ import annotations

import calendar
import errno
import hashlib
import http.client
import lzma
import os
import re
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.core import fsutil, log, options
from rocmbuild.core.config import SOURCE_TREE_IGNORE
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import CommandFailed, FetchError
from rocmbuild.core.run import last_cause, redact
from rocmbuild.core.run import run as sh
from rocmbuild.recipe.plan import Plan
from rocmbuild.stages.context import Context

ATTEMPTS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """Why a network step failed, as ``classify`` reads it."""

    transient: bool
    """Retrying may help (the network, a server's 5xx, a timeout); else it cannot."""
    cause: str
    """One line: the tool's own words (git's ``fatal: ...``) or the HTTP status / OS error."""


# What git, curl and servers say. A transient cause is retried; anything else is not.
_TRANSIENT = re.compile(
    r"could not resolve (host|proxy)|temporary failure in name resolution|timed? ?out|"
    r"connection (refused|reset|closed|aborted)|failed to connect|couldn't connect|"
    r"network is unreachable|no route to host|early eof|rpc failed|remote end hung up|"
    r"unexpected disconnect|returned error: (5\d\d|408|429)|\bHTTP (5\d\d|408|429)\b|"
    r"gnutls_handshake|ssl_read|short read|incomplete ?read|transfer closed",
    re.IGNORECASE,
)
_NET_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT,
               errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EPIPE}


def classify(exc: BaseException) -> Failure:
    """The one place that decides whether a failed fetch step is worth another try."""
    if isinstance(exc, urllib.error.HTTPError):
        code = exc.code
        return Failure(code in (408, 425, 429) or code >= 500, f"HTTP {code} {exc.reason}")
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, socket.gaierror):
            return Failure(reason.errno == socket.EAI_AGAIN, f"cannot resolve the host: "
                           f"{reason.strerror or reason}")
        if isinstance(reason, OSError):
            return classify(reason)
        return Failure(bool(_TRANSIENT.search(str(reason))), str(reason))
    if isinstance(exc, CommandFailed):
        text = exc.detail or ""
        cause = last_cause(text) or exc.message
        if exc.returncode in (126, 127):  # the tool is missing: no retry brings it
            return Failure(False, exc.message)
        if "did not finish within" in exc.message:
            return Failure(True, exc.message)
        # git's output for one failed step is a few lines; a network word anywhere in it
        # (curl's "RPC failed" before git's "fatal: early EOF") makes it worth another try.
        return Failure(bool(_TRANSIENT.search(text or exc.message)), cause)
    if isinstance(exc, (TimeoutError, ConnectionError, http.client.HTTPException)):
        what = str(exc) or type(exc).__name__
        return Failure(True, f"{type(exc).__name__}: {what}" if str(exc) else what)
    if isinstance(exc, OSError):
        if exc.errno is None:  # our own "short read" and the like
            return Failure(True, str(exc))
        where = f"{exc.filename}: " if exc.filename else ""
        return Failure(exc.errno in _NET_ERRNOS, f"{where}{exc.strerror or exc}")
    return Failure(False, str(exc) or type(exc).__name__)


_RETRIED = (OSError, CommandFailed, http.client.HTTPException)
# OSErrors on this machine's own files (the cache, the workdir's logs), not on the source
_LOCAL_ERRNOS = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.EROFS, errno.ENOSPC,
                 errno.EDQUOT}


def _retry(what: str, fn: Callable[[], T], where: Path) -> T:
    """``fn()``, tried up to ATTEMPTS times while ``classify`` calls its failure transient.
    ``where``: the local directory it writes (named when a disk error names no path)."""
    what = redact(what)
    delay = options.env_float("ROCMBUILD_RETRY_BACKOFF", 2.0)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return fn()
        except _RETRIED as exc:
            if isinstance(exc, OSError) and exc.errno in _LOCAL_ERRNOS:
                # this machine's disk, not the source: no retry, name the path
                raise fsutil.os_error(FetchError, what, exc, where,
                                      fsutil.WORKDIR_HINT) from exc
            failure = classify(exc)
            cause = redact(failure.cause)
            if not failure.transient:
                raise FetchError(
                    f"{what}: {cause}",
                    hint="retrying cannot fix this: check the recipe's [source] (url, commit, "
                    "submodules) and that it exists and is readable from here",
                ) from exc
            if attempt == ATTEMPTS:
                raise FetchError(
                    f"{what}: failed {ATTEMPTS} times; last error: {cause}",
                    hint="check the network or proxy (https_proxy) and that the server is up, "
                    "then run again; completed downloads are kept in the cache",
                ) from exc
            log.warn(f"{what}: {cause}; retrying in {delay:g}s "
                     f"(attempt {attempt + 1} of {ATTEMPTS})")
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def download(url: str, sha256: str, cache: Path, what: str = "source.sdist.url") -> Path:
    """The verified archive in the cache, downloading it if needed. ``what``: the recipe key
    that names the URL, for messages."""
    name = url.rsplit("/", 1)[-1].split("?")[0] or "source.tar.gz"
    dest = cache / "downloads" / sha256 / name
    if dest.is_file():
        if sha256_file(dest) == sha256:
            fsutil.touch(dest.parent)  # its last use, for `cache prune`
            return dest
        log.warn(f"{dest}: cached file does not match its sha256; downloading again")
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)

    def attempt() -> Path:
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
        tmp = Path(tmp_name)
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "rocmbuild"})
            try:
                resp = urllib.request.urlopen(req, timeout=60)
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
        return _retry(f"download {url} ({what})", attempt, dest.parent)
    except _Mismatch as exc:
        raise FetchError(
            f"{url}: sha256 mismatch: the recipe pins {sha256}, the download is {exc.actual}",
            hint="the file changed upstream or the pin is wrong; nothing was extracted",
        ) from exc


class _Mismatch(Exception):
    def __init__(self, actual: str) -> None:
        super().__init__(actual)
        self.actual = actual


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


def git_epoch(repo: Path, commit: str, log_path: Path) -> int | None:
    """``commit``'s committer time (seconds since the epoch), read from ``repo`` (the cached
    mirror: the build tree has no ``.git``)."""
    res = sh(["git", "-C", str(repo), "log", "-1", "--format=%ct", commit], env=_git_env(),
             log_path=log_path, capture=True, check=False)
    out = res.output.strip().splitlines()
    return int(out[-1]) if res.returncode == 0 and out and out[-1].isdigit() else None


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


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def mirror_path(url: str, cache: Path) -> Path:
    """The cached bare mirror of ``url``: one per URL, shared by every recipe and submodule."""
    return cache / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _mirror(url: str, commit: str, cache: Path, env: dict[str, str], log_path: Path,
            what: str) -> Path:
    """The mirror of ``url`` holding ``commit``: cloned once, fetched again only when the commit
    is not in it yet. ``what`` names the recipe key for messages (``source.url``)."""
    mirror = mirror_path(url, cache)

    def git(*args: str, check: bool = True) -> int:
        return sh(["git", *args], env=env, log_path=log_path, check=check).returncode

    if not (mirror / "HEAD").exists():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        tmp = mirror.with_name(f".clone-{mirror.name}-{os.getpid()}")

        def clone() -> int:
            shutil.rmtree(tmp, ignore_errors=True)  # a failed attempt leaves a partial clone
            return git("clone", "--mirror", "--quiet", url, str(tmp))

        log.info(f"  cloning {redact(url)} into the cache (once per URL; large repositories "
                 "take minutes)")
        try:
            _retry(f"git clone {url} ({what})", clone, mirror.parent)
            os.replace(tmp, mirror)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def present() -> bool:
        return git("-C", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}", check=False) == 0

    if not present():
        log.info(f"  fetching {redact(url)}: {commit[:12]} is not in the cached mirror yet")
        _retry(f"git fetch {url} ({what})",
               lambda: git("-C", str(mirror), "fetch", "--quiet", "origin", "+refs/*:refs/*"),
               mirror)
        if not present():
            raise FetchError(
                f"{url}: commit {commit} not found",
                hint="check source.commit in the recipe (a full 40-hex sha that exists upstream)"
                if what == "source.url" else
                "the superproject pins a submodule commit its URL does not have; check "
                "source.commit and the submodule's URL in .gitmodules",
            )
    fsutil.touch(mirror)  # its last use, for `cache prune`
    return mirror


def resolve_url(parent: str, url: str) -> str:
    """A submodule URL from .gitmodules, a relative one (``../x.git``, ``./x``) resolved against
    the superproject's URL as git does (each ``../`` drops one path component)."""
    if not url.startswith(("./", "../")):
        return url
    base = parent.rstrip("/")
    rest = url
    while rest.startswith(("./", "../")):
        if rest.startswith("./"):
            rest = rest[2:]
            continue
        rest = rest[3:]
        cut = max(base.rfind("/"), base.rfind(":") if "://" not in base else -1)
        if cut <= 0 or base[:cut].endswith(":/"):
            raise FetchError(f"{redact(url)}: a relative submodule URL that leaves "
                             f"{redact(parent)}", hint="fix the submodule URL in .gitmodules")
        base = base[:cut + 1] if base[cut] == ":" else base[:cut]  # host:path keeps its ':'
    sep = ":" if base.endswith(":") else "/"
    return f"{base.rstrip(':')}{sep}{rest}" if rest else base


def git_checkout(
    url: str, commit: str, submodules: tuple[str, ...], cache: Path, dest: Path, log_path: Path
) -> Path:
    """A fresh checkout of ``commit`` at ``dest``, from a per-URL mirror in the cache; each
    submodule (recursively for ``*``) from its own per-URL mirror in the same cache. The tree
    is left without ``.git`` (see ``_export``)."""
    env = _git_env()

    def git(*args: str, check: bool = True) -> int:
        return sh(["git", *args], env=env, log_path=log_path, check=check).returncode

    mirror = _mirror(url, commit, cache, env, log_path, "source.url")
    git("clone", "--quiet", "--no-checkout", str(mirror), str(dest))
    git("-C", str(dest), "remote", "set-url", "origin", url)
    git("-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
        commit)
    if submodules:
        which = "all, recursively" if "*" in submodules else ", ".join(submodules)
        known = _gitmodules(dest, env, log_path)
        for sub in submodules:
            if sub != "*" and sub not in known:
                raise FetchError(
                    f"{url} @ {commit[:12]}: submodules: {sub!r} is not a submodule of this "
                    f"commit (its .gitmodules has: {', '.join(known) or 'none'})",
                    hint="fix source.submodules (or the variant's submodules) in the recipe",
                )
        log.info(f"  updating submodules ({which}) from their cached mirrors")
        _submodules(dest, url, None if "*" in submodules else submodules, cache, env, log_path,
                    f"{url} @ {commit[:12]}")
    _export(dest)
    return dest


def _submodules(tree: Path, parent_url: str, only: tuple[str, ...] | None, cache: Path,
                env: dict[str, str], log_path: Path, where: str) -> None:
    """Check out the submodules of ``tree`` (``only`` these paths; None: all, recursively), each
    from the mirror of its URL: the superproject's ``submodule.<name>.url`` is pointed at the
    mirror for the update, so nothing is fetched from upstream once the mirror holds the
    pinned commit (a cut network then still builds)."""

    def git(*args: str) -> str:
        return sh(["git", *args], env=env, log_path=log_path, capture=True).output

    for name, path, raw_url in _gitmodule_entries(tree, env, log_path):
        if only is not None and path not in only:
            continue
        line = git("-C", str(tree), "ls-tree", "HEAD", "--", path).split()
        if len(line) < 3 or line[1] != "commit":
            continue  # listed in .gitmodules but no gitlink at this commit: git skips it too
        pinned = line[2]
        url = resolve_url(parent_url, raw_url)
        try:
            mirror = _mirror(url, pinned, cache, env, log_path, f"submodule {path}")
        except FetchError as exc:
            raise FetchError(
                f"{where}: submodule {path} from {redact(url)}: {exc.message}",
                hint="check that the submodule URL is reachable (a mirror must carry it), or "
                "build a variant that does not need it: a variant's `submodules = [...]` "
                "narrows the source's list",
            ) from exc
        git("-C", str(tree), "config", f"submodule.{name}.url", str(mirror))
        git("-C", str(tree), "-c", "protocol.file.allow=always", "submodule", "update",
            "--init", "--quiet", "--", path)
        git("-C", str(tree), "config", f"submodule.{name}.url", url)
        if only is None:
            _submodules(tree / path, url, None, cache, env, log_path, where)


def _export(tree: Path) -> None:
    """Drop ``.git`` from the checkout and its submodules: the build tree is a plain tree, like
    an sdist. A build that sees ``.git`` may run git against the network (flash-attn's setup.py
    runs ``git submodule update --init`` for CK and cutlass when the tree has one); the pin is
    in the plan and the provenance instead."""
    for root, dirs, files in os.walk(tree):
        if ".git" in dirs:
            dirs.remove(".git")
            git_dir = os.path.join(root, ".git")
            if os.path.islink(git_dir):
                os.unlink(git_dir)
            else:
                shutil.rmtree(git_dir)
        if ".git" in files:  # a submodule's gitfile ("gitdir: ../.git/modules/x")
            os.unlink(os.path.join(root, ".git"))


def _gitmodules(tree: Path, env: dict[str, str], log_path: Path) -> dict[str, str]:
    """Submodule path -> URL (user:password masked), from the checked-out .gitmodules."""
    return {path: redact(url) for _, path, url in _gitmodule_entries(tree, env, log_path)}


def _gitmodule_entries(tree: Path, env: dict[str, str], log_path: Path
                       ) -> list[tuple[str, str, str]]:
    """(name, path, url) of each submodule in the checked-out .gitmodules (none without one)."""
    if not (tree / ".gitmodules").is_file():
        return []
    res = sh(["git", "-C", str(tree), "config", "-f", ".gitmodules", "--get-regexp",
              r"^submodule\..*\.(path|url)$"], env=env, log_path=log_path, capture=True,
             check=False)
    names: dict[str, dict[str, str]] = {}
    for line in res.output.splitlines():
        key, _, value = line.partition(" ")
        name, _, what = key[len("submodule."):].rpartition(".")
        names.setdefault(name, {})[what] = value
    return [(name, v["path"], v.get("url", "")) for name, v in names.items()
            if "path" in v and v.get("url")]


def _discard(dest: Path) -> None:
    """Move an old tree (and leftovers of earlier runs) aside and delete them in the background:
    a built flash-attn tree has ~7,600 files, and deleting them in line cost seconds."""
    old = [p for p in dest.parent.glob(f"{dest.name}.old-*")]
    if dest.exists():
        aside = dest.with_name(f"{dest.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(dest, aside)
        old.append(aside)
    if old:

        def remove() -> None:
            for p in old:
                shutil.rmtree(p, ignore_errors=True)

        threading.Thread(target=remove, daemon=True).start()


def fetch_downloads(plan: Plan, cache: Path) -> tuple[tuple[str, Path], ...]:
    """The plan's [[downloads]], verified and cached by sha256: variable -> path. A single
    download that is not extracted is handed over as the file; otherwise the downloads naming
    one variable are extracted (or copied) into one directory, in recipe order, cached under
    ``<cache>/extracted/<digest of their sha256s>`` (made aside and renamed into place)."""
    groups: dict[str, list[tuple[int, Path, bool]]] = {}
    for i, d in enumerate(plan.downloads):
        f = download(d.url, d.sha256, cache, f"downloads {d.name}: url")
        groups.setdefault(d.env, []).append((i, f, d.extract))
    out: list[tuple[str, Path]] = []
    for var, items in groups.items():
        if len(items) == 1 and not items[0][2]:
            out.append((var, items[0][1]))
            continue
        key = hashlib.sha256("\0".join(
            f"{plan.downloads[i].sha256}:{int(x)}" for i, _, x in items).encode()).hexdigest()
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
        out.append((var, dest))
    return tuple(out)


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    src = plan.source
    dest = ctx.ws.src / plan.recipe / plan.short_key
    dest.parent.mkdir(parents=True, exist_ok=True)
    _discard(dest)
    log_path = ctx.log_dir / "fetch.log"
    if src.kind == "sdist":
        cached = (ctx.ws.cache / "downloads" / src.sha256).is_dir()
        archive = download(src.url, src.sha256, ctx.ws.cache)
        epoch = extract_dated(archive, dest)[1]
        reason = f"sdist {archive.name}" + (" (cached download)" if cached else "")
    elif src.kind == "git":
        git_checkout(src.url, src.commit, src.submodules, ctx.ws.cache, dest, log_path)
        epoch = git_epoch(mirror_path(src.url, ctx.ws.cache), src.commit, log_path)
        reason = f"git {src.url} @ {src.commit[:12]}"
    else:
        # a local tree's file times say when it was checked out or edited, not what it holds
        # (its content is in the cache key): its builds use 1980-01-01 (docs/reproducible.md)
        epoch = None
        origin = Path(src.path)  # absolute: render resolved it against the recipe file
        shutil.copytree(
            origin,
            dest,
            ignore=shutil.ignore_patterns(*SOURCE_TREE_IGNORE),
        )
        reason = f"path {origin}"
    got = fetch_downloads(plan, ctx.ws.cache) if plan.downloads else None
    if got:
        reason += f"; {len(plan.downloads)} download(s)"
    return StageResult(Status.SUCCESS, time.monotonic() - start, reason, log_path,
                       Artifacts(tree=dest, downloads=got, source_date_epoch=epoch))
