"""This machine's CPUs and usable memory for MAX_JOBS (``core.jobs`` does the arithmetic).

Usable memory is MemAvailable from /proc/meminfo, capped by the tightest cgroup limit: cgroup v1
(``memory.limit_in_bytes - memory.usage_in_bytes``) and v2 (``memory.max - memory.current``),
inactive page cache not counted as use, in the process's own cgroup and every parent up to the
hierarchy's root (a systemd slice or a Slurm job cgroup above the step's can hold the tighter
limit), and by ``SLURM_MEM_PER_NODE`` /
``SLURM_MEM_PER_CPU`` (MB). CPUs are the affinity mask, capped by the cgroup cpu quota (v1
``cpu.cfs_quota_us / cpu.cfs_period_us``, v2 ``cpu.max``, parents included), the cgroup's
cpuset and ``SLURM_CPUS_PER_TASK``. Cgroup directories are found from /proc/self/cgroup and
/proc/self/mountinfo. ``root`` moves the file system root for the fixture-tree tests.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rocmbuild.core import options
from rocmbuild.core.jobs import GiB, JobPlan, plan

MiB = 1024**2
V1_UNLIMITED = 2**60
"""cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages, ~2**63): above this
nothing is a real limit."""


@dataclass(frozen=True)
class CgroupDir:
    """One cgroup directory that applies to this process."""

    version: int
    """1 or 2."""
    path: Path
    """The directory on disk (under ``root``)."""
    name: str
    """Its path inside the hierarchy (``/slurm/uid_0/job_12``), for messages."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _mounts(root: Path) -> list[tuple[str, str, str, frozenset[str]]]:
    """(fstype, mount point, hierarchy root, v1 controllers) of each cgroup mount."""
    out = []
    for line in (_read(root / "proc/self/mountinfo") or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mnt = fields[4].replace("\\040", " ")
        out.append((tail[0], mnt, fields[3], frozenset(tail[2].split(","))))
    return out


def _inside(base: Path, name: str) -> Path | None:
    """``base`` joined with a hierarchy path, never escaping ``base``."""
    parts = [p for p in PurePosixPath(name).parts if p not in ("/", "", ".")]
    if ".." in parts:
        return None
    return base.joinpath(*parts)


def cgroup_dirs(controller: str, root: Path = Path("/")) -> list[CgroupDir]:
    """Directories whose ``controller`` files apply to this process: its own cgroup first, then
    each parent up to the mount's root, for v1 (the hierarchy with ``controller``) and v2."""
    mounts = _mounts(root)
    found: list[CgroupDir] = []
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        hid, _, rest = line.partition(":")
        ctrls, _, name = rest.partition(":")
        version = 2 if hid == "0" and ctrls == "" else 1
        if version == 1 and controller not in ctrls.split(","):
            continue
        if mounts:
            cands = [(m, r) for fs, m, r, opts in mounts
                     if (fs == "cgroup2") == (version == 2)
                     and (version == 2 or controller in opts)]
        else:  # no mountinfo (fixture trees, odd containers): the usual places
            cands = [("/sys/fs/cgroup" if version == 2 else f"/sys/fs/cgroup/{ctrls}", "/")]
        for mnt, mroot in cands:
            rel = PurePosixPath(name)
            try:
                rel = rel.relative_to(mroot)
            except ValueError:
                continue  # the process's cgroup is outside what this mount shows
            base = _inside(root, mnt)
            d = _inside(base, str(rel)) if base is not None else None
            if base is None or d is None or not base.is_dir():
                continue  # levels that do not exist are read as "no limit"
            parts = rel.parts
            for i in range(len(parts), -1, -1):
                shown = str(PurePosixPath(mroot, *parts[:i]))
                found.append(CgroupDir(version, base.joinpath(*parts[:i]), shown))
            break
    return found


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def usable_memory(root: Path = Path("/")) -> tuple[int, str]:
    """(bytes, where it came from): the tightest of MemAvailable, every cgroup memory limit
    (minus that cgroup's use) and Slurm's memory allocation."""
    avail = None
    for line in (_read(root / "proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            avail = _int(line.split()[1])
            avail = None if avail is None else avail * 1024
    source = "MemAvailable"
    if avail is None:
        avail, source = 4 * GiB, "unknown (assumed 4 GiB)"
    for cg in cgroup_dirs("memory", root):
        if cg.version == 1:
            limit = _int(_read(cg.path / "memory.limit_in_bytes"))
            used = _int(_read(cg.path / "memory.usage_in_bytes")) or 0
            what = "memory.limit_in_bytes"
        else:
            limit = _int(_read(cg.path / "memory.max"))  # "max": None
            used = _int(_read(cg.path / "memory.current")) or 0
            what = "memory.max"
        if limit is None or limit >= V1_UNLIMITED:
            continue
        room = max(0, min(limit, limit - used + _inactive_file(cg)))
        if room < avail:
            avail = room
            source = f"cgroup v{cg.version} {what} {_gib(limit)} at {cg.name} minus use"
    slurm = _slurm_memory(root)
    if slurm is not None and slurm[0] < avail:
        avail, source = slurm
    return avail, source


def _inactive_file(cg: CgroupDir) -> int:
    """Page cache the kernel drops before it OOM-kills (``memory.stat``'s inactive file pages,
    the whole subtree's on v1): not counted as use, so a cgroup whose files were read recently
    does not look full."""
    key = "total_inactive_file" if cg.version == 1 else "inactive_file"
    for line in (_read(cg.path / "memory.stat") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return max(0, _int(value) or 0)
    return 0


def _slurm_memory(root: Path) -> tuple[int, str] | None:
    per_node = options.env_int("SLURM_MEM_PER_NODE", minimum=0)
    if per_node:  # 0: all of the node's memory
        return per_node * MiB, f"SLURM_MEM_PER_NODE={per_node} MB"
    per_cpu = options.env_int("SLURM_MEM_PER_CPU", minimum=0)
    if per_cpu:
        n, _ = usable_cpus_why(root)
        return per_cpu * MiB * n, f"SLURM_MEM_PER_CPU={per_cpu} MB x {n} cpus"
    return None


def _cpuset_count(text: str | None) -> int | None:
    """Number of cpus in a cpuset list (``0-3,8,10-11``); None when empty or unreadable."""
    n = 0
    for part in (text or "").split(","):
        lo, _, hi = part.strip().partition("-")
        a, b = _int(lo), _int(hi or lo)
        if a is None or b is None or b < a:
            return None
        n += b - a + 1
    return n or None


def usable_cpus_why(root: Path = Path("/")) -> tuple[int, str]:
    """(cpus, where the number came from)."""
    try:
        cpus = len(os.sched_getaffinity(0)) if root == Path("/") else os.cpu_count() or 1
        source = "affinity mask" if root == Path("/") else "cpu count"
    except AttributeError:  # not Linux
        cpus, source = os.cpu_count() or 1, "cpu count"
    for cg in cgroup_dirs("cpu", root):
        if cg.version == 1:
            quota = _int(_read(cg.path / "cpu.cfs_quota_us"))
            period = _int(_read(cg.path / "cpu.cfs_period_us"))
        else:
            q = (_read(cg.path / "cpu.max") or "max").split()
            quota, period = (_int(q[0]), _int(q[1])) if len(q) == 2 else (None, None)
        if quota is None or period is None or quota <= 0 or period <= 0:
            continue  # -1 (v1) or "max" (v2): no quota
        n = max(1, math.floor(quota / period))
        if n < cpus:
            cpus, source = n, f"cgroup v{cg.version} cpu quota at {cg.name}"
    for cg in cgroup_dirs("cpuset", root)[:1]:  # the own cgroup's effective set
        name = "cpuset.effective_cpus" if cg.version == 1 else "cpuset.cpus.effective"
        n_set = _cpuset_count(_read(cg.path / name))
        if n_set is not None and n_set < cpus:
            cpus, source = n_set, f"cgroup v{cg.version} cpuset at {cg.name}"
    slurm = options.env_int("SLURM_CPUS_PER_TASK")
    if slurm is not None and slurm < cpus:
        cpus, source = slurm, f"SLURM_CPUS_PER_TASK={slurm}"
    return cpus, source


def usable_cpus(root: Path = Path("/")) -> int:
    return usable_cpus_why(root)[0]


def plan_jobs(
    mem_per_job_gb: float,
    override: int | None = None,
    root: Path = Path("/"),
    cpus: int | None = None,
) -> JobPlan:
    """``plan`` with this machine's (or a fixture tree's) cpus and memory."""
    mem, source = usable_memory(root)
    n, why = (cpus, "") if cpus is not None else usable_cpus_why(root)
    return plan(mem_per_job_gb, override, cpus=n, usable_bytes=mem, source=source,
                cpus_source=why)
