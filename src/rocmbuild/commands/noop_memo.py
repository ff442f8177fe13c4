"""The no-op rebuild's short path: the same ``rocmbuild <recipe> ...`` again, nothing changed.

A full run renders the plan to learn its cache key (recipe model, flags, settings, host): most of
what a cache hit cost. So after a build or a hit that delivered a wheel, ``build`` leaves a
*memo* in the cache, ``<cache>/memo/<inputs>.json``. ``<inputs>`` is a digest of everything the
command line's meaning can depend on without reading a file the recipe names: the node's name,
the arguments, the current directory, the environment (all of it but a few per-login variables,
``VOLATILE_ENV``), ``./pyproject.toml``, the interpreter and its ``sys.path``, and rocmbuild's
own source files (path, size, mtime). The memo holds what rendering read besides them: the
recipe file and its patches (sha256), the recipe-search candidates in front of it (still
absent), the ``--recipes`` directories (still there); how the host was detected and a digest of
what was found; the wheel directory; the log level; and the cache key.

``serve`` runs first in every command line. With a memo for these inputs, unchanged files and a
host that, detected again now, has the same digest, it serves the hit as the full path does,
through the same function (``pipeline.deliver.held``: the build locks, ``cache.lookup``, the
failed/broken check, delivery, the use recorded), with the same lines on stderr. Anything else
(no memo, a bad one, a changed file, another host, the entry gone, a wheel recorded as failed or
its bytes in ``broken/``, any error) is a miss: the full path runs, decides, reports, and writes
a new memo. A recipe with a local source (a ``path`` source or a local git
repository, whose content only the full path hashes) gets no memo.

The memo proves that the entry it names is the one its inputs name: its ``seal`` is a sha256
over the inputs' digest (the memo's own file name) and every other value of the memo, the cache
key among them. A memo edited by hand (its ``cache_key`` set to another entry of the cache, say
another arch's build of the same recipe), or copied to another command line's name, no longer
matches its seal: a miss, and the full path renders and serves the entry these inputs name. (The
seal is no signature: whoever may write the cache may also write its entries; it makes a memo
that ``remember`` did not write for these inputs worth nothing.)

The memo is read like any cache file (``core.untrusted.read_json``): size-capped, a regular file
(no symlink followed, a FIFO never waited on), nesting and numbers bounded, every value
type-checked; the files it names are hashed only when they are regular files. It cannot send a
wheel anywhere else: the wheel and cache directories are resolved here from the flags and
settings, and must be the ones the memo recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmbuild.cache import store as cache
from rocmbuild.core import config, fsutil, log, options, untrusted
from rocmbuild.core.errors import RocmbuildError, ValidationError
from rocmbuild.pipeline import deliver

if TYPE_CHECKING:
    from rocmbuild.core.config import Workspace
    from rocmbuild.host.detect import Host

SCHEMA = "rocmbuild-memo/2"
MEMO_MAX_BYTES = 64 * 1024
FILE_MAX_BYTES = 64 * 1024 * 1024
"""A recipe or patch larger than this is not hashed here (the full path reads it)."""

VOLATILE_ENV = frozenset({
    "_", "OLDPWD", "PWD", "SHLVL", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "WINDOWID",
    "TMUX_PANE", "TERM_SESSION_ID", "XDG_SESSION_ID",
})
"""Variables that change between logins or shells and that rocmbuild never reads (a unit test
keeps them out of ``options.ENV``): left out of the inputs, so that a new shell still hits."""

_NEVER = frozenset({"-h", "--help", "--version", "--force", "--json", "--validate"})
"""Flags after which no memo exists (``build`` writes none for them): not looked for."""

_VALUE_FLAGS = {flag: name for name in ("workdir", "cache_dir", "wheel_dir", "rocm_path",
                                         "hip_compiler") for flag in options.SETTINGS[name].flags}
"""The flags that locate what a hit reads, as core.options declares them (-w and --wheel-dir)."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Inputs:
    """One command line's inputs: their digest, where its memo lives, and the wheel directory
    the flags and settings give."""

    digest: str
    memo: Path
    ws: Workspace
    wheel_dir: Path


def serve(argv: Sequence[str]) -> tuple[int | None, Inputs | None]:
    """(0, inputs) when a memo served this command line as a cache hit; else (None, inputs),
    with the inputs ``remember`` needs (None: this command line gets no memo)."""
    if _NEVER.intersection(argv):
        return None, None
    t0 = time.monotonic()
    flags = _flags(argv)
    if flags is None:
        return None, None
    try:
        inputs = _inputs(argv, flags)
        return _serve(inputs, flags, t0), inputs
    except (RocmbuildError, OSError, ValueError):
        return None, None  # the full path meets the same problem and reports it


def _flags(argv: Sequence[str]) -> dict[str, str] | None:
    """The values of the flags that locate things (last one wins, as in argparse); None when a
    flag may be an abbreviation of one of them (argparse accepts ``--work``)."""
    out: dict[str, str] = {}
    args = list(argv)
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in _VALUE_FLAGS:
            if not eq and i + 1 == len(args):
                return None
            out[_VALUE_FLAGS[name]] = value if eq else args[i + 1]
        elif a.startswith("-w") and not a.startswith("--") and len(a) > 2:
            out["wheel_dir"] = a[2:]
        elif a.startswith("--") and any(f.startswith(name) for f in _VALUE_FLAGS if f != name):
            return None
    return out


def _inputs(argv: Sequence[str], flags: dict[str, str]) -> Inputs:
    ws = config.workspace(flags.get("workdir"), flags.get("cache_dir"))
    wheel_dir = options.resolve("wheel_dir", flags.get("wheel_dir"))
    h = hashlib.sha256()
    cwd = os.getcwd()
    env = sorted((k, v) for k, v in os.environ.items() if k not in VOLATILE_ENV)
    pyproject = Path(cwd) / options.CONFIG_FILE
    options.project_config()  # a pyproject.toml that is no regular file: its usage error
    try:
        project = hashlib.sha256(
            fsutil.read_capped(pyproject, options.CONFIG_MAX_BYTES)).hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        project = ""
    # the node's name too: nodes sharing a cache (and the same paths) keep a memo each
    h.update(json.dumps([SCHEMA, os.uname().nodename, list(argv), cwd, env, project,
                         sys.executable, sys.version, sys.path, _code()]).encode())
    digest = h.hexdigest()
    return Inputs(digest, ws.cache / cache.MEMO_DIR / f"{digest}.json", ws,
                  Path(wheel_dir).absolute() if wheel_dir else ws.wheels)


def _code() -> list[tuple[str, int, int]]:
    """rocmbuild's own modules: (path, size, mtime_ns) of each, so that new code is a miss."""
    root = Path(__file__).parents[1]  # the rocmbuild package
    out: list[tuple[str, int, int]] = []
    todo = [str(root)]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False) and e.name != "__pycache__":
                    todo.append(e.path)
                elif e.name.endswith(".py"):
                    st = e.stat()
                    out.append((e.path, st.st_size, st.st_mtime_ns))
    return sorted(out)


def _serve(inputs: Inputs, flags: dict[str, str], t0: float) -> int | None:
    memo = _read(inputs.memo, inputs.digest)
    if memo is None or Path(memo["wheel_dir"]) != inputs.wheel_dir:
        return None
    if any(_sha256(Path(p)) != sha for p, sha in memo["files"]) \
            or any(Path(p).is_file() for p in memo["absent"]) \
            or not all(Path(d).is_dir() for d in memo["dirs"]):
        return None
    from rocmbuild.host import detect as hostmod

    found = hostmod.detect(
        rocm_path=options.resolve("rocm_path", flags.get("rocm_path")),
        hip_compiler=options.resolve("hip_compiler", flags.get("hip_compiler")),
        want_compiler=memo["want_compiler"], want_components=memo["want_components"],
        dists=memo["dists"])
    if host_digest(found) != memo["host"]:
        return None
    log.set_level(memo["level"])
    log.set_github(memo["github"])
    try:
        with deliver.held(inputs.ws, memo["cache_key"], inputs.wheel_dir) as hit:
            pass  # served or a miss: a miss is the full path's to build
    except ValidationError:
        return None  # a failed wheel: the full path says so (exit 8)
    if hit is None:
        return None
    log.debug(f"served from the memo {log.escape(str(inputs.memo))} (inputs, files and host "
              "unchanged)")
    log.info(cache.hit_line(hit.entry))
    log.plain(result_line(hit.wheel, hit.entry.sha256, time.monotonic() - t0, "cached"))
    return 0


def result_line(wheel: Path, sha256: str, seconds: float, how: str) -> str:
    """build's last line: ``<wheel>  sha256=...  <seconds>s  built|cached``."""
    return f"{fsutil.shown(wheel)}  sha256={sha256}  {seconds:.2f}s  {how}"


def host_digest(host: Host) -> str:
    """What a plan can depend on of ``host``: all it records but the CPUs and the memory, which
    change from run to run and decide only MAX_JOBS (not in the cache key)."""
    data = host.to_json()
    for volatile in ("cpus", "cpus_source", "memory"):
        data.pop(volatile, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _sha256(path: Path) -> str | None:
    """The file's sha256; None when it is not a regular file of sane size (a FIFO or a device
    named by a forged memo is opened without waiting and never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > FILE_MAX_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def seal(digest: str, body: dict[str, Any]) -> str:
    """What binds a memo to the inputs that name it: sha256 over ``digest`` (the inputs', the
    memo's file name) and ``body`` (every other value of the memo, the cache key among them)."""
    return hashlib.sha256(json.dumps([SCHEMA, digest, body], sort_keys=True).encode()).hexdigest()


def _read(path: Path, digest: str) -> dict[str, Any] | None:
    """The memo at ``path`` with every value checked and its seal matching ``digest``; None when
    there is none or it is bad (not a regular file, not JSON we accept, a value of the wrong
    type, a seal of other inputs or other values)."""
    try:
        data = untrusted.read_json(path, MEMO_MAX_BYTES)
    except (OSError, untrusted.BadJson):
        return None
    if not _valid(data):
        return None
    body = {k: v for k, v in data.items() if k != "seal"}
    return body if data["seal"] == seal(digest, body) else None


def _strs(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) and "\0" not in s for s in v)


_KEYS = frozenset({"schema", "seal", "cache_key", "host", "wheel_dir", "level", "github",
                   "want_compiler", "want_components", "dists", "files", "absent", "dirs"})


def _valid(d: object) -> bool:
    if not isinstance(d, dict) or d.get("schema") != SCHEMA or set(d) != _KEYS:
        return False
    files = d.get("files")
    return (all(isinstance(d.get(k), str) and _HEX64.fullmatch(d[k]) is not None
                for k in ("seal", "cache_key", "host"))
            and isinstance(d.get("wheel_dir"), str) and d["wheel_dir"].startswith("/")
            and type(d.get("level")) is int and 0 <= d["level"] <= 9
            and type(d.get("github")) is bool
            and type(d.get("want_compiler")) is bool and type(d.get("want_components")) is bool
            and _strs(d.get("dists")) and _strs(d.get("absent")) and _strs(d.get("dirs"))
            and isinstance(files, list) and len(files) > 0
            and all(isinstance(f, list) and len(f) == 2 and _strs(f)
                    and _HEX64.fullmatch(f[1]) for f in files))


def remember(inputs: Inputs | None, *, cache_key: str, ws: Workspace, wheel_dir: Path,
             files: Iterable[Path], absent: Iterable[Path], dirs: Iterable[Path], host: Host,
             want_compiler: bool, want_components: bool, dists: Iterable[str]) -> None:
    """Write the memo for ``inputs`` (a build or hit just delivered ``cache_key``'s wheel), when
    the full path located the same cache and wheel directory as ``serve`` did. Best effort: a
    memo that cannot be written only makes the next hit take the full path."""
    if inputs is None or inputs.ws != ws or inputs.wheel_dir != wheel_dir:
        return
    hashed = [(str(p), _sha256(p)) for p in files]
    if any(sha is None for _, sha in hashed):
        return
    memo = {
        "schema": SCHEMA, "cache_key": cache_key, "host": host_digest(host),
        "wheel_dir": str(wheel_dir),
        "level": log.level(), "github": log.github(),
        "want_compiler": want_compiler, "want_components": want_components,
        "dists": sorted(set(dists)), "files": [list(f) for f in hashed],
        "absent": [str(p) for p in absent], "dirs": [str(p) for p in dirs],
    }
    memo["seal"] = seal(inputs.digest, memo)
    text = json.dumps(memo, indent=1, sort_keys=True)
    if not _valid(json.loads(text)):
        return  # e.g. a relative wheel dir: nothing serve could use
    with contextlib.suppress(OSError, ValueError):
        if fsutil.read_capped(inputs.memo, MEMO_MAX_BYTES) == text.encode():
            return  # the same memo (read as serve reads it: a FIFO is not waited on)
    # a hint: no fsync (a memo torn by a crash is not JSON, so a miss), renamed into place; the
    # temporary is made anew (O_EXCL, never through a symlink someone left at its name)
    tmp = inputs.memo.with_name(f".{inputs.digest}.{os.getpid()}.json")
    try:
        inputs.memo.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, inputs.memo)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
