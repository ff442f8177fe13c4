"""Preflight: the resources a long build needs, checked in seconds before anything is fetched
(``plan.requirements.preflight`` checks the software; this checks the room to build in).

- **disk**: free space where the source tree will be, against the disk the last build of the
  same recipe and variant measured (its tree when the build stage ended, recorded under
  ``<cache>/learned/disk/``) plus a margin, or the recipe's ``build.disk_gb`` when none did; a
  tree of the same plan that fetch will replace counts as free.
- **memory**: usable memory (``cgroups.usable_memory``: MemAvailable, cgroup v1/v2 limits with their
  parents, Slurm) against one compile job (``build.mem_per_job_gb``).
- **compile cache**: ``CCACHE_DIR`` / ``SCCACHE_DIR``, when set, is a directory this user can
  write (made when missing).
- **argv**: with ``build.link_units_per_arch``, the final link's command line (objects x archs x
  object path length, plus the environment) against ``ARG_MAX``; that the line would not fit
  ``MAX_ARG_STRLEN`` (128 KiB) as one shell string is a debug note (setuptools links by execve,
  CMake's Ninja generator uses response files).

Each problem is one line with the fix and the exit code of its class (ToolchainError for what the
host lacks, UsageError for a plan that cannot link). ``ROCMBUILD_PREFLIGHT=warn`` reports them
as warnings and builds anyway; ``off`` skips the checks. See docs/long-builds.md.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import fsutil, log, options, quantity, untrusted
from rocmbuild.core.errors import RocmbuildError, ToolchainError, UsageError
from rocmbuild.host.detect import Host
from rocmbuild.plan.model import Plan

GiB = 1024**3
DISK_MARGIN = 1.2
"""A measured tree times this is what the next build needs."""
OBJECT_PATH_CHARS = 130
"""Characters of one object's path inside the tree on a link line (setuptools'
``build/temp.linux-x86_64-cpython-3XX/`` plus a generated kernel's name)."""
LINK_BASE_BYTES = 16 * 1024
"""The link line's compiler, flags and libraries."""
MAX_ARG_STRLEN = 32 * 4096
"""Linux's cap on one argument (``sh -c "<the whole command>"`` is one)."""
CACHE_VARS = ("CCACHE_DIR", "SCCACHE_DIR")


@dataclass(frozen=True)
class Problem:
    message: str
    hint: str
    error: type[RocmbuildError] = ToolchainError


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / 1024**2:.1f} MiB"


# --------------------------------------------------------------------------- disk


def learned_file(cache: Path, plan: Plan) -> Path:
    return cache / "learned" / "disk" / f"{plan.recipe}.{plan.variant}.json"


def record_disk(cache: Path, plan: Plan, nbytes: int) -> None:
    """Remember the disk a build of this recipe and variant took (best effort: a cache that
    cannot be written only loses the figure)."""
    data = {"recipe": plan.recipe, "variant": plan.variant, "tree_bytes": nbytes,
            "cache_key": plan.cache_key, "measured_at": round(time.time(), 3)}
    try:
        path = learned_file(cache, plan)
        path.parent.mkdir(parents=True, exist_ok=True)
        fsutil.write_atomic(path, json.dumps(data, indent=1) + "\n", sync_dir=False)
    except OSError as exc:
        log.debug(f"the build's disk use is not recorded: {exc}")


def learned_disk(cache: Path, plan: Plan) -> int | None:
    """The last measured tree of this recipe and variant (None: none, or not readable)."""
    try:
        data = untrusted.read_json(learned_file(cache, plan), 1 << 16)
        return untrusted.integer(untrusted.obj(data, "").get("tree_bytes"), "tree_bytes", 1,
                                 quantity.MAX_BYTES)
    except (OSError, untrusted.BadJson):
        return None


def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def disk_problem(plan: Plan, where: Path, free: int, learned: int | None, replaced: int
                 ) -> Problem | None:
    """``free`` bytes at ``where`` (plus ``replaced``, the old tree fetch removes) against the
    ``learned`` tree times DISK_MARGIN, or build.disk_gb."""
    if learned is not None:
        need, why = int(learned * DISK_MARGIN), (
            f"the last build's tree took {_gib(learned)}, +{DISK_MARGIN - 1:.0%}")
    else:
        need, why = int(plan.disk_gb * GiB), f"build.disk_gb = {plan.disk_gb:g} in " \
            f"{plan.recipe_path.name}; no build of it measured here yet"
    room = free + replaced
    if room >= need:
        return None
    return Problem(
        f"{plan.recipe} ({plan.variant}): {_gib(free)} free at {where}, the build needs "
        f"~{_gib(need)} ({why})",
        "free space there, or point --workdir / ROCMBUILD_WORKDIR at a bigger disk "
        "(ROCMBUILD_PREFLIGHT=warn builds anyway)")


# --------------------------------------------------------------------------- memory


def memory_problem(plan: Plan, host: Host) -> Problem | None:
    """Usable memory for at least one compile job."""
    need = plan.mem_per_job_gb * GiB
    if host.memory_bytes >= need:
        return None
    return Problem(
        f"{plan.recipe} ({plan.variant}): {_gib(host.memory_bytes)} usable "
        f"({host.memory_source}), one compile job needs {plan.mem_per_job_gb:g} GiB "
        f"(mem_per_job_gb in {plan.recipe_path.name})",
        "free memory or raise the limit (cgroup, container, Slurm --mem); if the recipe's "
        f"figure is too high for your archs, lower mem_per_job_gb in "
        f"{plan.recipe_path.name} (ROCMBUILD_PREFLIGHT=warn builds anyway)")


# --------------------------------------------------------------------------- compile cache


def cache_dir_problem(var: str, value: str) -> Problem | None:
    """The compile cache directory named by ``var`` exists (or can be made) and takes a file."""
    d = Path(value).expanduser()
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".rocmbuild-preflight-"):
            pass
    except OSError as exc:
        return Problem(f"{var}={value}: the compile cache directory cannot be written "
                       f"({exc.strerror or exc})",
                       f"point {var} at a directory you can write (a shared cache: check its "
                       "mount and permissions), or unset it")
    return None


# --------------------------------------------------------------------------- argv


def link_bytes(units_per_arch: int, archs: int, tree: Path) -> int:
    """The estimated length of the final link's command line."""
    per_object = len(str(tree)) + 1 + OBJECT_PATH_CHARS + 1
    return units_per_arch * archs * per_object + LINK_BASE_BYTES


def env_bytes(env: dict[str, str]) -> int:
    return sum(len(k) + len(v) + 2 + 8 for k, v in env.items())  # NAME=value\0 + its pointer


def argv_problem(plan: Plan, tree: Path, arg_max: int, environ_bytes: int
                 ) -> tuple[Problem | None, str]:
    """(a Problem when the link line cannot fit ARG_MAX, a note when it could not be one
    shell string) for a plan with build.link_units_per_arch."""
    units = plan.link_units_per_arch
    if not units:
        return None, ""
    n = len(plan.archs)
    size = link_bytes(units, n, tree)
    room = arg_max - environ_bytes
    what = (f"{plan.recipe} ({plan.variant}): link_units_per_arch = {units} in "
            f"{plan.recipe_path.name}: the final link names ~{units * n} objects ({units} per "
            f"arch x {n} archs, paths under {tree}): ~{size // 1024} KiB")
    if size > room:
        fits = max(0, (room - LINK_BASE_BYTES) // ((size - LINK_BASE_BYTES) // n))
        return Problem(
            f"{what} of arguments, over this host's ARG_MAX of {arg_max // 1024} KiB "
            f"(minus {environ_bytes // 1024} KiB of environment): it would fail with "
            "\"Argument list too long\" after every unit compiled",
            (f"build at most {fits} arch(es) per wheel (--arch, one wheel per arch group), "
             if fits else "") + "compile fewer kernels (a recipe option such as flash-attn's "
            "opt_dim, where the recipe has one), raise the stack limit before the build "
            "(`ulimit -s 65536`: ARG_MAX is a quarter of it, at most 6 MiB), or use a shorter "
            "--workdir",
            UsageError), ""
    if size > MAX_ARG_STRLEN:
        return None, (f"{what}: fits ARG_MAX, but a tool that passes it as one shell string "
                      f"(sh -c) would exceed MAX_ARG_STRLEN ({MAX_ARG_STRLEN // 1024} KiB)")
    return None, ""


# --------------------------------------------------------------------------- all of it


def problems(plan: Plan, host: Host, src_root: Path, cache: Path,
             env: dict[str, str] | None = None, arg_max: int | None = None
             ) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of the resource checks for building ``plan`` with its tree under
    ``src_root`` (the workspace's src/). ``env``: the environment the build starts from (its
    size counts against ARG_MAX; CCACHE_DIR / SCCACHE_DIR are read from it); ``arg_max``:
    default ``os.sysconf('SC_ARG_MAX')``."""
    environ = {**(env or {}), **plan.env}
    tree = src_root / plan.recipe / plan.short_key
    found: list[Problem] = []
    warnings: list[str] = []
    where = _nearest_existing(src_root)
    free = shutil.disk_usage(where).free
    learned = learned_disk(cache, plan)
    disk = disk_problem(plan, where, free, learned, 0)
    if disk is not None and tree.is_dir():  # walked only when it could decide
        disk = disk_problem(plan, where, free, learned, fsutil.disk_bytes(tree))
    found += [disk] if disk else []
    mem = memory_problem(plan, host)
    found += [mem] if mem else []
    for var in CACHE_VARS:
        value = environ.get(var)
        if value:
            bad = cache_dir_problem(var, value)
            found += [bad] if bad else []
    limit = arg_max if arg_max is not None else os.sysconf("SC_ARG_MAX")
    argv, warn = argv_problem(plan, tree, limit, env_bytes(environ))
    found += [argv] if argv else []
    warnings += [warn] if warn else []
    return found, warnings


def check(plan: Plan, host: Host, src_root: Path, cache: Path) -> None:
    """Raise the first problem (``ROCMBUILD_PREFLIGHT``: on (default), warn, off)."""
    mode = (options.env("ROCMBUILD_PREFLIGHT") or "on").strip().lower() or "on"
    if mode == "off":
        return
    given = {v: x for v in CACHE_VARS if (x := options.env(v))}
    found, warnings = problems(plan, host, src_root, cache, env={**os.environ, **given})
    for note in warnings:
        log.debug(note)
    if not found:
        return
    if mode == "warn":
        for p in found:
            log.warn(f"{p.message} (ROCMBUILD_PREFLIGHT=warn: building anyway)")
        return
    first = found[0]
    raise first.error(first.message, hint=first.hint)
