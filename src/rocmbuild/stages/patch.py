"""Patch: apply the plan's patches (those whose ``when`` holds) to the fresh source tree with
``git apply``. Each is checked first (``--check``), so a patch that does not apply names the patch
file and the failing hunk and changes nothing; the cached download or mirror is never touched."""

from __future__ import annotations

import os
import re
import time

from rocmbuild.artifacts.results import StageResult, Status
from rocmbuild.core.errors import CommandFailed, PatchError
from rocmbuild.core.run import run as sh
from rocmbuild.plan.model import Plan, display
from rocmbuild.stages.context import Context, need

_FAILED = re.compile(r"error: patch failed: (\S+):(\d+)")
_MISSING = re.compile(r"error: (\S+): (No such file or directory|does not exist in index)")


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    if not plan.patches:
        return StageResult(Status.SKIPPED, 0.0, "no patches apply to this target")
    tree = need(ctx.artifacts.tree, "source tree", "patch")
    log_path = ctx.log_dir / "patch.log"
    env = dict(os.environ)
    # The tree may sit inside another git repository (the workspace); stop git from finding it,
    # or `git apply` would resolve paths against that repository and skip every file.
    env["GIT_CEILING_DIRECTORIES"] = str(tree.parent)
    for patch in plan.patches:
        pfile = patch.file
        try:
            sh(
                ["git", "apply", "--check", "-v", str(pfile)],
                cwd=tree,
                env=env,
                log_path=log_path,
                capture=True,
            )
        except CommandFailed as exc:
            text = exc.detail or ""
            m = _FAILED.search(text)
            where = (
                f"hunk at {m.group(1)}:{m.group(2)} does not apply"
                if m
                else (
                    f"{mm.group(1)} is missing from the source"
                    if (mm := _MISSING.search(text))
                    else "does not apply"
                )
            )
            raise PatchError(
                f"{display(patch.file)}: {where} ({plan.recipe} source {plan.source_name} @ "
                f"{plan.pin})",
                hint=f"refresh the patch against the pinned source; nothing was changed; "
                f"git's output is in {log_path}",
                detail=text,
            ) from exc
        sh(["git", "apply", str(pfile)], cwd=tree, env=env, log_path=log_path)
    return StageResult(
        Status.SUCCESS, time.monotonic() - start, f"{len(plan.patches)} patch(es) applied", log_path
    )

