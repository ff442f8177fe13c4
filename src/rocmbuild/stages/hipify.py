"""Hipify: run the recipe's source translation command (e.g. PyTorch's
tools/amd_build/build_amd.py) in the patched tree, before the build."""

from __future__ import annotations

import os
import sys
import time

from rocmbuild import hostenv
from rocmbuild.errors import BuildError, CommandFailed
from rocmbuild.recipe.plan import Plan
from rocmbuild.results import StageResult, Status
from rocmbuild.run import run as sh
from rocmbuild.stages import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    if not plan.hipify:
        return StageResult(Status.SKIPPED, 0.0, "the recipe has no hipify step")
    start = time.monotonic()
    argv = [sys.executable if a == "python" else a for a in plan.hipify]
    log_path = ctx.log_dir / "hipify.log"
    try:
        sh(argv, cwd=need(ctx.artifacts.tree, "source tree", "hipify"),
           env=hostenv.child_env(os.environ, plan.env, plan.pass_env), log_path=log_path)
    except CommandFailed as exc:
        raise BuildError(
            f"hipify ({' '.join(plan.hipify)}) failed: {exc.message}",
            hint=exc.hint,
            detail=exc.detail,
        ) from exc
    return StageResult(Status.SUCCESS, time.monotonic() - start, " ".join(plan.hipify), log_path)
