"""What one cell's task does, on whatever machine runs it (this one or a Slurm node): read the
cell and its resolved pin from the run's ``manifest.json`` (a node never resolves upstream
again), build, then validate (two steps: a host that cannot validate, exit 10, leaves the
wheel pending, ``nightly/pending.py``), publish the wheel to the staging stage, and write
``cells/<id>/result.json`` (a CellOutcome) atomically. A config whose bytes are not the ones
the controller read (their sha256 is in the manifest) is refused: the cell would publish where
the run did not plan.

The same command for both executors: ``python -m rocmbuild nightly --config C --run-dir R
--cell ID``.
"""

from __future__ import annotations

import json
import re
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.core import config, fsutil, log, untrusted
from rocmbuild.core.errors import RocmbuildError, ToolchainError, UsageError, ValidationError
from rocmbuild.nightly import changes, pending
from rocmbuild.nightly.config import NightlyConfig
from rocmbuild.nightly.model import Cell, CellOutcome, End, Pin, Validation
from rocmbuild.nightly.slurm import outcome as result_json
from rocmbuild.pipeline import build as pipeline
from rocmbuild.pipeline.build import BuildResult
from rocmbuild.plan import planning
from rocmbuild.plan.model import Plan
from rocmbuild.publish import api as pub
from rocmbuild.stages import validate as vstage
from rocmbuild.stages.context import Context

RESULT = "result.json"
LOG = "log.txt"


def workspace(cfg: NightlyConfig) -> config.Workspace:
    """The nightly's workspace (the config's ``workdir`` and ``cache_dir``), for its controller,
    its cells' tasks and ``--validate-pending`` alike."""
    root = cfg.workdir.absolute()
    return config.Workspace(root=root, cache=(cfg.cache_dir or root / "cache").absolute())


def cell_dir(run_dir: Path, cell_id: str) -> Path:
    return run_dir / "cells" / cell_id


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "manifest.json"
    try:
        data = untrusted.read_json(path, changes.MANIFEST_MAX)
    except OSError as exc:
        raise UsageError(f"--run-dir: cannot read {path}: {exc.strerror or exc}",
                         hint="give the run directory the controller made") from None
    except untrusted.BadJson as exc:
        raise UsageError(f"--run-dir: {path}: {exc}",
                         hint="give the run directory the controller made") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UsageError(f"--run-dir: {path}: not a nightly manifest",
                         hint="give the run directory the controller made")
    return data


@dataclass(frozen=True)
class ConfigUse:
    """Who checks the config against the run's (``same_config``) and what it says then."""

    flag: str
    """The flag that named the run: ``--run-dir`` (a cell) or ``--collect``."""
    would: str
    """What a changed config would do wrong."""
    hint: str
    """What to do about a changed config."""
    older: str
    """What to do about a manifest without ``config_sha256``."""


CELL_USE = ConfigUse(
    "--run-dir", "the cell would not build or publish what the run planned",
    "put the file back as it was until the run's cells have run, or let this run fail and "
    "start a new one (it reads the file as it is now)",
    "give the run directory the controller made (a run an older rocmbuild started: start a "
    "new run)")
COLLECT_USE = ConfigUse(
    "--collect", "--collect would promote and report what the run did not plan",
    "put the file back as it was when the run started, then collect it (a new nightly is refused "
    "until this run is collected)",
    "collect it with the rocmbuild that started it (an older one, before config_sha256)")


def same_config(cfg: NightlyConfig, manifest: dict[str, Any], run_dir: Path,
                use: ConfigUse = CELL_USE) -> None:
    """A cell builds and publishes (and ``--collect`` promotes) what its run planned:
    UsageError when the config's bytes are not the ones the controller read (its sha256,
    ``config_sha256`` in the manifest), e.g. nightly.toml edited between a Slurm run's
    submission and the cell's start or the run's collection."""
    want = manifest.get("config_sha256")
    if want == cfg.sha256:
        return
    if not isinstance(want, str) or not re.fullmatch(r"[0-9a-f]{64}", want):
        raise UsageError(f"{use.flag}: {run_dir / 'manifest.json'}: config_sha256: missing or "
                         "not a sha256", hint=use.older)
    raise UsageError(
        f"--config: {cfg.path}: changed since run {run_dir.name} read it (sha256 "
        f"{cfg.sha256[:12]}, the run's {want[:12]}): {use.would}", hint=use.hint)


def manifest_entry(manifest: dict[str, Any], cell_id: str) -> tuple[Cell, Pin, str | None]:
    for i, e in enumerate(manifest["cells"]):
        c = e.get("cell") if isinstance(e, dict) else None
        if isinstance(c, dict) and c.get("id") == cell_id:
            try:
                return _cell_entry(e, c, f"cells[{i}]")
            except (untrusted.BadJson, TypeError, ValueError) as exc:
                raise UsageError(f"--run-dir: manifest.json: {str(exc)[:200]}",
                                 hint="give the run directory the controller made") from None
    raise UsageError(f"--cell: no cell {cell_id!r} in the run's manifest",
                     hint="cells: " + ", ".join(str((e.get("cell") or {}).get("id"))
                                                for e in manifest["cells"][:20]))


def _cell_entry(e: dict[str, Any], c: dict[str, Any], at: str
                ) -> tuple[Cell, Pin, str | None]:
    """One manifest entry (written by the controller, read back by a task), checked."""
    u = untrusted
    p = u.obj(e.get("pin") or {}, f"{at}.pin")
    variant = c.get("variant")
    opts = c.get("options", [])
    if not isinstance(opts, list):
        raise u.BadJson(f"{at}.cell.options: expected a list")
    cell = Cell(id=u.text(c["id"], f"{at}.cell.id"), recipe=u.text(c.get("recipe"),
                f"{at}.cell.recipe"),
                variant=None if variant is None else u.text(variant, f"{at}.cell.variant"),
                source=u.text(c.get("source"), f"{at}.cell.source"),
                arch=u.text(c.get("arch"), f"{at}.cell.arch"), follow=bool(c.get("follow")),
                options=tuple((u.text(k, f"{at}.cell.options"), u.text(v, f"{at}.cell.options"))
                              for k, v in opts),
                timeout_s=u.integer(c.get("timeout_s", 0), f"{at}.cell.timeout_s", 0,
                                    366 * 86400),
                group=u.text(c.get("group", ""), f"{at}.cell.group", 200))
    pin = Pin(*(u.text(p.get(k, d), f"{at}.pin.{k}") for k, d in (
        ("kind", "recipe"), ("value", ""), ("url", ""), ("sha256", ""))))
    tag = e.get("build_tag")
    return cell, pin, tag if isinstance(tag, str) else None


def peak_rss() -> int:
    """Peak RSS of this process and of its waited-for children (bytes)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) * 1024


def disk_use(*paths: Path | None) -> int:
    return sum(fsutil.disk_bytes(p) for p in paths if p is not None)


def best_tflops(report: Path) -> float | None:
    """The best forward/backward TFLOP/s in a validation JSON report (None: the gate did not
    run)."""
    try:
        data = untrusted.read_json(report, 64 << 20)
    except (OSError, untrusted.BadJson):
        return None
    best: float | None = None

    def walk(x: object) -> None:
        nonlocal best
        if isinstance(x, dict):
            v = x.get("tflops")
            if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1e6:
                best = max(best or 0.0, float(v))
            for k, y in x.items():
                if k not in ("baseline", "sdpa", "baselines"):
                    walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(data)
    return best


def write_result(path: Path, outcome: CellOutcome) -> None:
    fsutil.write_atomic(path, json.dumps(outcome.to_json(), indent=1) + "\n")


def plan_context(cell: Cell, pin: Pin, build_tag: str | None, ws: config.Workspace
                 ) -> tuple[Plan, Context]:
    """The cell's plan on this host (detected for its recipe) and the Context its build or
    validation runs in: the nightly's, where a kernel gate that cannot run for want of a GPU is
    "cannot validate here"."""
    planned = changes.render_cell(cell, pin, planning.Detect(), ws.cache, build_tag)
    plan = planned.plan
    return plan, Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key,
                         wheel_dir=ws.wheels, host=planned.host, gate_needs_gpu=True)


def build_then_validate(plan: Plan, ctx: Context) -> tuple[BuildResult, Validation, str]:
    """Step 1, the build (stored in the cache, not validated), then step 2, its validation (a
    cache hit, validated): the build's result, PASSED or PENDING, and why pending:
    this host cannot validate it (a ToolchainError, exit 10: no GPU where the validation needs
    one, a runtime module the host lacks; the wheel is not the problem). A failed validation
    raises ValidationError (exit 8). A cached wheel that failed validation before is validated
    again (as ``build --validate`` does); where this host cannot, the cell fails."""
    try:
        built: BuildResult | None = pipeline.build(plan, ctx)
    except ValidationError:  # the cached wheel failed validation before: validate it again
        built = None
    try:
        done = pipeline.validate_cached(plan, ctx)
    except ToolchainError as exc:
        if built is None:
            raise
        return built, Validation.PENDING, exc.message.splitlines()[0][:600]
    return built or done, Validation.PASSED, ""


def run_cell(cfg: NightlyConfig, ws: config.Workspace, run_dir: Path, cell_id: str,
             step: str = "all") -> int:
    """Build, validate and stage one cell; write its result.json. Returns the exit code (the
    failing error's; 0 on success). ``step="build"`` (the Slurm executor with a
    ``gpu_partition``): build and stage only, the wheel left pending for the cell's validation
    task on the GPU partition."""
    start = time.monotonic()
    out_dir = cell_dir(run_dir, cell_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(run_dir)
    cell, pin, build_tag = manifest_entry(manifest, cell_id)
    rel_log = str(Path("cells") / cell_id / LOG)
    try:
        same_config(cfg, manifest, run_dir)
    except UsageError as exc:  # said in the report too, then refused (exit 2)
        write_result(out_dir / RESULT, CellOutcome(
            cell_id, Status.FAILED, End.FAILED, reason=f"{exc.kind}: {exc.message}"[:500],
            exit_code=exc.exit_code, log=rel_log))
        raise
    ctx: Context | None = None
    try:
        plan, ctx = plan_context(cell, pin, build_tag, ws)
        if step == "build":
            result = pipeline.build(plan, ctx)
            validation, why = Validation.PENDING, "its validation is this run's Slurm GPU task"
        else:
            result, validation, why = build_then_validate(plan, ctx)
        built = "cached" if result.status is Status.CACHED else "built"
        wheel = result.wheel
        project, version = changes.wheel_project(wheel.name)
        res = pub.publish([wheel], pub.PublishOptions(
            index=cfg.index, stage=None if pub.is_url(cfg.index) else cfg.stage,
            index_from=f"{cfg.path.name}: publish.index"))
        log.info(escape(f"{cell_id}: {wheel.name} published to {res.index} "
                 f"({'stage ' + cfg.stage if res.change else 'server'})"))
        if validation is Validation.PENDING:
            rid = run_dir.name
            where = pending.write(ws.root, pending.record(rid, cell_id, plan.cache_key,
                                                          wheel.name, project, version, why,
                                                          result.sha256))
            reason = (f"{built}{pending.NOT_VALIDATED} (pending, never promoted until it is): "
                      f"{why}; "
                      "validate it on a host that can (a GPU host): "
                      + pending.HOW.format(config=cfg.path))
            log.info(escape(f"{cell_id}: pending record {where}"))
            log.warn(escape(f"{cell_id}: {reason}"))
        else:
            pending.remove(ws.root, cell_id)  # validated now: an older record is done
            reason = f"{built}, validation {validation.value}"
        report = vstage.report_stem(plan, ctx).with_suffix(".json")
        outcome = CellOutcome(
            cell_id, Status.SUCCESS, End.COMPLETED,
            reason=reason[:500], duration_s=time.monotonic() - start,
            peak_rss_bytes=peak_rss(), disk_bytes=disk_use(ctx.log_dir, ctx.artifacts.tree),
            wheel=wheel.name, wheel_size=wheel.stat().st_size, version=version,
            project=project, cache_hit_rate=result.cache_hit_rate, tflops=best_tflops(report),
            exit_code=0, log=rel_log, validation=validation)
        code = 0
    except RocmbuildError as exc:
        if exc.detail:  # the log tail: the cell's log.txt then says why without another file
            log.console.print(exc.detail, markup=False, highlight=False)
        log.warn(escape(f"{exc.kind}: {exc.message}"))
        outcome = CellOutcome(
            cell_id, Status.FAILED, End.FAILED, reason=f"{exc.kind}: {exc.message}"[:500],
            duration_s=time.monotonic() - start, peak_rss_bytes=peak_rss(),
            disk_bytes=disk_use(ctx.log_dir, ctx.artifacts.tree) if ctx else None,
            exit_code=exc.exit_code, log=rel_log,
            validation=Validation.FAILED if isinstance(exc, ValidationError)
            else Validation.NOT_REACHED)
        code = exc.exit_code
    sys.stdout.flush()
    write_result(out_dir / RESULT, outcome)
    return code


def read_result(path: Path, cell_id: str) -> CellOutcome | None:
    """A result.json as the task wrote it (None when missing or not one: the executor then
    says what it knows); read, checked, by the one reader of result.json (slurm.outcome's)."""
    return result_json.read_result(path, cell_id)[0]
