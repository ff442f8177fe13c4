"""Validate (after audit, when ``--validate`` is asked): the tagged wheel in a fresh venv with
this host's torch (install, import, torch guard, audit for ``plan.archs``) and, on a GPU, the
attention kernel gate. Reports go to ``<workdir>/reports/<recipe>-<short key>.{json,md,html}``;
on any failure a copy of the wheel goes to ``<workdir>/broken/`` and ValidationError (exit 8) is
raised after the reports are written. The pipeline then records the outcome in the cache entry
(failed, with the Markdown report ``report_stem(...).md``), so a failing wheel is never handed
back silently as ``cached``. A pass whose gate had kernels to check and no GPU is returned with
``artifacts.gate_needs_gpu`` (why), which the pipeline records with it; in a nightly
(``ctx.gate_needs_gpu``) it is "cannot validate here" instead."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rocmbuild.artifacts.results import Artifacts, StageResult
from rocmbuild.core.errors import ToolchainError
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need
from rocmbuild.validate import model as vmodel
from rocmbuild.validate import runner as vrunner


def report_stem(plan: Plan, ctx: Context) -> Path:
    return ctx.ws.reports / f"{plan.recipe}-{plan.short_key}"


def run(plan: Plan, ctx: Context) -> StageResult:
    stem = report_stem(plan, ctx)
    kernel = plan.validate.kernel or "auto"  # the recipe's [validate] kernel: auto, none, a name
    opts = vmodel.ValidateOptions(
        workdir=str(ctx.ws.root), json_out=stem.with_suffix(".json"),
        md_out=stem.with_suffix(".md"), html_out=stem.with_suffix(".html"),
        kernels=kernel != "none", kernel="auto" if kernel == "none" else kernel)
    ctx.ws.reports.mkdir(parents=True, exist_ok=True)
    wheel = need(ctx.artifacts.wheel, "tagged wheel", "validate")
    report = vrunner.run([wheel], plan.archs, opts)
    vrunner.raise_if_failed(report, opts, shown=False)
    why = report.kernels.needs_a_gpu()  # the one decision: did the gate run, and why not
    if ctx.gate_needs_gpu and why:
        names = ", ".join(r.kernel for r in report.kernels.runs)
        raise ToolchainError(
            f"{wheel.name}: the kernel gate ({names}) cannot run on this host: {why}",
            hint="validate it on a host with a GPU that shares this workspace and cache "
                 "(`rocmbuild nightly --validate-pending` there, or the Slurm executor's "
                 "gpu_partition); the wheel stays in staging, not promoted")
    result = report.stage_result()
    return replace(result, reason=f"{result.reason}; report {stem.with_suffix('.md')}",
                   artifacts=Artifacts(gate_needs_gpu=why or None))
