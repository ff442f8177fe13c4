"""The reports directory's files (``<run>/report.json``, ``<run>/summary.md``, ``index.html``,
``rocmbuild.prom``) and the history read back from the earlier runs' ``report.json`` files,
which are untrusted: a file that is a link, too large, not JSON or not a report is skipped with a
warning; a log path in one is linked only when it names a file inside that run's directory."""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.core import untrusted
from rocmbuild.nightly.model import (
    CELL_ID,
    RUN_ID,
    CellOutcome,
    End,
    Held,
    RunReport,
    Validation,
)
from rocmbuild.nightly.report.fmt import one_line

REPORT = "report.json"
SUMMARY = "summary.md"
PAGE = "index.html"
PROM = "rocmbuild.prom"

MAX_REPORT_BYTES = 1 << 20
"""An earlier run's report.json larger than this is skipped (a nightly's is a few KiB)."""


def load_history(reports_dir: Path, exclude: str = "",
                 limit: int = 29) -> tuple[tuple[RunReport, ...], tuple[str, ...]]:
    """The newest ``limit`` earlier runs (newest first) read from ``<reports_dir>/*/report.json``,
    and a warning for each report that was skipped. Links (the run directory or its report) are
    not followed."""
    runs: list[tuple[_dt.datetime, RunReport]] = []
    warnings: list[str] = []
    if limit <= 0 or not reports_dir.is_dir():
        return (), ()
    for d in sorted(reports_dir.iterdir()):
        if d.name == exclude or not RUN_ID.fullmatch(d.name) or d.is_symlink() or not d.is_dir():
            continue
        path = d / REPORT
        if not os.path.lexists(path):
            continue  # a run that is still going, or died before its report
        try:
            r = parse_report(untrusted.read_json(path, MAX_REPORT_BYTES))
            if r.run_id != d.name:
                raise ValueError(f"it names run {r.run_id!r}, not its directory's")
            runs.append((iso_time(r.started), r))
        except (OSError, ValueError) as exc:  # untrusted.BadJson is a ValueError
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            warnings.append(f"nightly history: {path}: skipped: {one_line(why, 200)}")
    runs.sort(key=lambda t: (t[0], t[1].run_id), reverse=True)
    return tuple(r for _, r in runs[:limit]), tuple(warnings)


def iso_time(iso: str) -> _dt.datetime:
    t = _dt.datetime.fromisoformat(iso)
    return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)


_REQUIRED: Any = object()


def _get(d: dict[str, Any], key: str, kind: type | tuple[type, ...],
         default: Any = _REQUIRED, optional: bool = False) -> Any:
    """``d[key]`` checked: of ``kind`` (a bool is no number), finite, not negative (but an exit
    code); None when ``optional``; ``default`` when missing (required when there is none)."""
    if key not in d and default is _REQUIRED:
        raise ValueError(f"{key}: missing")
    v = d.get(key, default)
    if v is None and optional:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise ValueError(f"{key}: not a {' or '.join(k.__name__ for k in kinds)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{key}: not a finite number")
    if isinstance(v, int | float) and not isinstance(v, bool) and v < 0 and key != "exit_code":
        raise ValueError(f"{key}: negative")
    return v


def parse_outcome(d: object) -> CellOutcome:
    """A CellOutcome from its JSON (``CellOutcome.to_json``); ValueError when it is not one."""
    if not isinstance(d, dict):
        raise ValueError("a cell is not an object")
    cell = _get(d, "cell", str)
    if not CELL_ID.fullmatch(cell):
        raise ValueError(f"cell id {cell[:40]!r} is not a cell id")
    num = (int, float)
    hit = _get(d, "cache_hit_rate", num, None, optional=True)
    if hit is not None and hit > 1:
        raise ValueError("cache_hit_rate: above 1")
    reason = _get(d, "reason", str, "")
    return CellOutcome(
        cell_id=cell, status=Status.parse(d.get("status")), end=End(d.get("end")),
        reason=reason, held=Held.parse(_get(d, "held", str, "")),
        held_why=_get(d, "held_why", str, ""), duration_s=float(_get(d, "duration_s", num, 0.0)),
        peak_rss_bytes=_get(d, "peak_rss_bytes", int, None, optional=True),
        disk_bytes=_get(d, "disk_bytes", int, None, optional=True),
        wheel=_get(d, "wheel", str, None, optional=True),
        wheel_size=_get(d, "wheel_size", int, None, optional=True),
        version=_get(d, "version", str, None, optional=True),
        project=_get(d, "project", str, None, optional=True),
        cache_hit_rate=None if hit is None else float(hit),
        tflops=_float_or_none(_get(d, "tflops", num, None, optional=True)),
        exit_code=_get(d, "exit_code", int, None, optional=True),
        log=safe_log(_get(d, "log", str, "")) or "",
        promoted=_get(d, "promoted", bool, False),
        validation=Validation.parse(_get(d, "validation", str, "")),
    )


def _float_or_none(v: float | int | None) -> float | None:
    return None if v is None else float(v)


def parse_report(d: object) -> RunReport:
    """A RunReport from its JSON (``RunReport.to_json``); ValueError when it is not one."""
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    run = _get(d, "run", str)
    if not RUN_ID.fullmatch(run):
        raise ValueError(f"run id {run[:40]!r} is not a run id")
    started, finished = _get(d, "started", str), _get(d, "finished", str)
    iso_time(started), iso_time(finished)  # ValueError when not ISO 8601
    cells = _get(d, "cells", list)
    notes = _get(d, "notes", list, [])
    if not all(isinstance(n, str) for n in notes):
        raise ValueError("notes: not a list of strings")
    return RunReport(
        run_id=run, started=started, finished=finished, executor=_get(d, "executor", str, ""),
        outcomes=tuple(parse_outcome(c) for c in cells),
        lock_note=_get(d, "lock_note", str, ""), freed_bytes=_get(d, "freed_bytes", int, 0),
        notes=tuple(notes))


def safe_log(path: str) -> str | None:
    """``path`` (a log, relative to its run directory) when it stays inside that directory:
    relative, no ``..``, no control characters; else None."""
    if not path or len(path) > 512 or re.search(r"[\x00-\x1f\x7f\\]", path):
        return None
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return None
    return p.as_posix()


def existing_links(reports_dir: Path, runs: Iterable[RunReport]) -> frozenset[str]:
    """The run-relative files the page may link (``<run>/summary.md``, ``<run>/<log>``): those
    that are regular files inside their run's directory (symlinks resolved)."""
    found: set[str] = set()
    for r in runs:
        run_dir = (reports_dir / r.run_id).resolve()
        for rel in (SUMMARY, REPORT, *(o.log for o in r.outcomes)):
            rel = safe_log(rel) or ""
            if not rel:
                continue
            p = (run_dir / rel).resolve()
            if p.is_relative_to(run_dir) and p.is_file():
                found.add(f"{r.run_id}/{rel}")
    return frozenset(found)
