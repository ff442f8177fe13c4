"""Env: the recipe's build environment (rocmbuild.buildtools.buildenv), made or reused before
hipify and
build, which then run with its ``python`` and its bin/ first on PATH. A recipe that declares no
build requirements (nor build.depends) skips it: its build runs with this interpreter, as before.
The wheels of the plan's dependencies (built first by the pipeline) are installed into it."""

from __future__ import annotations

import time

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.buildtools import buildenv
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    if plan.build_env is None:
        return StageResult(Status.SKIPPED, 0.0, "the recipe declares no build requirements: "
                           "the build uses this interpreter")
    start = time.monotonic()
    log_path = ctx.log_dir / "env.log"
    env = buildenv.ensure(plan.build_env, need(ctx.artifacts.tree, "source tree", "env"),
                          ctx.ws.root / "envs", plan.recipe, plan.recipe_path.name,
                          plan.python_requires, log_path, ctx.artifacts.depends or ())
    how = "made" if env.created else "reused"
    deps = "".join(f", {w.name} {w.version} from its wheel" for w in ctx.artifacts.depends or ())
    return StageResult(Status.SUCCESS, time.monotonic() - start,
                       f"{how} {env.root.name} ({len(env.packages)} packages installed, "
                       f"{len(env.host_packages)} seen from the host{deps})", log_path,
                       Artifacts(build_env=env))
