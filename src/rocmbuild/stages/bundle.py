"""Bundle: with ``build.rocm_runtime = "bundle"``, copy the ROCm libraries the built wheel needs
(and the recipe's ROCm data files) into it and point its RPATHs at them
(``rocmbuild.buildtools.bundle``).
With ``host`` (the default) it is skipped: the tag stage states the host's ROCm in METADATA."""

from __future__ import annotations

import time

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.buildtools import bundle
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    if plan.runtime.mode != "bundle":
        return StageResult(Status.SKIPPED, time.monotonic() - start,
                           f"rocm_runtime = {plan.runtime.mode}: " + (
                               f"the wheel links the host's ROCm {plan.rocm.version}"
                               if plan.runtime.device_code else "no device code, no ROCm"))
    raw = need(ctx.artifacts.raw_wheel, "built wheel", "bundle")
    log_path = ctx.log_dir / "bundle.log"
    done = bundle.bundle_wheel(raw, ctx.log_dir.parent / f".{plan.short_key}-bundled",
                               plan.runtime, plan.rocm.root, plan.archs, log_path)
    libs = ", ".join(f.member.rsplit("/", 1)[-1] for f in done.libs) or "no libraries"
    reason = (f"{libs} + {len(done.data)} data file(s); RPATH set on {len(done.patched)} "
              f"file(s)" + (f"; from the host: {', '.join(done.from_host)}"
                            if done.from_host else "")
              + (f"; platform {done.glibc.raised_to} ({done.glibc.member} needs "
                 f"GLIBC_{done.glibc.glibc})" if done.glibc and done.glibc.raised_to else ""))
    return StageResult(Status.SUCCESS, time.monotonic() - start, reason, log_path,
                       Artifacts(bundle=done))
