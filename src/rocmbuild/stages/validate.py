"""Validate (after audit, when ``--validate`` is asked): the tagged wheel in a fresh venv with
this host's torch (install, import, torch guard, audit for ``plan.archs``) and, on a GPU, the
attention kernel gate. Reports go to ``<workdir>/reports/<recipe>-<short key>.{json,md,html}``;
on any failure the wheel moves to ``<workdir>/broken/`` and ValidationError (exit 8) is raised
after the reports are written, so a failing wheel never reaches the cache."""

from __future__ import annotations

from pathlib import Path

from rocmbuild import validate
from rocmbuild.recipe.render import Plan
from rocmbuild.results import StageResult
from rocmbuild.stages import Context


def tagged_wheel(ctx: Context) -> Path:
    """The wheel the tag stage produced: the one place this stage reads the artifacts."""
    wheel: Path = ctx.artifacts["wheel"]
    return wheel


def report_stem(plan: Plan, ctx: Context) -> Path:
    return ctx.ws.reports / f"{plan.recipe}-{plan.short_key}"


def run(plan: Plan, ctx: Context) -> StageResult:
    stem = report_stem(plan, ctx)
    opts = validate.ValidateOptions(
        workdir=str(ctx.ws.root), json_out=stem.with_suffix(".json"),
        md_out=stem.with_suffix(".md"), html_out=stem.with_suffix(".html"))
    ctx.ws.reports.mkdir(parents=True, exist_ok=True)
    report = validate.run([tagged_wheel(ctx)], plan.archs, opts)
    validate.raise_if_failed(report, opts, shown=False)
    return report.stage_result()
