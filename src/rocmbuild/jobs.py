"""Memory-aware MAX_JOBS: min(cpus, floor(usable memory / memory per compile job)).

Usable memory is MemAvailable from /proc/meminfo, capped by the cgroup v2 limit
(memory.max - memory.current) when one is set, so a container with 16 GB on a 512 GB host plans
for 16 GB. CPUs are the affinity mask, capped by cgroup v2 cpu.max. ``root`` moves the file
system root for the fixture-tree tests.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

GiB = 1024**3


@dataclass(frozen=True)
class JobPlan:
    jobs: int
    reason: str
    cpus: int
    usable_bytes: int
    mem_per_job_gb: float


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cgroup_dir(root: Path) -> Path | None:
    """This process's cgroup v2 directory (``0::/path`` in /proc/self/cgroup)."""
    text = _read(root / "proc/self/cgroup") or ""
    for line in text.splitlines():
        if line.startswith("0::"):
            d = root / "sys/fs/cgroup" / line[3:].lstrip("/")
            return d if d.is_dir() else None
    return None


def usable_memory(root: Path = Path("/")) -> tuple[int, str]:
    """(bytes, where it came from)."""
    avail = None
    for line in (_read(root / "proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            avail = int(line.split()[1]) * 1024
    source = "MemAvailable"
    if avail is None:
        avail, source = 4 * GiB, "unknown (assumed 4 GiB)"
    cg = _cgroup_dir(root)
    if cg is not None:
        limit = _read(cg / "memory.max")
        if limit and limit != "max":
            current = int(_read(cg / "memory.current") or "0")
            room = max(0, int(limit) - current)
            if room < avail:
                avail, source = room, f"cgroup memory.max {int(limit) / GiB:.1f} GiB minus use"
    return avail, source


def usable_cpus(root: Path = Path("/")) -> int:
    try:
        cpus = len(os.sched_getaffinity(0)) if root == Path("/") else os.cpu_count() or 1
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    cg = _cgroup_dir(root)
    if cg is not None:
        quota = (_read(cg / "cpu.max") or "max").split()
        if quota and quota[0] != "max" and len(quota) == 2:
            cpus = min(cpus, max(1, math.floor(int(quota[0]) / int(quota[1]))))
    return cpus


def plan(mem_per_job_gb: float, override: int | None, *, cpus: int, usable_bytes: int,
         source: str) -> JobPlan:
    """MAX_JOBS from given facts (pure: the Host carries cpus and usable memory)."""
    if override is not None:
        return JobPlan(override, f"set by --jobs/ROCMBUILD_JOBS to {override}", cpus,
                       usable_bytes, mem_per_job_gb)
    by_mem = max(1, math.floor(usable_bytes / (mem_per_job_gb * GiB)))
    jobs = max(1, min(cpus, by_mem))
    reason = (
        f"min({cpus} cpus, floor({usable_bytes / GiB:.1f} GiB usable ({source}) / "
        f"{mem_per_job_gb:g} GiB per job) = {by_mem}) = {jobs}"
    )
    return JobPlan(jobs, reason, cpus, usable_bytes, mem_per_job_gb)


def plan_jobs(
    mem_per_job_gb: float,
    override: int | None = None,
    root: Path = Path("/"),
    cpus: int | None = None,
) -> JobPlan:
    """``plan`` with this machine's (or a fixture tree's) cpus and memory."""
    mem, source = usable_memory(root)
    return plan(mem_per_job_gb, override, cpus=cpus if cpus is not None else usable_cpus(root),
                usable_bytes=mem, source=source)
