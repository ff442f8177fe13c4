"""The pipeline: a visible tuple of stages run in order over one Plan.

preflight -> [cache hit? deliver] -> fetch -> patch -> hipify -> build -> tag -> audit
          -> [validate] -> store in cache -> deliver to the wheel dir

A wheel that fails validation never reaches the cache (the stage moves it to broken/ and
raises). A cache hit asked to validate runs the validate stage on the delivered wheel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild import cache, host, lock, log
from rocmbuild.digest import sha256_file
from rocmbuild.recipe.plan import Plan
from rocmbuild.results import Artifacts, StageResult, Status
from rocmbuild.stages import Context, audit, fetch, hipify, need, patch, tag
from rocmbuild.stages import build as build_stage
from rocmbuild.stages import validate as validate_stage

Stage = Callable[[Plan, Context], StageResult]

STAGES: tuple[tuple[str, Stage], ...] = (
    ("fetch", fetch.run),
    ("patch", patch.run),
    ("hipify", hipify.run),
    ("build", build_stage.run),
    ("tag", tag.run),
    ("audit", audit.run),
    ("validate", validate_stage.run),  # only when asked (build --validate)
)


@dataclass
class BuildResult:
    status: Status
    wheel: Path
    sha256: str
    duration: float
    plan: Plan
    stages: dict[str, StageResult] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "wheel": str(self.wheel),
            "sha256": self.sha256,
            "duration_s": round(self.duration, 3),
            "cache_key": self.plan.cache_key,
            "stages": {k: v.to_json() for k, v in self.stages.items()},
        }


def build(plan: Plan, ctx: Context, validate: bool = False) -> BuildResult:
    start = time.monotonic()
    host.preflight(plan, ctx.host)
    stages = STAGES if validate else tuple(s for s in STAGES if s[0] != "validate")
    # Two builds of the same inputs in one workspace would share a source tree: the second waits,
    # then finds the first one's wheel in the cache.
    with lock.held(ctx.ws.cache / "locks" / f"{plan.cache_key}.lock",
                   "another build of the same inputs"):
        return _build_locked(plan, ctx, start, stages)


def _run_stages(plan: Plan, ctx: Context, stages: tuple[tuple[str, Stage], ...]
                ) -> dict[str, StageResult]:
    results: dict[str, StageResult] = {}
    for i, (name, stage) in enumerate(stages, 1):
        log.info(f"[bold]\\[{i}/{len(stages)}] {name}[/bold]")
        res = stage(plan, ctx)
        results[name] = res
        ctx.artifacts = ctx.artifacts.merged(res.artifacts)
        ctx.timings[name] = res.duration
        mark = {"success": "ok", "skipped": "skipped", "cached": "cached"}.get(
            res.status.value, res.status.value)
        log.info(f"      {mark} in {res.duration:.1f}s: {res.reason}")
    return results


def _build_locked(plan: Plan, ctx: Context, start: float,
                  stages: tuple[tuple[str, Stage], ...]) -> BuildResult:
    if not ctx.force:
        hit = cache.lookup(ctx.ws.cache, plan.cache_key)
        if hit is not None:
            delivered = cache.deliver(hit, ctx.wheel_dir)
            results: dict[str, StageResult] = {}
            if stages[-1][0] == "validate":
                ctx.artifacts = Artifacts(wheel=delivered)
                results = _run_stages(plan, ctx, stages[-1:])
            return BuildResult(Status.CACHED, delivered, hit.sha256, time.monotonic() - start,
                               plan, results)
    results = _run_stages(plan, ctx, stages)
    wheel = need(ctx.artifacts.wheel, "tagged wheel", "pipeline")
    sha = sha256_file(wheel)
    entry = cache.store(
        ctx.ws.cache,
        plan.cache_key,
        wheel,
        sha,
        {
            "recipe": plan.recipe,
            "variant": plan.variant,
            "archs": list(plan.archs),
            "duration_s": round(time.monotonic() - start, 3),
        },
    )
    delivered = cache.deliver(entry, ctx.wheel_dir)
    return BuildResult(Status.SUCCESS, delivered, sha, time.monotonic() - start, plan, results)
