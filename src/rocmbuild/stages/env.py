"""Env: the recipe's build environment (rocmbuild.buildtools.buildenv), made or reused before
hipify and
build, which then run with its ``python`` and its bin/ first on PATH. A recipe that declares no
build requirements skips it: its build runs with this interpreter, as before."""

from __future__ import annotations

import time

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.buildtools import buildenv
from rocmbuild.recipe.plan import Plan
from rocmbuild.stages.context import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    if plan.build_env is None:
        return StageResult(Status.SKIPPED, 0.0, "the recipe declares no build requirements: "
                           "the build uses this interpreter")
    start = time.monotonic()
    log_path = ctx.log_dir / "env.log"
    env = buildenv.ensure(plan.build_env, need(ctx.artifacts.tree, "source tree", "env"),
                          ctx.ws.root / "envs", plan.recipe, plan.recipe_path.name,
                          plan.python_requires, log_path)
    how = "made" if env.created else "reused"
    return StageResult(Status.SUCCESS, time.monotonic() - start,
                       f"{how} {env.root.name} ({len(env.packages)} packages installed, "
                       f"{len(env.host_packages)} seen from the host)", log_path,
                       Artifacts(build_env=env))
