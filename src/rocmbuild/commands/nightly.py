"""``rocmbuild nightly --config nightly.toml``: rebuild a matrix of cells when upstream or the
inputs changed, publish to staging, promote on green, report (docs/nightly.md)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "nightly", help="rebuild a matrix of recipes when upstream changed; promote on green",
        description="Resolve what upstream has now for every cell of nightly.toml's matrix, "
        "build the cells whose inputs changed (validated), publish them to the staging stage, "
        "promote the green ones and write the run's report. One nightly per workspace.")
    p.add_argument("--config", required=True, metavar="FILE", help="the nightly.toml")
    p.add_argument("--executor", choices=("local", "slurm"), default=None,
                   help="where the cells run [default: the config's executor.kind]")
    p.add_argument("--dry-run", action="store_true",
                   help="print each cell's decision, reasons, pin and key; build nothing")
    p.add_argument("--only", action="append", default=[], metavar="CELL",
                   help="only this cell (repeatable)")
    p.add_argument("--no-wait", action="store_true",
                   help="Slurm: submit the cells' array, print the run id and return; end the "
                   "run later with --collect")
    p.add_argument("--collect", default=None, metavar="RUN",
                   help="wait for and collect a --no-wait run's Slurm tasks (a run id or run "
                   "directory), then promote, prune and report as a waited run does")
    p.add_argument("--validate-pending", nargs="?", const="", default=None, metavar="RUN",
                   help="on a host that can validate (a GPU host sharing the workspace and "
                   "cache): validate the wheels earlier runs built but could not validate "
                   "(all pending, or run RUN's; --only picks cells), promote the green ones, "
                   "update the reports")
    common.add_json(p, "the decisions (--dry-run) or the run's report")
    # What one task runs, on this machine or a Slurm node (the controller starts it).
    p.add_argument("--run-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cell", default=None, help=argparse.SUPPRESS)
    p.add_argument("--step", choices=("all", "build", "validate"), default="all",
                   help=argparse.SUPPRESS)  # the Slurm executor's two steps of a cell
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild.core.errors import UsageError
    from rocmbuild.nightly import config, lock

    if (args.cell is None) != (args.run_dir is None):
        raise UsageError("--cell and --run-dir: give both (what one task runs) or neither",
                         hint="the controller starts tasks itself: run `rocmbuild nightly "
                         "--config FILE`")
    if args.collect is not None and (args.cell is not None or args.dry_run or args.no_wait
                                     or args.only):
        raise UsageError("--collect: give it alone (with --config)",
                         hint="--collect RUN ends a run that --no-wait started")
    if args.validate_pending is not None and (args.cell is not None or args.dry_run
                                              or args.no_wait or args.collect is not None):
        raise UsageError("--validate-pending: give it alone (with --config, --only)",
                         hint="--validate-pending [RUN] validates what earlier runs left "
                         "pending")
    raw = config.read(Path(args.config))  # once: a later step never opens it again
    if args.cell is None and not args.dry_run:
        # the lock first, before the heavy imports: a second nightly is refused at once
        root = (Path(args.workdir) if args.workdir
                else config.workdir_of(Path(args.config), raw))
        with lock.held(root.absolute(), time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())) as note:
            return _controller(args, raw, note)
    return _other(args, raw)


def _load(args: argparse.Namespace, raw: bytes) -> Any:
    from rocmbuild.nightly import config

    cfg = config.load(Path(args.config), raw)
    if args.workdir or args.cache_dir:  # the controller passes its workspace to each task
        from dataclasses import replace

        cfg = replace(cfg, workdir=Path(args.workdir) if args.workdir else cfg.workdir,
                      cache_dir=Path(args.cache_dir) if args.cache_dir else cfg.cache_dir)
    return cfg


def _other(args: argparse.Namespace, raw: bytes) -> int:
    """``--dry-run`` (no lock: it writes nothing) and ``--cell`` (a task of a running night)."""
    from rich.markup import escape

    from rocmbuild.core import log
    from rocmbuild.nightly import cell, controller

    cfg = _load(args, raw)
    if args.cell is not None:
        if args.step == "validate":
            from rocmbuild.nightly import revalidate

            return revalidate.validate_task(cfg, Path(args.run_dir).absolute(), args.cell)
        return cell.run_cell(cfg, cell.workspace(cfg), Path(args.run_dir).absolute(),
                             args.cell, args.step)
    planned = controller.plan(cfg, args.only)
    if args.json:
        common.print_json([{
            "cell": p.cell_plan.cell.id,
            "decision": "error" if p.error else p.cell_plan.decision.value,
            "reasons": list(p.cell_plan.reasons), "pin": p.cell_plan.pin.to_json(),
            "cache_key": p.cell_plan.cache_key, "build_tag": p.build_tag,
            **(controller.jobs_json(p.plan) if p.plan else {})} for p in planned])
        return 0
    for p in planned:
        cp = p.cell_plan
        pin = cp.pin.value[:12] if cp.pin.kind != "recipe" else "recipe"
        decision = "ERROR" if p.error else cp.decision.value.upper()
        jobs = (f"  MAX_JOBS {p.plan.jobs} x {p.plan.job_mem_gb:.3g} GiB "
                f"({p.plan.job_mem_from})" if p.plan else "")
        log.out.print(escape(f"{cp.cell.id}  {decision}  "
                             f"{cp.pin.kind}:{pin}  key {cp.cache_key[:12]}"
                             f"{f' tag {p.build_tag}' if p.build_tag else ''}{jobs}  "
                             f"{'; '.join(cp.reasons)}"), highlight=False, soft_wrap=True)
    return 0


def _controller(args: argparse.Namespace, raw: bytes, lock_note: str) -> int:
    from rich.markup import escape

    from rocmbuild.core import log
    from rocmbuild.core.errors import CellsFailed
    from rocmbuild.nightly import controller

    cfg = _load(args, raw)
    if args.validate_pending is not None:
        return _validate_pending(args, cfg, lock_note)
    if args.collect is not None:
        report = controller.collect(cfg, args.collect, lock_note)
    else:
        got = controller.nightly(cfg, args.executor, args.only, lock_note=lock_note,
                                  no_wait=args.no_wait)
        if isinstance(got, controller.Pending):
            if args.json:
                common.print_json({"run": got.run_id, "run_dir": str(got.run_dir),
                                   "jobs": list(got.job_ids), "cells": got.cells,
                                   "collect": ["--collect", got.run_id]})
            else:
                log.out.print(escape(
                    f"{got.run_id}  submitted  {got.cells} cell(s) as Slurm job(s) "
                    f"{', '.join(got.job_ids)}; collect with: rocmbuild nightly --config "
                    f"{cfg.path} --collect {got.run_id}"), highlight=False, soft_wrap=True)
            return 0
        report = got
    if args.json:
        common.print_json(report.to_json())
    else:
        for o in report.outcomes:
            log.out.print(escape(f"{o.cell_id}  {o.status.value}  {o.end.value}  "
                                 f"{o.duration_s:.1f}s  {o.wheel or '-'}"
                                 f"{'  promoted' if o.promoted else ''}  {o.reason}"),
                          highlight=False, soft_wrap=True)
    if not report.ok:
        failed = [o.cell_id for o in report.outcomes if o.status.value == "failed"]
        raise CellsFailed(f"nightly {report.run_id}: {len(failed)} cell(s) failed: "
                          + ", ".join(failed[:10]),
                          hint=f"read {cfg.reports / report.run_id}/cells/<cell>/log.txt")
    return 0


def _validate_pending(args: argparse.Namespace, cfg: Any, lock_note: str) -> int:
    """``--validate-pending``: 0 when every pending wheel passed (and was promoted), exit 14
    when one failed, exit 10 when this host could not validate one either (still pending)."""
    from rich.markup import escape

    from rocmbuild.core import log
    from rocmbuild.core.errors import CellsFailed, ToolchainError
    from rocmbuild.nightly import revalidate
    from rocmbuild.nightly.model import Validation

    if lock_note:
        log.warn(escape(lock_note))
    done = revalidate.validate_pending(cfg, args.validate_pending, tuple(args.only))
    if args.json:
        common.print_json([{"run": r.run_id, "cell": r.cell_id,
                            "validation": r.validation.value, "promoted": r.promoted,
                            "failed": r.failed, "reason": r.reason}
                           for r in done])
    else:
        for r in done:
            log.out.print(escape(f"{r.run_id}  {r.cell_id}  {r.validation.value}"
                                 f"{'  promoted' if r.promoted else ''}  {r.reason}"),
                          highlight=False, soft_wrap=True)
    failed = [r.cell_id for r in done if r.failed]
    if failed:
        raise CellsFailed(f"--validate-pending: {len(failed)} cell(s) failed: "
                          + ", ".join(failed[:10]),
                          hint=f"read the validation reports under {cfg.workdir}/reports")
    waiting = [r.cell_id for r in done if r.validation is Validation.PENDING]
    if waiting:
        raise ToolchainError(f"--validate-pending: {len(waiting)} wheel(s) still pending: "
                             + ", ".join(waiting[:10]),
                             hint="run it on a host that can validate them (a GPU host with "
                             "the workspace and cache of the build host)")
    return 0
