"""Build: run the plan's commands in the patched tree with the plan's environment, stream the
output to ``<workdir>/logs/<recipe>/<key>/build.log``, show ninja's ``[N/M]`` progress with an
ETA (progress.py), and hand back the one wheel produced. On failure: the last 30 lines, then the
log path. The build's ``.ninja_log`` is kept next to build.log (``build.ninja_log``: the next
build's ETA); every build measures each unit's peak memory (launchers/memlog.py in the CMake
compiler launchers, and in the pip-wheel backend's CC/CXX/HIP_CLANG_PATH wrappers;
``units.jsonl``) into the cache's learned memory (learned.py), which the next plan's MAX_JOBS
uses. Every compile gets ``-ffile-prefix-map=<tree>=.`` from launchers/cuid.py in the same
chains (not through sccache), so compiled code names no workspace (docs/reproducible.md).

With ``build.offline`` the commands run in a new network namespace (``run.no_network``); a
build that then fails after trying to reach the network is reported naming the host it tried."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import sysconfig
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape
from wheel.wheelfile import WheelFile

from rocmbuild.artifacts.buildfacts import TorchBuild
from rocmbuild.artifacts.results import Artifacts, CompileStats, StageResult, Status
from rocmbuild.buildtools import compilecache, oom, progress
from rocmbuild.cache import learned
from rocmbuild.core import fsutil, hostenv, log, options, untrusted
from rocmbuild.core.errors import BuildError, CommandFailed
from rocmbuild.core.log import redact
from rocmbuild.core.run import no_network
from rocmbuild.core.run import run as sh
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import BUILD_ONLY_MARKER
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, build_child, need, source_date_epoch

_TORCH_PROBE = (
    "import json, os, torch; print(json.dumps({'version': torch.__version__, "
    "'hip': torch.version.hip, 'cuda': torch.version.cuda, "
    "'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), 'build_only': os.path.lexists("
    f"os.path.join(os.path.dirname(torch.__file__), {BUILD_ONLY_MARKER!r}))}}))"
)


def torch_facts(host: Host, log_path: Path, python: str = sys.executable,
                env: dict[str, str] | None = None) -> TorchBuild:
    """torch as the build saw it (``python``: the build env's, when there is one), including the
    C++ ABI flag (needs an import, in a child)."""
    info = host.torch
    if not info.version:
        return TorchBuild()
    fallback = TorchBuild(info.version, info.hip, info.cuda, build_only=bool(info.build_only_sdk))
    try:
        res = sh([python, "-c", _TORCH_PROBE], capture=True, log_path=log_path, env=env)
        facts = untrusted.loads(res.output.strip().splitlines()[-1])  # torch's import may print
    except (CommandFailed, ValueError, IndexError, OSError):  # ValueError: untrusted.BadJson;
        return fallback  # OSError: its log cannot be written; the build's own commands then
        # fail on that, as a BuildError
    if not isinstance(facts, dict):
        return fallback
    abi = facts.get("cxx11_abi")
    def text(key: str) -> str | None:
        v = facts.get(key)
        return v if isinstance(v, str) and v and len(v) <= 200 else None

    return TorchBuild(text("version") or info.version, text("hip"), text("cuda"),
                      abi if isinstance(abi, bool) else None,
                      facts.get("build_only") is True or fallback.build_only)


def package_prefix(prefix: Path, out_dir: Path, name: str, version: str) -> Path:
    """Pack a cmake install prefix as ``<name>-<version>-py3-none-<platform>.whl`` with the files
    under ``<name>/`` (RECORD written by WheelFile)."""
    if not prefix.is_dir() or not any(prefix.rglob("*")):
        raise BuildError(f"{name}: `cmake --install` put nothing in {prefix}",
                         hint="the project needs install() rules for its targets")
    dist = re.sub(r"[-_.]+", "_", name).lower()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    wheel = out_dir / f"{dist}-{version}-py3-none-{plat}.whl"
    info = f"{dist}-{version}.dist-info"
    with WheelFile(wheel, "w") as wf:
        for f in sorted(p for p in prefix.rglob("*") if p.is_file()):
            wf.write(str(f), f"{dist}/{f.relative_to(prefix)}")
        wf.writestr(f"{info}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: rocmbuild\n"
                    f"Root-Is-Purelib: false\nTag: py3-none-{plat}\n")
    return wheel


def _check_source_dir(plan: Plan, tree: Path) -> None:
    """The cmake backend's CMakeLists.txt is where build.source_dir says, inside the tree."""
    where = f"{plan.recipe_path.name}: build.source_dir"
    d = (tree / plan.source_dir).resolve() if plan.source_dir else tree.resolve()
    if not d.is_relative_to(tree.resolve()):
        raise BuildError(f"{where}: {plan.source_dir!r} leaves the source tree",
                         hint="name a directory inside the fetched tree")
    if not (d / "CMakeLists.txt").is_file():
        found = sorted(str(p.parent.relative_to(tree)) for pattern in
                       ("*/CMakeLists.txt", "*/*/CMakeLists.txt") for p in tree.glob(pattern))[:5]
        raise BuildError(
            f"{where}: no CMakeLists.txt in {plan.source_dir or 'the top of the source tree'}",
            hint="set build.source_dir to the directory that holds it"
            + (f" (found in: {', '.join(found)})" if found else ""),
        )


_warned = False

# What a download that cannot reach the network prints (pip/urllib3, git, curl, cmake, Python).
_NET_FAIL = re.compile(
    r"Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|No address associated with hostname|"
    r"Could(?: not|n't) resolve (?:host|proxy)|Failed to connect to|Network is unreachable|"
    r"Couldn't connect to server|getaddrinfo failed|Connection refused|"
    r"status_string: \"Couldn't|unable to access '", re.IGNORECASE)
_HOST = (
    re.compile(r"host='([^']+)'"),                                   # urllib3 (pip)
    re.compile(r"[Cc]ould(?: not|n't) resolve (?:host|proxy): *'?([\w.-]+)"),  # git, curl
    re.compile(r"Failed to connect to ([\w.:-]+?) port"),             # curl, git over http
)
_URL_HOST = re.compile(r"\b[a-z][a-z0-9+.-]*://(?:[^@/\s'\"]+@)?(\[[^\]]+\]|[^/:\s'\"]+)")
_SCAN_BYTES = 4 << 20  # the end of a long build log is where the failure is


def network_host(text: str) -> str | None:
    """When a build's output shows a failed attempt to reach the network: the host it tried
    (from the failing line, else the nearest URL above it), or "" when none is named; None when
    nothing in ``text`` is a network failure."""
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if _NET_FAIL.search(ln)), None)
    if first is None:
        return None
    for ln in lines[first:first + 20]:
        if not _NET_FAIL.search(ln):
            continue
        for pattern in _HOST:
            m = pattern.search(ln)
            if m:
                return m.group(1)
        m = _URL_HOST.search(ln)
        if m:
            return m.group(1)
    for ln in reversed(lines[:first]):
        found = _URL_HOST.findall(ln)
        if found:
            return str(found[-1])
    return ""


def _offline_prefix(plan: Plan) -> tuple[str, ...]:
    """The argv prefix that takes the network away (``()``: build with network), per
    build.offline and ROCMBUILD_OFFLINE."""
    global _warned
    mode = (options.env("ROCMBUILD_OFFLINE") or "recipe").strip().lower() or "recipe"
    if not plan.offline or mode == "off":
        return ()
    way = no_network()
    if way.prefix:
        log.debug(f"build without network: {way.how}")
        return way.prefix
    what = f"{plan.recipe_path.name}: build.offline = true, but this machine cannot make a " \
        f"network namespace ({way.why_not})"
    hint = ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
            "user.max_user_namespaces) or run as root; ROCMBUILD_OFFLINE=off builds with network")
    if mode == "require":
        raise BuildError(what, hint=hint)
    if not _warned:
        log.warn(f"{what}; building WITH network (ROCMBUILD_OFFLINE=require makes this an "
                 "error)")
        _warned = True
    return ()


def _tried_network(log_path: Path) -> str | None:
    """``network_host`` of the end of the build log (None: no network failure, or no log)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _SCAN_BYTES))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return network_host(text)


CUID_LAUNCHER = "CMAKE_HIP_COMPILER_LAUNCHER"


def cuid_launcher(tree: Path, existing: str | None, cuid: bool = True,
                  prefix_map: bool = True) -> str:
    """CMake's launcher list: launchers/cuid.py (``prefix_map``: ``-ffile-prefix-map=<tree>=.``
    on every compile; for HIP, ``cuid``: each unit's CUID from its path inside ``tree``; both
    make the same code in every workspace), then the user's own launcher (ccache, sccache) if
    one was set."""
    return ";".join([*cuid_argv(tree, cuid, prefix_map), *([existing] if existing else [])])


def cuid_argv(tree: Path, cuid: bool = True, prefix_map: bool = True) -> list[str]:
    """launchers/cuid.py as a command prefix (CMake's launchers; the pip-wheel backend's
    CC/CXX and HIP_CLANG_PATH scripts, after memlog.py and before the cache). ``cuid`` False:
    the prefix map only (gcc and host clang know no ``-cuid=``)."""
    script = Path(__file__).resolve().parents[1] / "programs" / "launchers" / "cuid.py"
    return [sys.executable, "-S", str(script), "--root", str(tree),
            *([] if cuid else ["--no-cuid"]), *([] if prefix_map else ["--no-map"])]


def maps_prefix(cache: compilecache.CompileCache | None) -> bool:
    """Whether the build's compiles get ``-ffile-prefix-map=<tree>=.``: not through sccache,
    which (0.16) hashes the option's absolute path verbatim, so a unit compiled in another
    workspace would never hit (docs/reproducible.md)."""
    return cache is None or cache.tool != "sccache"


UNITS_LOG = "units.jsonl"  # in the build's log dir: one line per compile (and link) (memlog.py)
NINJA_LOG = "build.ninja_log"  # in the build's log dir: the build's .ninja_log(s), kept


def memlog_argv(units: Path) -> list[str]:
    """launchers/memlog.py as a command prefix: each unit's peak RSS and time to ``units``."""
    script = Path(__file__).resolve().parents[1] / "programs" / "launchers" / "memlog.py"
    return [sys.executable, "-S", str(script), "--out", str(units)]


def memlog_launcher(units: Path, existing: str | None) -> str:
    """CMake's launcher list with launchers/memlog.py first, then whatever was there (cuid.py,
    the user's ccache)."""
    return ";".join([*memlog_argv(units), *([existing] if existing else [])])


def previous_ninja_log(log_dir: Path) -> dict[str, float]:
    """Unit times of the newest kept .ninja_log of this recipe (any earlier key: a patch changes
    the key, not the units), for the ETA; {} when there is none."""
    try:
        kept = sorted(log_dir.parent.glob(f"*/{NINJA_LOG}"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return {}
    return progress.load_ninja_log(kept[-1]) if kept else {}


def keep_ninja_log(tree: Path, log_dir: Path, since: float) -> Path | None:
    """Copy the .ninja_log files the build wrote (cmake's build dir, cpp_extension's
    build/temp.*: anywhere in the tree, modified since ``since``) next to build.log as one
    ``build.ninja_log``; None when ninja ran nothing."""
    found = []
    for d, dirs, files in os.walk(tree):
        dirs.sort()
        if ".ninja_log" in files:
            f = Path(d) / ".ninja_log"
            with contextlib.suppress(OSError):
                if f.is_file() and not f.is_symlink() and f.stat().st_mtime >= since:
                    found.append(f)
    if not found:
        return None
    body: list[str] = []
    header = "# ninja log v5"
    for f in found:
        text = f.read_text(encoding="utf-8", errors="replace").splitlines()
        body.extend(ln for ln in text if not ln.startswith("#"))
        header = next((ln for ln in text if ln.startswith("# ninja log")), header)
    target = log_dir / NINJA_LOG
    target.write_text("\n".join([header, *body]) + "\n")
    return target


def _learn(plan: Plan, ctx: Context, units: Path) -> None:
    """Merge the units this build measured into the cache's learned memory (learned.py). Not
    through sccache: it compiles in its server, so memlog.py, whose child is sccache's client,
    measures the client (about 10 MiB), not the compiler."""
    if ctx.compile_cache is not None and ctx.compile_cache.tool == "sccache":
        log.debug("learned memory not recorded: sccache compiles in its server, out of "
                  "memlog.py's sight (ccache or --compile-cache none measure the compiler)")
        return
    try:
        got = learned.record(ctx.ws.cache, units, plan.recipe, plan.variant, plan.archs,
                             plan.rocm.compiler.version if plan.rocm.compiler else "",
                             ctx.artifacts.tree)
    except OSError as exc:  # a read-only or full cache: the build itself is fine
        log.debug(f"learned memory not recorded: {exc}")
        return
    if got is not None:
        log.debug(f"learned memory: {got.count} units, p95 {got.p95 / learned.GiB:.2f} GiB, "
                  f"max {got.max / learned.GiB:.2f} GiB -> {got.path}")


check_source_dir = _check_source_dir  # for plan --units (units.py), which configures as here
offline_prefix = _offline_prefix


def filled(command: Sequence[str], python: str, wheel_tmp: Path, stage_dir: Path) -> list[str]:
    """One of the plan's commands as it runs: ``python`` is the build's interpreter,
    ``{wheel_tmp}`` and ``{stage_dir}`` the given directories (``plan --units`` fills the
    configure command the same way)."""
    return [python if a == "python" else
            a.replace("{wheel_tmp}", str(wheel_tmp)).replace("{stage_dir}", str(stage_dir))
            for a in command]


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    tree = need(ctx.artifacts.tree, "source tree", "build")
    out_dir = tree / "_rocmbuild_dist"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    stage_dir = tree / "_rocmbuild_stage"
    shutil.rmtree(stage_dir, ignore_errors=True)
    # SOURCE_DATE_EPOCH: the source's own time, so that backends that honour it (setuptools'
    # bdist_wheel, cmake's string(TIMESTAMP), compilers' __DATE__) write the same bytes each time
    python, env = build_child(
        plan, ctx, {"SOURCE_DATE_EPOCH": str(source_date_epoch(ctx.artifacts))})
    for var, where in ctx.artifacts.downloads or ():
        env[var] = str(where)  # [[downloads]]: fetched, verified, cached by fetch
    cc = ctx.compile_cache
    stats_log = ctx.log_dir / "compile-cache.log"
    hip_compiler = plan.rocm.compiler.path if plan.rocm.compiler is not None else None
    # each unit's peak memory and time, measured by launchers/memlog.py, for the next plan's
    # MAX_JOBS
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    units = ctx.log_dir / UNITS_LOG
    units.unlink(missing_ok=True)
    if cc is not None:  # ours replaces the host's launchers (never two caches in a row)
        for var in [v for v in env if hostenv.matches(v, ("CMAKE_*_COMPILER_LAUNCHER",))]:
            del env[var]
        stats_log.unlink(missing_ok=True)
        env.update(compilecache.build_env(cc, tree, plan.backend, hip_compiler, stats_log))
    _launchers(plan, env, tree, cc, hip_compiler, units)
    prefix = _offline_prefix(plan)
    log_path = ctx.log_dir / "build.log"
    if plan.backend == "cmake":
        _check_source_dir(plan, tree)
    if log_path.exists():
        log_path.unlink()
    # Progress: ninja's status as [finished/total running]
    env.setdefault("NINJA_STATUS", progress.NINJA_STATUS)
    since = time.time()
    shown = progress.Display(f"building {plan.package} ({plan.variant}, MAX_JOBS={plan.jobs})",
                             plan.jobs, previous_ninja_log(ctx.log_dir))
    before = compilecache.start(cc, env, log_path) if cc is not None else None
    stats: CompileStats | None = None
    # Probe torch (the ABI flag needs an import: seconds and ~200 MiB inside the build's memory
    # limit) while the build runs, only for a plan that uses torch; one that does not records
    # no torch, as on a host without it (Plan.uses_torch).
    torch: list[TorchBuild] = [] if plan.uses_torch else [TorchBuild()]
    prober: threading.Thread | None = None
    if plan.uses_torch:
        prober = threading.Thread(
            target=lambda: torch.append(torch_facts(ctx.host, ctx.log_dir / "torch.log", python,
                                                    env)), daemon=True)
        prober.start()
    try:
        # set when an OOM kill made the build run again at half the jobs
        retried = _commands(plan, python, env, tree, (out_dir, stage_dir), log_path, shown,
                            prefix)
    except CommandFailed as exc:
        raise _failed(plan, exc, log_path, prefix) from exc
    finally:
        shown.stop()
        if prober is not None:
            prober.join()
        with contextlib.suppress(OSError):
            keep_ninja_log(tree, ctx.log_dir, since)
        _learn(plan, ctx, units)  # also after a failure: the finished units were measured
        if cc is not None:
            stats = compilecache.finish(cc, env, before, stats_log, log_path)
            log.info(escape(stats.line()) if stats is not None else
                     f"compile cache: {cc.tool}'s statistics could not be read (see {log_path})")
    if plan.backend == "cmake" and plan.cmake_wheel != "pip-wheel":
        package_prefix(stage_dir, out_dir, plan.package, plan.version)
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(
            f"{plan.recipe}: expected one wheel in {out_dir}, found {len(wheels)}",
            hint=f"see {log_path}",
        )
    return StageResult(
        Status.WARNING if retried else Status.SUCCESS,
        time.monotonic() - start,
        wheels[0].name + (f"; {retried}, finished" if retried else ""),
        log_path,
        Artifacts(raw_wheel=wheels[0], build_log=log_path, torch=torch[0] if torch else None,
                  oom_retry=f"{retried}, finished" if retried else None,
                  tree_bytes=fsutil.disk_bytes(tree),
                  compile_cache=stats),
    )


def _launchers(plan: Plan, env: dict[str, str], tree: Path,
               cc: compilecache.CompileCache | None, hip_compiler: str | None, units: Path) -> None:
    """Put the compile cache (``cc``), the CUID and prefix-map launchers and the unit memory
    log in front of the build's compilers, in ``env``."""
    wrapped: dict[str, str] = {}
    mapped = maps_prefix(cc)
    if plan.backend != "cmake":  # setup.py / cpp_extension: CC, CXX, HIP_CLANG_PATH scripts
        cache = [str(cc.exe)] if cc else []
        mapper = cuid_argv(tree, cuid=False) if mapped else []
        wrapped = compilecache.wrappers(env, tree / "_rocmbuild_launch", hip_compiler,
                                        [*memlog_argv(units), *mapper, *cache],
                                        [*memlog_argv(units),
                                         *cuid_argv(tree, prefix_map=mapped), *cache])
        env.update(wrapped)
    if plan.rocm.compiler is not None:  # HIP builds through CMake: path-independent CUIDs
        env[CUID_LAUNCHER] = cuid_launcher(tree, env.get(CUID_LAUNCHER), prefix_map=mapped)
    # CMake reads the launchers at configure: the cmake backend, and pip builds whose backend
    # runs CMake (scikit-build-core); not for a language whose compiler is a wrapper above
    for lang, var in (("C", "CC"), ("CXX", "CXX"), ("HIP", "")):
        if var not in wrapped:
            launcher = f"CMAKE_{lang}_COMPILER_LAUNCHER"
            if var and mapped:  # host compiles: the tree's prefix map (HIP's: above)
                env[launcher] = cuid_launcher(tree, env.get(launcher), cuid=False)
            env[launcher] = memlog_launcher(units, env.get(launcher))


def _commands(plan: Plan, python: str, env: dict[str, str], tree: Path, dirs: tuple[Path, Path],
              log_path: Path, shown: progress.Display, prefix: Sequence[str]) -> str:
    """Run the plan's commands in ``tree``; after an OOM kill, the same command again at half
    the jobs (``env`` then says so). The retry's note, "" when none was needed."""
    retried = ""
    jobs, i = plan.jobs, 0
    while i < len(plan.commands):
        argv = oom.argv_with_jobs(filled(plan.commands[i], python, *dirs), plan.jobs, jobs)
        mark, kills = _log_size(log_path), oom.oom_kills()
        try:
            sh(argv, cwd=tree, env=env, log_path=log_path, on_line=shown, wrap=prefix)
        except CommandFailed as exc:
            killed = oom.detect(_log_text(log_path, mark), exc.returncode, kills,
                                oom.oom_kills(), tree)
            if killed is None:
                raise
            retried = _oom_retry(plan, jobs, killed, retried, log_path, exc)
            jobs = oom.half(jobs)
            env.update(oom.env_with_jobs(env, plan.jobs, jobs))  # the same keys, new values
            continue  # the same command again, in the same tree: finished units stay
        i += 1
    return retried


def _failed(plan: Plan, exc: CommandFailed, log_path: Path, prefix: Sequence[str]
            ) -> BuildError:
    """The build's error for a command that failed: an offline build that tried to reach the
    network says so."""
    host = _tried_network(log_path) if prefix else None
    if host is not None:
        tried = f"tried to reach {redact(host)}" if host else "tried to reach the network"
        return BuildError(
            f"{plan.recipe} ({plan.variant}) failed to build: it {tried}, but the build runs "
            f"offline (build.offline = true, no network in its namespace): {exc.message}",
            hint="fetch must get everything the build needs: declare the file as a "
            "[[downloads]] entry of the recipe (url, sha256, env), or set offline = false in "
            "[build]", detail=exc.detail)
    return BuildError(f"{plan.recipe} ({plan.variant}) failed to build: {exc.message}",
                      hint=f"the last lines are above; full log: {log_path}", detail=exc.detail)


def _log_size(log_path: Path) -> int:
    try:
        return log_path.stat().st_size
    except OSError:
        return 0


def _log_text(log_path: Path, start: int) -> str:
    """What the log got from ``start`` on (its last _SCAN_BYTES): one command's output."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(start, f.seek(0, os.SEEK_END) - _SCAN_BYTES))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _oom_retry(plan: Plan, jobs: int, killed: oom.OomKill, retried: str, log_path: Path,
               exc: CommandFailed) -> str:
    """After an OOM kill at ``jobs``: the note for the retry at half of them (warned), or a
    BuildError when the build was retried already or runs one job."""
    unit = f" (unit {killed.unit})" if killed.unit else ""
    again = " again, on the retry," if retried else ""
    what = f"{plan.recipe} ({plan.variant}): a compile was OOM-killed{again} at MAX_JOBS " \
        f"{jobs}{unit}"
    if retried or jobs <= 1:
        raise BuildError(
            f"{what}; {killed.evidence}",
            hint=f"lower --jobs (ROCMBUILD_JOBS), raise the memory limit (cgroup, Slurm "
            f"--mem), or raise build.mem_per_job_gb in {plan.recipe_path.name} (now "
            f"{plan.mem_per_job_gb:g} GiB per job); full log: {log_path}",
            detail=exc.detail,
        ) from exc
    log.warn(f"{escape(what)}; {escape(killed.evidence)}: retrying at MAX_JOBS "
             f"{oom.half(jobs)} in the same tree (finished units are kept)")
    return f"OOM-killed at MAX_JOBS {jobs}{unit}; retried at {oom.half(jobs)}"
