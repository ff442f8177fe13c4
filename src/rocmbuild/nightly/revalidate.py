"""``nightly --validate-pending [--run RUN]``: the second step of cells whose build host could not
validate them (``nightly/pending.py``). On a host that can (a GPU host sharing the workspace and
cache, or the Slurm GPU array's task), each pending wheel is validated from the cache (no build),
promoted through the nightly's promote path when green, marked failed when not; its run's
report, the history page and ``rocmbuild.prom`` are written again.

A wheel this host cannot validate either stays pending (a ToolchainError again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.core import log, untrusted
from rocmbuild.core.errors import RocmbuildError, ToolchainError, UsageError, ValidationError
from rocmbuild.host import detect as host
from rocmbuild.nightly import cell as cellmod
from rocmbuild.nightly import detect, pending
from rocmbuild.nightly import run as nightly_run
from rocmbuild.nightly.config import NightlyConfig
from rocmbuild.nightly.model import RUN_ID, CellOutcome, End, RunReport
from rocmbuild.nightly.report import history
from rocmbuild.nightly.report.write import rewrite
from rocmbuild.pipeline import build as pipeline
from rocmbuild.pipeline import planning
from rocmbuild.recipe import load, render, search
from rocmbuild.stages.context import Context


@dataclass(frozen=True)
class Revalidated:
    """One pending wheel after ``--validate-pending``."""

    run_id: str
    cell_id: str
    validation: str
    """``passed``, ``failed`` or ``pending`` (this host cannot validate it either)."""
    promoted: bool
    reason: str
    failed: bool = False
    """Validation failed, or it passed and the promote failed: the cell is failed."""


def validate_pending(cfg: NightlyConfig, run: str = "", only: tuple[str, ...] = ()
                     ) -> list[Revalidated]:
    """Validate every pending wheel (of run ``run``, of cells ``only``, when given), promote
    the green ones, update each touched run's report; the outcome of each."""
    if run and not RUN_ID.fullmatch(run):
        raise UsageError(f"--validate-pending: {run[:60]!r} is not a run id",
                         hint="a run id as the report names it, e.g. 20261130T161500Z")
    ws = nightly_run.workspace(cfg)
    recs, warnings = pending.listed(ws.root, run)
    for w in warnings:
        log.warn(escape(w))
    recs = [r for r in recs if not only or r.cell_id in only]
    if not recs:
        log.info("nightly: no pending wheels" + (f" of run {run}" if run else ""))
        return []
    out = [_one(cfg, rec) for rec in recs]
    for rid in dict.fromkeys(r.run_id for r in out):
        _update_report(cfg, rid, [r for r in out if r.run_id == rid])
    return out


def check(cfg: NightlyConfig, rec: pending.PendingWheel, run_dir: Path
          ) -> tuple[str, str, str, int]:
    """Validate one pending wheel from the cache (no build): its validation (``passed``,
    ``failed``, or ``pending`` when this host cannot either), a line saying so, the wheel's
    name when it passed, and the exit code. The record is removed once validation ran."""
    ws = nightly_run.workspace(cfg)
    try:
        c, pin, tag = cellmod._entry(cellmod.read_manifest(run_dir), rec.cell_id)
        recipe = load.load(search.find_recipe(c.recipe))
        wanted = planning.wants(recipe, render.Target(variant=c.variant))
        h = host.detect(want_compiler=wanted[0], dists=recipe.python_requires)
        # the build host's key (this host's toolchain may render another): its cached wheel
        plan = replace(detect.render_cell(c, pin, h, ws.cache, tag), cache_key=rec.cache_key)
        ctx = Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key,
                      wheel_dir=ws.wheels, host=h)
        done = pipeline.validate_cached(plan, ctx)
    except ValidationError as exc:
        pending.remove(ws.root, rec.cell_id)
        line = exc.message.splitlines()[0][:250]
        log.warn(escape(f"{rec.cell_id}: validation failed: {line}"))
        return "failed", f"validation failed on {host_name()}: {line}", "", exc.exit_code
    except RocmbuildError as exc:  # ToolchainError: this host cannot either; the record stays
        line = exc.message.splitlines()[0][:250]
        what = ("this host cannot validate it either" if isinstance(exc, ToolchainError)
                else "cannot validate it")
        log.warn(escape(f"{rec.cell_id}: still pending: {what}: {line}"))
        return "pending", f"still pending: {what} ({host_name()}): {line}", "", exc.exit_code
    pending.remove(ws.root, rec.cell_id)
    log.info(escape(f"{rec.cell_id}: validation passed on {host_name()}"))
    return "passed", f"validation passed on {host_name()}", done.wheel.name, 0


def _one(cfg: NightlyConfig, rec: pending.PendingWheel) -> Revalidated:
    validation, line, wheel, _ = check(cfg, rec, cfg.reports / rec.run_id)
    if validation != "passed":
        return Revalidated(rec.run_id, rec.cell_id, validation, False, line,
                           failed=validation == "failed")
    project, version = detect.wheel_project(wheel)
    o = nightly_run.promote(cfg, CellOutcome(rec.cell_id, Status.SUCCESS, End.COMPLETED,
                                             wheel=wheel, project=project, version=version))
    if o.status is Status.FAILED:
        log.warn(escape(f"{rec.cell_id}: {o.reason}"))
        return Revalidated(rec.run_id, rec.cell_id, "passed", False, f"{line}; {o.reason}",
                           failed=True)
    if o.promoted:
        log.info(escape(f"{rec.cell_id}: {wheel} promoted to {cfg.promote_to}"))
    return Revalidated(rec.run_id, rec.cell_id, "passed", o.promoted,
                       line + (", promoted" if o.promoted else ""))


def validate_task(cfg: NightlyConfig, run_dir: Path, cell_id: str) -> int:
    """``nightly --run-dir R --cell ID --step validate``: the Slurm GPU array's task, after the
    cell's build task. Validates the wheel the build step left pending and writes the cell's
    ``validate.json`` (a CellOutcome: validation and why); the controller merges it at collect
    and promotes. The exit code: 0 passed, 8 failed, 10 this node cannot validate it either."""
    from rocmbuild.nightly.slurm.executor import VALIDATE_RESULT

    ws = nightly_run.workspace(cfg)
    path = pending.path_of(ws.root, cell_id)
    try:
        rec: pending.PendingWheel | None = pending.read(path)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.warn(escape(f"{path}: {why}"))
        rec = None
    if rec is None or rec.run_id != run_dir.name:
        validation, line, code = "", f"no pending record of run {run_dir.name} ({path})", 2
    else:
        validation, line, _, code = check(cfg, rec, run_dir)
    out = CellOutcome(cell_id, Status.FAILED if code else Status.SUCCESS,
                      End.FAILED if code else End.COMPLETED, reason=line[:500],
                      exit_code=code, validation=validation)
    cellmod.write_result(cellmod.cell_dir(run_dir, cell_id) / VALIDATE_RESULT, out)
    return code


def host_name() -> str:
    return os.uname().nodename


def _update_report(cfg: NightlyConfig, run_id: str, done: list[Revalidated]) -> None:
    """The run's report.json with these cells' validation, status and promotion (a run still
    without a report, a --no-wait one not collected yet, is left to --collect)."""
    path = cfg.reports / run_id / history.REPORT
    try:
        report = history.parse_report(untrusted.read_json(path, history.MAX_REPORT_BYTES))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        log.warn(escape(f"{path}: not updated: {exc}"[:300]))
        return
    by_cell = {r.cell_id: r for r in done}
    cells = []
    for o in report.outcomes:
        r = by_cell.get(o.cell_id)
        if r is not None and r.validation != "pending":
            o = replace(o, validation=r.validation, promoted=r.promoted or o.promoted,
                        status=Status.FAILED if r.failed else Status.SUCCESS,
                        reason=f"{o.reason.split(', NOT VALIDATED')[0]}, then {r.reason}"[:500])
        cells.append(o)
    new = RunReport(report.run_id, report.started, report.finished, report.executor,
                    tuple(cells), report.lock_note, report.freed_bytes, report.notes)
    rewrite(cfg.reports, new, cfg.history)
