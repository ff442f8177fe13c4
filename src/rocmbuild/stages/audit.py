"""Audit: every shared object in the built wheel must carry device code for every requested arch.
A wheel that lacks one fails the build here, naming the .so and the arch, before anyone meets
"invalid device function". Pure-Python wheels pass with nothing to check. With
build.rocm_runtime = "none" it is the other way round: no object may carry device code, HIP host
code or a link to the HIP runtime (the wheel says it needs no ROCm)."""

from __future__ import annotations

import time

from rocmbuild.artifacts import audit
from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.core import log
from rocmbuild.recipe.plan import Plan
from rocmbuild.stages.context import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    wheel = need(ctx.artifacts.wheel, "tagged wheel", "audit")
    report = audit.audit_wheel(wheel, plan.archs, device=plan.runtime.device_code)
    audit.require(report)
    for w in report.warnings:
        log.warn(w)
    if not report.objects:
        return StageResult(Status.SUCCESS, time.monotonic() - start,
                           "no shared objects: pure-Python wheel, no device code to check")
    found = sorted({a for so in report.objects for a in so.archs})
    if not plan.runtime.device_code:
        return StageResult(Status.SUCCESS, time.monotonic() - start,
                           f"{len(report.objects)} shared object(s), no device code "
                           "(rocm_runtime = none)", artifacts=Artifacts(audit=report))
    return StageResult(Status.SUCCESS, time.monotonic() - start,
                       f"{len(report.objects)} shared object(s); device code for "
                       f"{', '.join(found) or 'none'}", artifacts=Artifacts(audit=report))
