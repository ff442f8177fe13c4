"""The pipeline: a visible tuple of stages run in order over one Plan.

preflight -> [cache hit? deliver] -> resource preflight -> fetch -> patch -> env -> hipify
          -> build -> repair -> bundle -> tag -> audit
          -> [validate] -> store in cache -> deliver to the wheel dir

A hit is verified (entry.json's shape, the wheel's sha256; a bad entry is discarded and
rebuilt) and delivered as a copy, by ``pipeline.deliver`` (the memo's short path serves its hits
through the same function). The entry records the validation outcome: a wheel that fails
validation (the stage copies it to broken/ and raises) is kept in the cache recorded as failed;
a later ``build`` of it fails with exit 8 naming the report (it is not delivered), and a later
``build --validate`` re-validates it and records the new outcome.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import (
    Artifacts,
    CompileStats,
    DependencyWheel,
    StageResult,
    Status,
)
from rocmbuild.cache import store as cache
from rocmbuild.core import fsutil, log
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import (
    AuditError,
    BuildError,
    CacheError,
    FetchError,
    PatchError,
    RocmbuildError,
    ValidationError,
)
from rocmbuild.core.log import escape
from rocmbuild.pipeline import deliver
from rocmbuild.plan import requirements
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline: its name (log lines, timings, result keys), its entry point
    and the error class an OSError inside it becomes (a file in the way, no permission, a full
    disk in the workdir, its logs, the cache's git mirrors and downloads)."""

    name: str
    run: Callable[[Plan, Context], StageResult]
    error: type[RocmbuildError]


# Each stage's ``run``, its module imported when the stage first runs: a cache hit imports no
# stage (and none of what they import: http, tarfile, packaging, ...). Plain import statements,
# so that a reader's "go to definition", mypy (the signatures) and test_architecture (the
# layers) follow the pipeline into every stage; tests/unit/pipeline/test_build.py checks that
# each one imports the stage of its name, and none at the top.

def _fetch(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import fetch
    return fetch.run(plan, ctx)


def _patch(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import patch
    return patch.run(plan, ctx)


def _env(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import env
    return env.run(plan, ctx)


def _hipify(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import hipify
    return hipify.run(plan, ctx)


def _build(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import build
    return build.run(plan, ctx)


def _repair(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import repair
    return repair.run(plan, ctx)


def _bundle(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import bundle
    return bundle.run(plan, ctx)


def _tag(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import tag
    return tag.run(plan, ctx)


def _audit(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import audit
    return audit.run(plan, ctx)


def _validate_stage(plan: Plan, ctx: Context) -> StageResult:
    from rocmbuild.stages import validate
    return validate.run(plan, ctx)


STAGES: tuple[Stage, ...] = (
    Stage("fetch", _fetch, FetchError),
    Stage("patch", _patch, PatchError),
    Stage("env", _env, BuildError),
    Stage("hipify", _hipify, BuildError),
    Stage("build", _build, BuildError),
    Stage("repair", _repair, BuildError),  # before tag: the label and provenance land in it
    Stage("bundle", _bundle, BuildError),  # rocm_runtime = "bundle" only (else skipped)
    Stage("tag", _tag, BuildError),
    Stage("audit", _audit, AuditError),
    Stage("validate", _validate_stage, ValidationError),  # last, only asked (build --validate)
)
BUILD_STAGES, VALIDATE_STAGE = STAGES[:-1], STAGES[-1:]


@dataclass
class BuildResult:
    status: Status
    wheel: Path
    sha256: str
    duration: float
    plan: Plan
    stages: dict[str, StageResult] = field(default_factory=dict)
    validation: cache.ValidationStatus = "not validated"
    compile_cache: CompileStats | None = None
    """What the compile cache did in this build (None: a cache hit, no compile cache)."""

    @property
    def cache_hit_rate(self) -> float | None:
        """The compile cache's hit rate, 0..1 (the nightly's CellOutcome.cache_hit_rate)."""
        return self.compile_cache.hit_rate if self.compile_cache is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "wheel": str(self.wheel),
            "sha256": self.sha256,
            "duration_s": round(self.duration, 3),
            "cache_key": self.plan.cache_key,
            "validation": self.validation,
            "stages": {k: v.to_json() for k, v in self.stages.items()},
            "compile_cache": self.compile_cache.to_json() if self.compile_cache else None,
        }


def build(plan: Plan, ctx: Context, validate: bool = False) -> BuildResult:
    start = time.monotonic()
    requirements.preflight(plan, ctx.host)
    if plan.depends:
        ctx.artifacts = ctx.artifacts.merged(Artifacts(depends=_dependencies(plan, ctx)))
    with deliver.held(ctx.ws, plan.cache_key, ctx.wheel_dir, look=not ctx.force,
                      failed_too=validate) as hit:
        if hit is not None:
            return _hit(plan, ctx, start, hit, validate)
        return _build_locked(plan, ctx, start, validate)


def validate_cached(plan: Plan, ctx: Context) -> BuildResult:
    """Validate the cached wheel of ``plan.cache_key`` (a wheel another host built and could
    not validate: ``nightly --validate-pending``) and record the outcome, as ``build
    --validate`` of a hit does; no build and no build preflight (a validation host need not
    have the compiler). CacheError when the cache has no wheel for the key."""
    start = time.monotonic()
    with deliver.held(ctx.ws, plan.cache_key, ctx.wheel_dir, failed_too=True) as hit:
        if hit is None:
            raise CacheError(f"no cached wheel for key {plan.short_key} in {ctx.ws.cache}",
                             hint="validate on a host that shares the cache directory "
                             "(--cache-dir) with the build host")
        return _hit(plan, ctx, start, hit, True)


def _dependencies(plan: Plan, ctx: Context) -> tuple[DependencyWheel, ...]:
    """Each recipe in the plan's build.depends built first (or taken from the cache), delivered
    into the same wheel directory: the wheels the env stage installs. ``--force`` and
    ``--validate`` are the named recipe's only."""
    from rocmbuild.artifacts.wheel import parse_wheel_name  # a build's, not a hit's

    out = []
    for dep in plan.depends:
        log.info(f"[bold]dependency {escape(dep.recipe)}[/bold] ({dep.short_key}) of "
                 f"{escape(plan.recipe)}")
        dep_ctx = Context(ws=ctx.ws, log_dir=ctx.ws.logs / dep.recipe / dep.short_key,
                          wheel_dir=ctx.wheel_dir, host=ctx.host,
                          choose_compile_cache=ctx.choose_compile_cache)
        res = build(dep, dep_ctx)
        name = parse_wheel_name(res.wheel.name)
        out.append(DependencyWheel(dep.recipe, dep.cache_key, name.distribution,
                                   str(name.version), res.wheel, res.sha256))
    return tuple(out)


def _run_stages(plan: Plan, ctx: Context, stages: tuple[Stage, ...],
                first: int = 1, total: int | None = None) -> dict[str, StageResult]:
    results: dict[str, StageResult] = {}
    for i, stage in enumerate(stages, first):
        name = stage.name
        with log.group(f"[{i}/{total or len(stages)}] {name}"):
            if not log.github():  # there the group's title says it
                log.info(f"[bold]\\[{i}/{total or len(stages)}] {name}[/bold]")
            with fsutil.os_errors(stage.error, name, ctx.ws.root, fsutil.WORKDIR_HINT):
                res = stage.run(plan, ctx)
        results[name] = res
        ctx.artifacts = ctx.artifacts.merged(res.artifacts)
        ctx.timings[name] = res.duration
        mark = {"success": "ok", "skipped": "skipped", "cached": "cached"}.get(
            res.status.value, res.status.value)
        log.info(f"      {mark} in {res.duration:.1f}s: {res.reason}")
    return results


def build_record(plan: Plan, ctx: Context, sha256: str, duration: float) -> dict[str, Any]:
    """What describes this one build and not the wheel's inputs: kept out of the wheel (so
    that rebuilds give the same bytes), stored in the cache entry and delivered beside the
    wheel as ``<wheel>.build.json``."""
    raw = ctx.artifacts.raw_wheel
    return {
        "wheel": need(ctx.artifacts.wheel, "tagged wheel", "pipeline").name,
        "sha256": sha256,
        "cache_key": plan.cache_key,
        "recipe": plan.recipe,
        "variant": plan.variant,
        "built_at": round(time.time(), 3),
        "duration_s": round(duration, 3),
        "timings": {k: round(v, 3) for k, v in ctx.timings.items()},
        "jobs": {"max_jobs": plan.jobs, "reason": plan.jobs_reason},
        "host": {"hostname": os.uname().nodename, "cpus": ctx.host.cpus,
                 "memory_bytes": ctx.host.memory_bytes},
        "original_wheel": ({"name": raw.name, "sha256": sha256_file(raw)}
                           if raw is not None and raw.is_file() else None),
        **({"oom_retry": ctx.artifacts.oom_retry} if ctx.artifacts.oom_retry else {}),
        **({"disk": {"tree_bytes": ctx.artifacts.tree_bytes}}
           if ctx.artifacts.tree_bytes else {}),
        "compile_cache": (ctx.artifacts.compile_cache.to_json()
                          if ctx.artifacts.compile_cache is not None else None),
    }


def _report(plan: Plan, ctx: Context) -> str:
    from rocmbuild.stages import validate  # not at the top: a hit imports no stage

    return str(validate.report_stem(plan, ctx).with_suffix(".md"))


def _validate(plan: Plan, ctx: Context, first: int = 1
              ) -> tuple[dict[str, StageResult], cache.Validation]:
    """Run the validate stage (step ``first`` of as many); return its result and the record to
    keep (with why the kernel gate could not run, when the stage says so), or, when it fails,
    record nothing here and re-raise (the caller records the failure)."""
    results = _run_stages(plan, ctx, VALIDATE_STAGE, first, first)
    why = results[VALIDATE_STAGE[0].name].artifacts.gate_needs_gpu or ""
    return results, cache.Validation("passed", _report(plan, ctx), time.time(),
                                     needs_gpu=why[:cache.NEEDS_GPU_MAX])


def _best_effort(record: Callable[[], object]) -> None:
    """Record in the cache while another error is on its way out: a cache problem then is a
    warning, so that it does not hide the error the user must see."""
    try:
        record()
    except CacheError as exc:
        log.warn(f"{escape(exc.message)} (the validation outcome is not recorded)")


def _hit(plan: Plan, ctx: Context, start: float, hit: deliver.Hit, validate: bool
         ) -> BuildResult:
    """A hit ``deliver.held`` served; with ``validate``, validated again and the outcome
    recorded."""
    root, entry, delivered = ctx.ws.cache, hit.entry, hit.wheel
    results: dict[str, StageResult] = {}
    if validate:
        ctx.artifacts = Artifacts(wheel=delivered)
        try:
            results, record = _validate(plan, ctx)
        except ValidationError:
            _best_effort(lambda: cache.record_validation(root, entry, cache.Validation(
                "failed", _report(plan, ctx), time.time())))
            delivered.unlink(missing_ok=True)  # our copy: not handed back (broken/ has one)
            raise
        entry = cache.record_validation(root, entry, record)
        stale = ctx.ws.broken / entry.wheel.name
        if cache.same_bytes(stale, entry):  # the same bytes passed now (the host was fixed)
            stale.unlink(missing_ok=True)
    log.info(cache.hit_line(entry))
    return BuildResult(Status.CACHED, delivered, entry.sha256, time.monotonic() - start,
                       plan, results, entry.validation.status)


def _build_locked(plan: Plan, ctx: Context, start: float, validate: bool) -> BuildResult:
    """A miss (or ``--force``), with the key's locks held: build, store, deliver."""
    total = len(STAGES) if validate else len(BUILD_STAGES)
    # a build, not a hit: room for it (disk, memory, compile cache dir, link line), in seconds
    from rocmbuild.buildtools import preflight

    if ctx.choose_compile_cache is not None:
        ctx.compile_cache = ctx.choose_compile_cache()
    preflight.check(plan, ctx.host, ctx.ws.src, ctx.ws.cache)
    results = _run_stages(plan, ctx, BUILD_STAGES, 1, total)
    if ctx.artifacts.tree_bytes:
        preflight.record_disk(ctx.ws.cache, plan, ctx.artifacts.tree_bytes)
    wheel = need(ctx.artifacts.wheel, "tagged wheel", "pipeline")
    sha = sha256_file(wheel)
    meta = {
        "recipe": plan.recipe,
        "variant": plan.variant,
        "archs": list(plan.archs),
        "duration_s": round(time.monotonic() - start, 3),
    }
    rec = build_record(plan, ctx, sha, time.monotonic() - start)
    record = cache.NOT_VALIDATED
    if validate:
        try:
            more, record = _validate(plan, ctx, len(STAGES))
        except ValidationError:
            # the stage copied the wheel to broken/: keep a copy in the cache recorded as failed,
            # so the next build says so instead of rebuilding it (hours for some recipes)
            moved = ctx.ws.broken / wheel.name
            if moved.is_file():
                failed = cache.Validation("failed", _report(plan, ctx), time.time())
                _best_effort(lambda: cache.store(ctx.ws.cache, plan.cache_key, moved, sha, meta,
                                                 keep_source=True, validation=failed,
                                                 record=rec))
            raise
        except RocmbuildError:
            # not the wheel's fault (e.g. the host lacks a runtime dependency): keep the build
            if wheel.is_file():
                _best_effort(lambda: cache.store(ctx.ws.cache, plan.cache_key, wheel, sha, meta,
                                                 record=rec))
            raise
        results.update(more)
    entry = cache.store(ctx.ws.cache, plan.cache_key, wheel, sha, meta, validation=record,
                        record=rec)
    delivered = cache.deliver(entry, ctx.wheel_dir)
    return BuildResult(Status.SUCCESS, delivered, sha, time.monotonic() - start, plan, results,
                       record.status, ctx.artifacts.compile_cache)
