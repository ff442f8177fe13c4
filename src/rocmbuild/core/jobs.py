"""MAX_JOBS arithmetic: min(cpus, floor(usable memory / memory per compile job)), from given
facts (the Host carries cpus and usable memory; ``host.cgroups`` reads them on this machine)."""

from __future__ import annotations

import math
from dataclasses import dataclass

GiB = 1024**3
MAX_JOBS = 16384
"""The most compile jobs rocmbuild plans or takes (--jobs), and the most CPUs a saved host may
claim."""


@dataclass(frozen=True)
class JobPlan:
    """MAX_JOBS for a build and why."""

    jobs: int
    reason: str
    cpus: int
    usable_bytes: int
    mem_per_job_gb: float


def plan(mem_per_job_gb: float, override: int | None, *, cpus: int, usable_bytes: int,
         source: str, cpus_source: str = "", mem_why: str = "") -> JobPlan:
    """MAX_JOBS from given facts (pure: the Host carries cpus and usable memory). ``mem_why``
    says where a per-job figure that is not the recipe's came from (learned.LearnedMemory.why:
    measured units)."""
    if override is not None:
        return JobPlan(override, f"set by --jobs/ROCMBUILD_JOBS to {override}", cpus,
                       usable_bytes, mem_per_job_gb)
    by_mem = max(1, math.floor(usable_bytes / (mem_per_job_gb * GiB)))
    jobs = max(1, min(cpus, by_mem))
    cpu_why = f" ({cpus_source})" if cpus_source else ""
    reason = (
        f"min({cpus} cpus{cpu_why}, floor({usable_bytes / GiB:.1f} GiB usable ({source}) / "
        + (f"{mem_per_job_gb:.3g} GiB per job ({mem_why})" if mem_why else
           f"{mem_per_job_gb:g} GiB per job") + f") = {by_mem}) = {jobs}"
    )
    return JobPlan(jobs, reason, cpus, usable_bytes, mem_per_job_gb)
