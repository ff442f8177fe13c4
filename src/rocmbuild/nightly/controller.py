"""The controller: lock, resolve and decide every cell, write the manifest, run the BUILD cells
through an executor, promote the green ones from staging (``promotion``), prune per
retention, report.

The run directory is ``<reports>/<run_id>/`` with ``run_id`` the UTC start time
(``20261130T161500Z``); ``manifest.json`` is written before any cell starts.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.core import fsutil, log
from rocmbuild.core.errors import Busy, RocmbuildError, UsageError
from rocmbuild.host.detect import Host
from rocmbuild.nightly import cell as cellmod
from rocmbuild.nightly import changes, check, drift, lock, promotion
from rocmbuild.nightly.config import NightlyConfig
from rocmbuild.nightly.executors import Local
from rocmbuild.nightly.model import (
    CELL_ID,
    RUN_ID,
    Cell,
    CellOutcome,
    Decision,
    End,
    RunReport,
    Task,
)
from rocmbuild.nightly.report.history import PAGE, PROM
from rocmbuild.nightly.report.write import write as report_write
from rocmbuild.nightly.slurm.executor import SlurmExecutor
from rocmbuild.nightly.slurm.settings import SlurmSettings
from rocmbuild.plan import planning
from rocmbuild.plan.model import Plan
from rocmbuild.recipe import load, search


class Executor(Protocol):
    def run(self, tasks: Sequence[Task]) -> list[CellOutcome]: ...


def run_id(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def select(cfg: NightlyConfig, only: Sequence[str]) -> list[Cell]:
    return [cfg.cell(c) for c in dict.fromkeys(only)] if only else list(cfg.cells)


def detect_host(cells: Sequence[Cell]) -> Host:
    """This machine, once for every cell (``planning.host_for``: the compiler and the ROCm
    components are looked for when any cell's plan needs them)."""
    return planning.host_for(
        [(load.load(search.find_recipe(c.recipe)), changes.cell_target(c)) for c in cells],
        planning.Detect())


def plan(cfg: NightlyConfig, only: Sequence[str] = (), exclude_run: str = "",
         get: changes.Fetch = changes.http_get) -> list[changes.Decided]:
    """Every selected cell's pin, plan and decision (what --dry-run prints); first the reports
    directory's paths (``check_outputs``) and the whole matrix against its recipes
    (``check.check``), whatever ``only`` selects."""
    check_outputs(cfg)
    check.check(cfg.cells, cfg.path.name)
    cells = select(cfg, only)
    ws = cellmod.workspace(cfg)
    previous = changes.last_manifest(cfg.reports, exclude=exclude_run)
    found = detect_host(cells)
    out: list[changes.Decided] = []
    for c in cells:  # one at a time: an error of the recipe layer names the cell's key
        try:
            out += changes.plan_cells([c], found, ws, cfg.index, cfg.stage, cfg.pypi, previous,
                                     get)
        except UsageError as exc:
            raise check.renamed(exc, c, cfg.path.name) from None
    return out


def check_outputs(cfg: NightlyConfig) -> None:
    """Before anything runs (the dry run too): the reports directory's ``index.html`` and
    ``rocmbuild.prom`` must be regular files (or not exist yet), so that a run never ends in a
    report it cannot write (a file where the directory belongs is the config's to refuse).
    UsageError naming the key and the path."""
    where = f"{cfg.path.name}: reports.dir"
    hint = ("move it away, or set reports.dir in the config to a directory of the nightly's "
            "own (it makes the directory and its files itself)")
    for name in (PAGE, PROM):
        p = cfg.reports / name
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"{where}: {p}: {exc.strerror}", hint=hint) from None
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else \
                "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            raise UsageError(f"{where}: {p}: is {kind}, where the nightly writes its {name}",
                             hint=hint)


def jobs_json(plan: Plan) -> dict[str, Any]:
    """MAX_JOBS as the cell's plan has it, and the memory per job it was planned with (learned
    when the units were measured, else the recipe's): what a Slurm cell asks for, x jobs."""
    return {"jobs": plan.jobs, "jobs_reason": plan.jobs_reason,
            "mem_per_job_gb": round(plan.job_mem_gb, 3), "mem_from": plan.job_mem_from}


def manifest(cfg: NightlyConfig, rid: str, started: float,
             planned: Sequence[changes.Decided]) -> dict[str, Any]:
    cells = []
    for p in planned:
        c = p.cell_plan.cell
        cells.append({
            "cell": {"id": c.id, "recipe": c.recipe, "variant": c.variant, "source": c.source,
                     "arch": c.arch, "follow": c.follow, "options": [list(o) for o in c.options],
                     "timeout_s": c.timeout_s, **({"group": c.group} if c.group else {})},
            "pin": p.cell_plan.pin.to_json(),
            "cache_key": p.cell_plan.cache_key,
            "build_tag": p.build_tag,
            "decision": p.cell_plan.decision.value,
            "reasons": list(p.cell_plan.reasons),
            "facts": p.facts.to_json() if p.facts else None,
            **(jobs_json(p.plan) if p.plan else {}),
            **({"error": p.error} if p.error else {}),
        })
    return {"run": rid, "started": _iso(started), "config": str(cfg.path),
            "config_sha256": cfg.sha256, "index": log.redact(cfg.index, strict=True),
            "stage": cfg.stage,
            "promote_to": cfg.promote_to, "cells": cells}


def tasks(cfg: NightlyConfig, run_dir: Path, planned: Sequence[changes.Decided]) -> list[Task]:
    """One task per BUILD cell: the same ``python -m rocmbuild nightly --cell`` everywhere (the
    Slurm executor with a ``gpu_partition`` splits each into its build and validate steps)."""
    ws = cellmod.workspace(cfg)
    out = []
    for p in planned:
        if p.cell_plan.decision is not Decision.BUILD or p.plan is None:
            continue
        c = p.cell_plan.cell
        d = cellmod.cell_dir(run_dir, c.id)
        argv = (sys.executable, "-m", "rocmbuild", "--workdir", str(ws.root), "--cache-dir",
                str(ws.cache), "nightly", "--config", str(cfg.path), "--run-dir", str(run_dir),
                "--cell", c.id)
        out.append(Task(c.id, argv, d / cellmod.RESULT, d / cellmod.LOG, cpus=p.plan.jobs,
                        mem_bytes=int(p.plan.jobs * p.plan.job_mem_gb * (1 << 30)),
                        time_s=c.timeout_s))
    return out


def _skipped(cfg: NightlyConfig, cell_id: str, cache_key: str, reason: str) -> CellOutcome:
    """A SKIP cell: its validated wheel is in staging (``promotion.promote_cells`` promotes it
    when the served stage does not have it yet: an earlier promote failed, or its stack was
    held)."""
    ws = cellmod.workspace(cfg)
    from rocmbuild.cache import store as cache

    entry = cache.lookup(ws.cache, cache_key) if cache_key else None
    o = CellOutcome(cell_id, Status.SKIPPED, End.SKIPPED, reason=reason)
    if entry is None:
        return o
    project, version = changes.wheel_project(entry.wheel.name)
    return replace(o, wheel=entry.wheel.name, wheel_size=entry.size, project=project,
                   version=version)


def _prune(cfg: NightlyConfig) -> tuple[int, str]:
    """Retention: ``rocmbuild cache prune`` with the config's limits."""
    if cfg.max_size is None and cfg.keep_days is None:
        return 0, ""
    from rocmbuild.cache import prune

    try:
        res = prune.prune(cellmod.workspace(cfg), cfg.max_size, cfg.keep_days, False)
    except RocmbuildError as exc:
        return 0, f"prune failed: {exc.message}"
    return res.freed_bytes, ""


@dataclass(frozen=True)
class Pending:
    """``--no-wait``: the run's cells are out as Slurm arrays; ``nightly --collect RUN`` ends
    the run (promote, prune, report)."""

    run_id: str
    run_dir: Path
    job_ids: tuple[str, ...]
    cells: int


def outstanding(reports: Path) -> str | None:
    """A run submitted with ``--no-wait`` and not collected yet (slurm.json, no report.json)."""
    try:
        runs = sorted(reports.iterdir(), reverse=True) if reports.is_dir() else []
    except OSError as exc:
        raise UsageError(f"{reports}: cannot list the reports directory: {exc.strerror}",
                         hint="check reports.dir in the config and its permissions") from None
    for d in runs:
        if (RUN_ID.fullmatch(d.name) and not d.is_symlink() and d.is_dir()
                and (d / "slurm.json").is_file()
                and not (d / "report.json").exists()):
            return d.name
    return None


def nightly(cfg: NightlyConfig, executor: str | None = None, only: Sequence[str] = (),
            make_executor: Callable[[str, NightlyConfig, Path], Executor] | None = None,
            get: changes.Fetch = changes.http_get, lock_note: str | None = None,
            no_wait: bool = False) -> RunReport | Pending:
    """One nightly run; the report is written, also when cells failed. ``lock_note``: the
    caller holds the workspace's lock already (the command takes it first, so that a second
    nightly is refused before the heavy imports) and this is what taking it said. ``no_wait``
    (Slurm): submit and return a ``Pending`` (when there is anything to build)."""
    if lock_note is None:
        with lock.held(cellmod.workspace(cfg).root, run_id()) as note:
            return nightly(cfg, executor, only, make_executor, get, note, no_wait)
    kind = executor or cfg.executor.kind
    if no_wait and kind != "slurm":
        raise UsageError("--no-wait: only with the Slurm executor",
                         hint="add --executor slurm (or set [executor] kind = \"slurm\")")
    out = outstanding(cfg.reports)
    if out is not None:
        raise Busy(f"nightly run {out}'s Slurm tasks were submitted with --no-wait and are not "
                   "collected yet", hint=f"collect it first: rocmbuild nightly --config "
                   f"{cfg.path} --collect {out}")
    started = time.time()
    rid = run_id(started)
    if lock_note:
        log.warn(escape(lock_note))
    run_dir = cfg.reports / rid
    n = 1
    while run_dir.exists():  # two runs in one second
        n += 1
        run_dir = cfg.reports / f"{rid}-{n}"
    rid = run_dir.name
    planned = plan(cfg, only, exclude_run=rid, get=get)
    data = manifest(cfg, rid, started, planned)
    data["executor"] = kind
    with fsutil.os_errors(UsageError, "nightly manifest", cfg.reports,
                          "check that reports.dir in the config is a writable directory"):
        run_dir.mkdir(parents=True)
        fsutil.write_atomic(run_dir / "manifest.json", json.dumps(data, indent=1) + "\n")
    for p in planned:
        cp = p.cell_plan
        log.info(escape(f"{cp.cell.id}: {cp.decision.value}: {'; '.join(cp.reasons)}"))
    todo = tasks(cfg, run_dir, planned)
    if no_wait and todo:
        sub = _slurm(cfg, run_dir).submit(todo)
        return Pending(rid, run_dir, tuple(j.job_id for j in sub.jobs), len(todo))
    ex = (make_executor or _executor)(kind, cfg, run_dir)
    built = {o.cell_id: o for o in ex.run(todo)} if todo else {}
    return finish(cfg, data, built, lock_note)


def collect(cfg: NightlyConfig, run: str, lock_note: str = "") -> RunReport:
    """``--collect RUN`` (a run id under the reports dir, or a run directory): wait for the
    run's Slurm tasks, collect them, then promote, prune and report as a waited run does."""
    given = Path(run)
    if given.is_dir() and (given / "manifest.json").is_file():
        run_dir = given.absolute()
    elif RUN_ID.fullmatch(run) and (cfg.reports / run).is_dir():
        run_dir = cfg.reports / run
    else:
        raise UsageError(f"--collect: {run[:100]!r} is neither a run id under {cfg.reports} "
                         "nor a run directory", hint="give the run id `nightly --no-wait` "
                         "printed (e.g. 20261130T161500Z)")
    if (run_dir / "report.json").exists():
        raise UsageError(f"--collect: run {run_dir.name} was collected already",
                         hint=f"read {run_dir / 'report.json'}")
    if lock_note:
        log.warn(escape(lock_note))
    check_outputs(cfg)
    data = cellmod.read_manifest(run_dir)
    if not RUN_ID.fullmatch(str(data.get("run"))) or not isinstance(data.get("started"), str) \
            or not all(isinstance(e, dict) and isinstance(e.get("cell"), dict)
                       and CELL_ID.fullmatch(str(e["cell"].get("id")))
                       and e.get("decision") in (Decision.BUILD.value, Decision.SKIP.value)
                       for e in data["cells"]):
        raise UsageError(f"--collect: {run_dir / 'manifest.json'}: not a nightly manifest",
                         hint="was it edited? collect the run directory the nightly made")
    _same_config(cfg, data, run_dir)
    cellmod.same_config(cfg, data, run_dir, cellmod.COLLECT_USE)
    outcomes = _slurm(cfg, run_dir).collect(run_dir, wait=True)
    return finish(cfg, data, {o.cell_id: o for o in outcomes}, lock_note)


def _same_config(cfg: NightlyConfig, data: dict[str, Any], run_dir: Path) -> None:
    """``--collect`` promotes into the index the run was started for: refuse another config
    (another file, or the same file with its index or channels changed since: said by name;
    any other change is the bytes' sha256, ``cell.same_config``)."""
    now = {"config": ("--config", str(cfg.path)),
           "index": ("publish.index", log.redact(cfg.index, strict=True)),
           "stage": ("publish.stage", cfg.stage),
           "promote_to": ("publish.promote_to", cfg.promote_to)}
    for key, (label, value) in now.items():
        same = data.get(key) == value or key == "config" and isinstance(data.get(key), str) \
            and os.path.realpath(data[key]) == os.path.realpath(value)  # ../x, links
        if not same:
            was = str(data.get(key))[:200]
            raise UsageError(
                f"--collect: run {run_dir.name} was started with {label} {was!r}, not "
                f"{value!r}",
                hint=f"collect it with the config it was started with: --config {was}"
                if key == "config" else f"set {label} in {cfg.path} back to {was!r} until "
                "the run is collected")


def finish(cfg: NightlyConfig, data: dict[str, Any], built: dict[str, CellOutcome],
           lock_note: str) -> RunReport:
    """After the executor: every cell's outcome from the manifest (``data``) and what was built,
    promoted by ``promotion.promote_cells`` (SKIP cells and built ones alike, stack groups
    whole), the retention prune, the report."""
    staged: list[CellOutcome] = []
    groups: dict[str, str] = {}
    for e in data["cells"]:
        cid = str(e["cell"]["id"])
        groups[cid] = str(e["cell"].get("group") or "")
        if e.get("decision") == Decision.SKIP.value:
            staged.append(_skipped(cfg, cid, str(e.get("cache_key", "")),
                                   "; ".join(e.get("reasons", []))))
        elif e.get("error"):
            staged.append(CellOutcome(cid, Status.FAILED, End.FAILED,
                                      reason=f"cannot be planned: {e['error']}"))
        else:
            staged.append(built.get(cid) or CellOutcome(
                cid, Status.FAILED, End.FAILED, reason="the executor returned no outcome"))
    outcomes = promotion.promote_cells(cfg, staged, groups)
    freed, prune_note = _prune(cfg)
    report = RunReport(str(data["run"]), str(data["started"]), _iso(time.time()),
                       str(data.get("executor", cfg.executor.kind)), tuple(outcomes),
                       lock_note=lock_note, freed_bytes=freed,
                       notes=(prune_note,) if prune_note else (),
                       drift=drift.for_manifest(data, cfg.pypi))
    report_write(cfg.reports, report, cfg.history, cfg.notify_url)
    return report


def _slurm(cfg: NightlyConfig, run_dir: Path) -> SlurmExecutor:
    return SlurmExecutor(cfg.executor.slurm or SlurmSettings(), run_dir)


def _executor(kind: str, cfg: NightlyConfig, run_dir: Path) -> Executor:
    return Local(run_dir) if kind == "local" else _slurm(cfg, run_dir)
