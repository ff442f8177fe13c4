"""``nightly --validate-pending [--run RUN]``: the second step of cells whose build host could not
validate them (``nightly/pending.py``). On a host that can (a GPU host sharing the workspace and
cache, or the Slurm GPU array's task), each pending wheel is validated from the cache (no build),
promoted when green, marked failed when not; its run's report, the history page and
``rocmbuild.prom`` are written again. Promotion is the run's own decision
(``promotion.settle``), taken with every cell of the run.

A member of a stack group (``Cell.group``) is promoted only when every member of its group in
that run is green: validated now, or green in the run's report (validated, promoted or held);
otherwise it stays in staging, its reason naming the members that hold it back. The wheel that
makes its group green promotes the group's held members with it.

A wheel this host cannot validate either stays pending (a ToolchainError again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.cache import store as cache
from rocmbuild.core import log, untrusted
from rocmbuild.core.errors import (
    CacheError,
    RocmbuildError,
    ToolchainError,
    UsageError,
    ValidationError,
)
from rocmbuild.nightly import cell as cellmod
from rocmbuild.nightly import changes, pending, promotion
from rocmbuild.nightly.config import NightlyConfig
from rocmbuild.nightly.model import RUN_ID, CellOutcome, End, Held, RunReport, Validation
from rocmbuild.nightly.report import history
from rocmbuild.nightly.report.write import rewrite
from rocmbuild.pipeline import build as pipeline
from rocmbuild.stages import validate as vstage


@dataclass(frozen=True)
class Revalidated:
    """One pending wheel after ``--validate-pending``."""

    run_id: str
    cell_id: str
    validation: Validation
    """PASSED, FAILED or PENDING (this host cannot validate it either)."""
    promoted: bool
    reason: str
    failed: bool = False
    """Validation failed, or it passed and the promote failed: the cell is failed."""
    tflops: float | None = None
    """The kernel gate's best TFLOP/s when it ran now (None: it did not)."""
    held: Held = Held.NO
    """It passed, and its stack holds it (a member is not green)."""
    held_why: str = ""
    """Why it is held (the end of ``reason``)."""


@dataclass(frozen=True)
class WheelValidation:
    """One pending wheel validated here (``validate_wheel``)."""

    validation: Validation
    """PASSED, FAILED, or PENDING (this host cannot validate it either)."""
    line: str
    """What happened, for the report."""
    wheel: str
    """The wheel's name when it passed, else ""."""
    exit_code: int
    tflops: float | None = None
    """The kernel gate's best TFLOP/s (None: the gate did not run)."""


def validate_pending(cfg: NightlyConfig, run: str = "", only: tuple[str, ...] = ()
                     ) -> list[Revalidated]:
    """Validate every pending wheel (of run ``run``, of cells ``only``, when given), promote
    the green ones (a stack group's members only when the whole group is green), update each
    touched run's report; the outcome of each (and of each held member a group's last green
    wheel promoted)."""
    if run and not RUN_ID.fullmatch(run):
        raise UsageError(f"--validate-pending: {run[:60]!r} is not a run id",
                         hint="a run id as the report names it, e.g. 20261130T161500Z")
    ws = cellmod.workspace(cfg)
    recs, warnings = pending.listed(ws.root, run)
    for w in warnings:
        log.warn(escape(w))
    recs = [r for r in recs if not only or r.cell_id in only]
    if not recs:
        log.info("nightly: no pending wheels" + (f" of run {run}" if run else ""))
        return []
    checked = [(rec, validate_wheel(cfg, rec, cfg.reports / rec.run_id)) for rec in recs]
    out: list[Revalidated] = []
    for rid in dict.fromkeys(r.run_id for r in recs):
        done = _promote_run(cfg, rid, [c for c in checked if c[0].run_id == rid])
        _update_report(cfg, rid, done)
        out += done
    return out


def validate_wheel(cfg: NightlyConfig, rec: pending.PendingWheel, run_dir: Path) -> WheelValidation:
    """Validate one pending wheel from the cache (no build). The record is removed once
    validation ran."""
    ws = cellmod.workspace(cfg)
    try:
        c, pin, tag = cellmod.manifest_entry(cellmod.read_manifest(run_dir), rec.cell_id)
        plan, ctx = cellmod.plan_context(c, pin, tag, ws)
        # the build host's key (this host's toolchain may render another): its cached wheel
        plan = replace(plan, cache_key=rec.cache_key)
        stem = vstage.report_stem(plan, ctx)
        entry = cache.lookup(ws.cache, rec.cache_key)
        wrong = entry and rec.mismatch(entry.wheel.name, *changes.wheel_project(
            entry.wheel.name), entry.sha256)
        if wrong:
            raise CacheError(f"pending record {pending.path_of(ws.root, rec.cell_id)}: {wrong}",
                             hint="the record does not name its own wheel: nothing was "
                             "validated or promoted; rebuild the cell (a new run writes a new "
                             "record)")
        done = pipeline.validate_cached(plan, ctx)
    except ValidationError as exc:
        pending.remove(ws.root, rec.cell_id)
        line = exc.message.splitlines()[0][:250]
        log.warn(escape(f"{rec.cell_id}: validation failed: {line}"))
        return WheelValidation(Validation.FAILED, f"validation failed on {host_name()}: {line}",
                               "", exc.exit_code, cellmod.best_tflops(stem.with_suffix(".json")))
    except RocmbuildError as exc:  # ToolchainError: this host cannot either; the record stays
        line = exc.message.splitlines()[0][:250]
        what = ("this host cannot validate it either" if isinstance(exc, ToolchainError)
                else "cannot validate it")
        log.warn(escape(f"{rec.cell_id}: still pending: {what}: {line}"))
        return WheelValidation(Validation.PENDING,
                               f"still pending: {what} ({host_name()}): {line}", "",
                               exc.exit_code)
    pending.remove(ws.root, rec.cell_id)
    log.info(escape(f"{rec.cell_id}: validation passed on {host_name()}"))
    return WheelValidation(Validation.PASSED, f"validation passed on {host_name()}",
                           done.wheel.name, 0, cellmod.best_tflops(stem.with_suffix(".json")))


Checked = tuple[pending.PendingWheel, WheelValidation]
"""A pending wheel and what ``validate_wheel`` made of it."""


def _promote_run(cfg: NightlyConfig, rid: str, checked: list[Checked]) -> list[Revalidated]:
    """Run ``rid``'s checked wheels through the promotion decision (``promotion.settle``) with
    every cell of the run (validated now, or as the run's report has it), so that a stack group
    is judged whole: a wheel that passed is promoted or held; a group it makes green promotes
    its held members (validated, in staging, not promoted) as well."""
    groups = _groups(cfg.reports / rid)
    report = _read_report(cfg, rid)
    before = {o.cell_id: o for o in report.outcomes} if report else {}
    now = {rec.cell_id: c for rec, c in checked}
    passed = [(rec, c) for rec, c in checked if c.validation is Validation.PASSED]
    woken = dict.fromkeys(g for rec, _ in passed if (g := groups.get(rec.cell_id, "")))
    held = [o for g in woken for cid, member in groups.items() if member == g
            and cid not in now and (o := before.get(cid)) is not None and _held(cfg, o)]
    waiting = {o.cell_id for o in held} | {rec.cell_id for rec, _ in passed}
    standings = []
    for cid in dict.fromkeys([*groups, *now]):
        ok = _green(cid, now, before)
        standings.append(promotion.Standing(cid, groups.get(cid, ""), ok, cid in waiting))
    candidates = [_staged(rec.cell_id, c.wheel, c.line, c.tflops) for rec, c in passed]
    candidates += [_staged(o.cell_id, o.wheel or "", f"stack {groups[o.cell_id]} is green")
                   for o in held]
    lines = {rec.cell_id: c.line for rec, c in passed}
    settled = {o.cell_id: o for o in promotion.settle(cfg, candidates, standings)}
    out: list[Revalidated] = []
    for rec, c in checked:
        if c.validation is not Validation.PASSED:
            out.append(Revalidated(rid, rec.cell_id, c.validation, False, c.line,
                                   failed=c.validation is Validation.FAILED, tflops=c.tflops))
            continue
        o = settled[rec.cell_id]
        if o.held is Held.STACK:
            log.info(escape(f"{rec.cell_id}: {o.held_why}"))
            if report is None:  # no report keeps its state: the record does, until then
                pending.write(cellmod.workspace(cfg).root, rec)
            out.append(Revalidated(rid, rec.cell_id, Validation.PASSED, False, o.reason,
                                   tflops=c.tflops, held=o.held, held_why=o.held_why))
        else:
            out.append(_promoted(cfg, rid, o, lines[rec.cell_id]))
    for member in held:  # released by a wheel validated now, or held still (not said)
        o = settled[member.cell_id]
        if o.held is Held.NO:
            out.append(_promoted(cfg, rid, o, o.reason))
    return out


def _green(cid: str, now: dict[str, WheelValidation], before: dict[str, CellOutcome]) -> bool:
    """A cell of the run counts for its stack: validated now, or green in the run's report."""
    if cid in now:
        return now[cid].validation is Validation.PASSED
    o = before.get(cid)
    return o is not None and promotion.green(o)


def _staged(cell_id: str, wheel: str, line: str, tflops: float | None = None) -> CellOutcome:
    """A validated wheel in staging, as the promotion decision takes it (``line``: what
    validated it, or what released it)."""
    project, version = changes.wheel_project(wheel)
    return CellOutcome(cell_id, Status.SUCCESS, End.COMPLETED, reason=line, wheel=wheel,
                       project=project, version=version, validation=Validation.PASSED,
                       tflops=tflops)


def _held(cfg: NightlyConfig, o: CellOutcome) -> bool:
    """A member its stack held back in the run's report: validated (a built cell that passed,
    or a SKIP cell: its wheel validated before), its wheel in staging, not promoted (a SKIP
    cell's wheel not served yet: one served already was not held)."""
    if not o.wheel or o.promoted:
        return False
    if o.status is Status.SKIPPED:
        return not promotion.served(cfg, o.wheel)
    return o.status in (Status.SUCCESS, Status.WARNING) and o.validation is Validation.PASSED


def _promoted(cfg: NightlyConfig, rid: str, o: CellOutcome, line: str) -> Revalidated:
    """What ``promotion.settle`` made of a validated wheel it promoted (``line``: what
    validated or released it)."""
    if o.status is Status.FAILED:
        log.warn(escape(f"{o.cell_id}: {o.reason}"))
        return Revalidated(rid, o.cell_id, Validation.PASSED, False, f"{line}; {o.reason}",
                           failed=True, tflops=o.tflops)
    if o.promoted:
        log.info(escape(f"{o.cell_id}: {o.wheel} promoted to {cfg.promote_to}"))
    return Revalidated(rid, o.cell_id, Validation.PASSED, o.promoted,
                       line + (", promoted" if o.promoted else ""), tflops=o.tflops)


def _groups(run_dir: Path) -> dict[str, str]:
    """Each cell of the run's manifest and its stack group ("" : on its own); {} when the
    manifest cannot be read (``validate_wheel`` said so: nothing of the run passed)."""
    try:
        cells = cellmod.read_manifest(run_dir)["cells"]
    except UsageError:
        return {}
    out: dict[str, str] = {}
    for e in cells:
        c = e.get("cell") if isinstance(e, dict) else None
        if isinstance(c, dict) and isinstance(c.get("id"), str):
            g = c.get("group", "")
            out[c["id"]] = g if isinstance(g, str) else ""
    return out


def validate_task(cfg: NightlyConfig, run_dir: Path, cell_id: str) -> int:
    """``nightly --run-dir R --cell ID --step validate``: the Slurm GPU array's task, after the
    cell's build task. Validates the wheel the build step left pending and writes the cell's
    ``validate.json`` (a CellOutcome: validation and why); the controller merges it at collect
    and promotes. The exit code: 0 passed, 8 failed, 10 this node cannot validate it either."""
    from rocmbuild.nightly.slurm.executor import VALIDATE_RESULT

    ws = cellmod.workspace(cfg)
    path = pending.path_of(ws.root, cell_id)
    try:
        rec: pending.PendingWheel | None = pending.read(path)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.warn(escape(f"{path}: {why}"))
        rec = None
    if rec is None or rec.run_id != run_dir.name:
        validation = Validation.NOT_REACHED
        line, code = f"no pending record of run {run_dir.name} ({path})", 2
        tflops = None
    else:
        c = validate_wheel(cfg, rec, run_dir)
        validation, line, code, tflops = c.validation, c.line, c.exit_code, c.tflops
    out = CellOutcome(cell_id, Status.FAILED if code else Status.SUCCESS,
                      End.FAILED if code else End.COMPLETED, reason=line[:500],
                      exit_code=code, validation=validation, tflops=tflops)
    cellmod.write_result(cellmod.cell_dir(run_dir, cell_id) / VALIDATE_RESULT, out)
    return code


def host_name() -> str:
    return os.uname().nodename


def _read_report(cfg: NightlyConfig, run_id: str) -> RunReport | None:
    """The run's report.json (None: a run still without one, a --no-wait one not collected
    yet, or one that is not a report: said)."""
    path = cfg.reports / run_id / history.REPORT
    try:
        return history.parse_report(untrusted.read_json(path, history.MAX_REPORT_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warn(escape(f"{path}: not updated: {exc}"[:300]))
        return None


def _update_report(cfg: NightlyConfig, run_id: str, done: list[Revalidated]) -> None:
    """The run's report.json with these cells' validation, status and promotion (a run still
    without a report, a --no-wait one not collected yet, is left to --collect)."""
    report = _read_report(cfg, run_id)
    if report is None:
        return
    by_cell = {r.cell_id: r for r in done}
    cells = []
    for o in report.outcomes:
        r = by_cell.get(o.cell_id)
        if r is not None and r.validation is not Validation.PENDING:
            base = pending.built_part(o.reason.removesuffix(f"; {o.held_why}") if o.held_why
                                      else o.reason)
            skip = o.status is Status.SKIPPED and not r.failed  # released: it stays SKIPPED
            o = replace(o, validation=o.validation if skip else r.validation,
                        promoted=r.promoted or o.promoted,
                        tflops=r.tflops if r.tflops is not None else o.tflops,
                        status=Status.FAILED if r.failed else o.status if skip
                        else Status.SUCCESS, reason=f"{base}, then {r.reason}"[:500],
                        held=r.held, held_why=r.held_why)
        cells.append(o)
    new = RunReport(report.run_id, report.started, report.finished, report.executor,
                    tuple(cells), report.lock_note, report.freed_bytes, report.notes)
    rewrite(cfg.reports, new, cfg.history)
