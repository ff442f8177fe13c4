"""The pipeline: a visible tuple of stages run in order over one Plan.

preflight -> [cache hit? deliver] -> fetch -> patch -> hipify -> build -> tag -> audit
          -> store in cache -> deliver to the wheel dir -> one summary line
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild import cache, config, lock, log, toolchain
from rocmbuild.digest import sha256_file
from rocmbuild.errors import ToolchainError, UsageError
from rocmbuild.recipe import load, render
from rocmbuild.recipe.render import Plan, Target
from rocmbuild.results import StageResult, Status
from rocmbuild.stages import Context, audit, fetch, hipify, patch, tag
from rocmbuild.stages import build as build_stage

Stage = Callable[[Plan, Context], StageResult]

STAGES: tuple[tuple[str, Stage], ...] = (
    ("fetch", fetch.run),
    ("patch", patch.run),
    ("hipify", hipify.run),
    ("build", build_stage.run),
    ("tag", tag.run),
    ("audit", audit.run),
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


def missing_host(plan: Plan, torch: toolchain.TorchInfo | None = None,
                 root: toolchain.RocmRoot | None = None) -> list[str]:
    """What the host lacks for this plan, each as a short phrase. ``torch`` and ``root`` default
    to this interpreter's torch and the ROCm root found here (doctor passes fixture facts)."""
    missing: list[str] = []
    torch = torch if torch is not None else toolchain.torch_info()
    for req in plan.host_requires:
        if req == "torch" and not torch.version:
            missing.append("torch installed in this Python (none found)")
        elif req == "rocm-torch" and torch.kind != "rocm":
            found = (
                f"torch {torch.version}, a {torch.kind.upper()} build"
                if torch.version
                else "no torch"
            )
            missing.append(f"a ROCm build of torch (found {found})")
        elif req.startswith("rocm-sdk"):
            minimum = req.partition(">=")[2] or "0"
            root = root or toolchain.find_rocm_root()
            if not toolchain.sdk_at_least(root, minimum) or not (root and root.has_hipcc):
                if root is None:
                    found = "none"
                elif root.kind == "debian":
                    found = f"only Debian's HIP {root.version} headers under {root.path}"
                else:
                    found = f"ROCm {root.version or '?'} at {root.path}" + (
                        "" if root.has_hipcc else " without bin/hipcc"
                    )
                missing.append(f"a ROCm SDK >= {minimum} with hipcc (found {found})")
        elif req == "hip-compiler" and not plan.rocm.get("compiler"):
            missing.append(
                "a HIP compiler (run scripts/install-hip-toolchain.sh or set "
                "ROCMBUILD_HIP_COMPILER)"
            )
    return missing


def host_hint(plan: Plan, missing: list[str]) -> str | None:
    """How to get what ``missing_host`` says is missing."""
    hints = []
    if any("torch" in m for m in missing):
        hints.append("install a ROCm torch: pip install torch --index-url "
                     f"https://download.pytorch.org/whl/rocm{plan.rocm['version']}")
    if any("ROCm SDK" in m for m in missing):
        hints.append("install ROCm (https://rocm.docs.amd.com) or point --rocm-path / "
                     "ROCM_PATH at it, or build inside the Dockerfile's ROCm image")
    if plan.recipe == "flash-attn" and plan.variant != "triton":
        hints.append("--variant triton builds without them")
    return "; ".join(hints) or None


def preflight(plan: Plan) -> None:
    """Fail before fetching when the host cannot build this plan. One line, with the fix."""
    what = f"{plan.recipe} (variant {plan.variant})"
    missing = missing_host(plan)
    if missing:
        raise ToolchainError(f"{what} cannot be built on this host: needs "
                             + "; and ".join(missing), hint=host_hint(plan, missing))
    absent = [d for d in plan.python_requires if toolchain.dist_version(d) is None]
    if absent:
        raise ToolchainError(
            f"{what} builds without isolation and needs {', '.join(absent)} installed in "
            f"{sys.executable}",
            hint=f"{sys.executable} -m pip install {' '.join(absent)}"
            + (" (torch: the ROCm build on AMD hosts)" if "torch" in absent else ""),
        )


def build(plan: Plan, ctx: Context) -> BuildResult:
    start = time.monotonic()
    preflight(plan)
    # Two builds of the same inputs in one workspace would share a source tree: the second waits,
    # then finds the first one's wheel in the cache.
    with lock.held(ctx.ws.cache / "locks" / f"{plan.cache_key}.lock",
                   "another build of the same inputs"):
        return _build_locked(plan, ctx, start)


def _build_locked(plan: Plan, ctx: Context, start: float) -> BuildResult:
    if not ctx.force:
        hit = cache.lookup(ctx.ws.cache, plan.cache_key)
        if hit is not None:
            delivered = cache.deliver(hit, ctx.wheel_dir)
            return BuildResult(Status.CACHED, delivered, hit.sha256, time.monotonic() - start, plan)
    results: dict[str, StageResult] = {}
    for i, (name, stage) in enumerate(STAGES, 1):
        log.info(f"[bold]\\[{i}/{len(STAGES)}] {name}[/bold]")
        res = stage(plan, ctx)
        results[name] = res
        ctx.artifacts.update(res.artifacts)
        ctx.timings[name] = res.duration
        mark = {"success": "ok", "skipped": "skipped", "cached": "cached"}.get(res.status.value)
        log.info(f"      {mark} in {res.duration:.1f}s: {res.reason}")
    wheel: Path = ctx.artifacts["wheel"]
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


def plan_from_args(args: argparse.Namespace) -> Plan:
    recipe = load.load(load.find_recipe(args.recipe))
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(
            f"--jobs: must be at least 1, got {args.jobs}",
            hint="leave it out to let rocmbuild choose from cpus and memory",
        )
    target = Target(
        arch=args.arch,
        variant=args.variant,
        source=args.source,
        jobs=args.jobs,
        rocm_version=args.rocm_version,
        rocm_path=args.rocm_path,
        gpu_vendor=getattr(args, "gpu_vendor", "amd"),
        hip_compiler=getattr(args, "hip_compiler", None),
    )
    return render.render(recipe, target)


def cli_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    plan = plan_from_args(args)
    ws = config.workspace(args.workdir, args.cache_dir)
    ctx = Context(
        ws=ws,
        log_dir=ws.logs / plan.recipe / plan.short_key,
        wheel_dir=Path(args.wheel_dir).absolute() if args.wheel_dir else ws.wheels,
        force=args.force,
    )
    result = build(plan, ctx)
    if args.validate:
        _validate(result, ws, args)
    if args.json:
        log.out.print_json(json.dumps(result.to_json()))
        return 0
    how = "cached" if result.status is Status.CACHED else "built"
    log.console.print(
        f"{_rel(result.wheel)}  sha256={result.sha256}  {time.monotonic() - t0:.2f}s  {how}",
        markup=False,
        highlight=False,
    )
    return 0


def _validate(result: BuildResult, ws: config.Workspace, args: argparse.Namespace) -> None:
    """`build --validate`: the validator on the built wheel, reports under <workdir>/reports/."""
    from rocmbuild import validate
    from rocmbuild.validate import report

    stem = ws.reports / f"{result.plan.recipe}-{result.plan.short_key}"
    opts = validate.ValidateOptions(workdir=str(ws.root), json_out=stem.with_suffix(".json"),
                                    md_out=stem.with_suffix(".md"),
                                    html_out=stem.with_suffix(".html"))
    ws.reports.mkdir(parents=True, exist_ok=True)
    rep = validate.run([result.wheel], result.plan.archs, opts)
    if not args.json:
        log.out.print(report.to_markdown(rep.to_json()), markup=False)
    validate.raise_if_failed(rep, opts)


def cli_plan(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    missing = missing_host(plan)
    if args.json:
        log.out.print_json(json.dumps(plan.to_json()))
    else:
        _print_plan(plan)
    for m in missing:
        log.warn(f"this host lacks {m}; `rocmbuild build` would stop before fetching")
    return 0


def _print_plan(plan: Plan) -> None:
    p = log.out.print
    src = plan.source
    p(
        f"[bold]{plan.recipe}[/bold] variant={plan.variant} archs={','.join(plan.archs)} "
        f"-> +{plan.local_version}"
    )
    pin = src.get("commit") or src.get("sha256") or src.get("path")
    p(
        f"source   {plan.source_name}: {src['kind']} {src.get('url', '')} @ {pin}"
        + (f"  submodules={','.join(src['submodules'])}" if src.get("submodules") else "")
    )
    for pt in plan.patches:
        p(f"patch    {pt['file']} ({pt['sha256'][:12]}): {pt['reason']}")
    p(f"MAX_JOBS {plan.jobs}: {plan.jobs_reason}")
    p(f"ROCm     {plan.rocm['version']} (from {plan.rocm['version_from']})")
    for k, v in plan.env.items():
        p(f"env      {k}={v}", markup=False)
    if plan.hipify:
        p(f"hipify   {' '.join(plan.hipify)}", markup=False)
    for c in plan.commands:
        p(f"run      {' '.join(c)}", markup=False)
    p(f"cache    {plan.cache_key}")


def _rel(p: Path) -> Path:
    try:
        return p.relative_to(Path.cwd())
    except ValueError:
        return p
