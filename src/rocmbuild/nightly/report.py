"""The nightly's reports: ``report.json`` and ``summary.md`` per run, ``index.html`` (a history
page over the last runs with an SVG chart per cell) and ``rocmbuild.prom`` (node_exporter's
textfile collector) for the reports directory, and the ``notify`` webhook.

``write`` is the one entry point (the controller calls it at the end of a run). The renderers
(``render_summary``, ``render_page``, ``chart_svg``, ``render_prom``, ``notification``) are pure:
same values, same bytes. The history is read back from the earlier runs' ``report.json`` files,
which are untrusted: a file that is a link, too large, not JSON or not a report is skipped with a
warning; a log path in one is linked only when it names a file inside that run's directory.

The webhook URL may carry a token: it is never shown (not in a warning, the report or the page).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import http.client
import json
import math
import os
import re
import stat
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.core import fsutil, log
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.nightly import drift
from rocmbuild.nightly.model import CELL_ID, RUN_ID, CellOutcome, End, RunReport
from rocmbuild.publish.target import redact
from rocmbuild.validate.report import ticks

REPORT = "report.json"
SUMMARY = "summary.md"
PAGE = "index.html"
PROM = "rocmbuild.prom"

MAX_REPORT_BYTES = 1 << 20
"""An earlier run's report.json larger than this is skipped (a nightly's is a few KiB)."""
NOTIFY_TIMEOUT_S = 10.0

_GOOD = (Status.SUCCESS, Status.WARNING)
_HINT = ("check that the nightly's report directory (report_dir in nightly.toml) is a writable "
         "directory with free space")


@dataclass(frozen=True)
class ReportFiles:
    """What ``write`` wrote, and what became of the notification."""

    run_dir: Path
    report: Path
    summary: Path
    page: Path
    prom: Path
    runs: int
    """Runs on the page (this one and the earlier ones read back)."""
    event: str | None = None
    """``failure`` or ``recovery`` when there was something to notify, else None."""
    notified: bool = False
    """The webhook took the POST (a 2xx answer)."""
    warnings: tuple[str, ...] = ()
    """Earlier reports skipped, a failed POST (that one is also in the report's notes)."""


# ----------------------------------------------------------------------------- entry point


def write(reports_dir: Path, report: RunReport, history: int = 30,
          notify_url: str | None = None) -> ReportFiles:
    """Write ``<reports_dir>/<run_id>/report.json`` and ``summary.md``, then
    ``<reports_dir>/index.html`` over the last ``history`` runs (this one included) and
    ``<reports_dir>/rocmbuild.prom``, each atomically; then, with ``notify_url``, POST the
    failure or recovery (a failed POST becomes a note in this run's report, never an error)."""
    if not RUN_ID.fullmatch(report.run_id):
        raise RocmbuildError(f"nightly report: run id {report.run_id!r} cannot be a directory "
                             "name", hint="a run id is the run's UTC start, e.g. 20261130T161500Z")
    for key, when in (("started", report.started), ("finished", report.finished)):
        try:
            _when(when)
        except ValueError:
            raise RocmbuildError(f"nightly report: {key} {when!r} is not an ISO 8601 time",
                                 hint="give UTC times such as 2026-11-30T02:00:00Z") from None
    reports_dir = Path(reports_dir)
    run_dir = reports_dir / report.run_id
    with fsutil.os_errors(RocmbuildError, "nightly report", reports_dir, _HINT):
        run_dir.mkdir(parents=True, exist_ok=True)
        earlier, warnings = load_history(reports_dir, exclude=report.run_id,
                                         limit=max(0, history - 1))
        for w in warnings:
            log.warn(escape(w))
        files = _write_files(reports_dir, (report, *earlier))
        payload = notification((report, *earlier), reports_dir)
        event = None if payload is None else str(payload["event"])
        if payload is None or not notify_url:
            return replace(files, event=event, warnings=warnings)
        problem = post_json(notify_url, payload)
        if problem is None:
            return replace(files, event=event, notified=True, warnings=warnings)
        log.warn(escape(problem))
        report = replace(report, notes=(*report.notes, problem))
        files = _write_files(reports_dir, (report, *earlier))
        return replace(files, event=event, warnings=(*warnings, problem))


def _write_files(reports_dir: Path, runs: Sequence[RunReport]) -> ReportFiles:
    report = runs[0]
    run_dir = reports_dir / report.run_id
    paths = ReportFiles(run_dir, run_dir / REPORT, run_dir / SUMMARY, reports_dir / PAGE,
                        reports_dir / PROM, runs=len(runs))
    fsutil.write_atomic(paths.report, json.dumps(report.to_json(), indent=1) + "\n")
    fsutil.write_atomic(paths.summary, render_summary(report))
    fsutil.write_atomic(paths.page, render_page(runs, existing_links(reports_dir, runs)))
    fsutil.write_atomic(paths.prom, render_prom(runs))
    return paths


# ----------------------------------------------------------------------------- reading back


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
            r = parse_report(json.loads(_read_capped(path)))
            if r.run_id != d.name:
                raise ValueError(f"it names run {r.run_id!r}, not its directory's")
            runs.append((_when(r.started), r))
        except (OSError, ValueError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            warnings.append(f"nightly history: {path}: skipped: {_one_line(why, 200)}")
    runs.sort(key=lambda t: (t[0], t[1].run_id), reverse=True)
    return tuple(r for _, r in runs[:limit]), tuple(warnings)


def _read_capped(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        data = f.read(MAX_REPORT_BYTES + 1)
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError(f"larger than {MAX_REPORT_BYTES} bytes")
    return data.decode("utf-8")


def _when(iso: str) -> _dt.datetime:
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
    return CellOutcome(
        cell_id=cell, status=Status.parse(d.get("status")), end=End(d.get("end")),
        reason=_get(d, "reason", str, ""), duration_s=float(_get(d, "duration_s", num, 0.0)),
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
    _when(started), _when(finished)  # ValueError when not ISO 8601
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


# ----------------------------------------------------------------------------- formatting


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def duration(s: float) -> str:
    """``12.3 s``, ``5m 03s``, ``2h 05m``."""
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m {sec:02d}s"
    return f"{m // 60}h {m % 60:02d}m"


def size(n: int | None) -> str:
    """``512 B``, ``1.5 KiB`` ... ``12.3 TiB``."""
    if n is None:
        return "-"
    units, v, i = ("B", "KiB", "MiB", "GiB", "TiB"), float(n), 0
    while v >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{n} B" if i == 0 else f"{v:.1f} {units[i]}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _tf(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}"


def _md(text: str) -> str:
    """One Markdown table cell: one line, ``|`` escaped."""
    return _one_line(text).replace("\\", "\\\\").replace("|", "\\|") or "-"


def _count(r: RunReport) -> str:
    n = {s: sum(o.status is s for o in r.outcomes) for s in Status}
    parts = [f"{n[Status.SUCCESS] + n[Status.WARNING]} succeeded", f"{n[Status.FAILED]} failed",
             f"{n[Status.SKIPPED]} skipped"]
    return ", ".join(parts)


# ----------------------------------------------------------------------------- summary.md


def render_summary(report: RunReport) -> str:
    """``summary.md``: the run's cells as a table, then reasons, the lock note, what retention
    freed, and the notes. Deterministic."""
    verdict = "OK" if report.ok else "FAILED"
    lines = [f"# rocmbuild nightly {report.run_id}: {verdict}", "",
             f"Started {report.started}, finished {report.finished}, executor "
             f"{_md(report.executor)}: {_count(report)}.", "",
             "| cell | status | end | duration | peak memory | disk | wheel | size | cache hits "
             "| TFLOP/s | log |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for o in sorted(report.outcomes, key=lambda o: o.cell_id):
        log_rel = safe_log(o.log)
        link = f"[log]({quote(log_rel)})" if log_rel else "-"
        lines.append(f"| {_md(o.cell_id)} | {o.status.value} | {o.end.value} | "
                     f"{duration(o.duration_s)} | {size(o.peak_rss_bytes)} | "
                     f"{size(o.disk_bytes)} | {_md(o.wheel or '')} | {size(o.wheel_size)} | "
                     f"{_pct(o.cache_hit_rate)} | {_tf(o.tflops)} | {link} |")
    why = [f"- {o.cell_id}: {o.status.value}: {_one_line(o.reason)}"
           for o in sorted(report.outcomes, key=lambda o: o.cell_id) if o.reason]
    if why:
        lines += ["", "Reasons:", "", *why]
    lines += drift.section(report.drift)
    lines.append("")
    if report.lock_note:
        lines.append(f"Lock: {_one_line(report.lock_note)}")
    lines.append(f"Freed by retention: {size(report.freed_bytes)}.")
    if report.notes:
        lines += ["", "Notes:", "", *(f"- {_one_line(n)}" for n in report.notes)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the SVG chart

_BLUE, _ORANGE, _RED, _GREY = "#1f77b4", "#ff7f0e", "#cc0000", "#dddddd"


@dataclass(frozen=True)
class Point:
    """One run of one cell on the chart."""

    x: int
    """The run's place in the window, oldest 0."""
    label: str
    """The run's start date (or date and time, when two runs share a date), for the x axis."""
    duration_s: float | None
    tflops: float | None
    failed: bool


def _panel(points: Sequence[Point], value: Callable[[Point], float | None], n_runs: int,
           top: int, title: str, colour: str, unit: float) -> list[str]:
    """One panel of the chart: y axis with labelled gridlines, a line through the points, a dot
    per run (red when the cell failed)."""
    left, width, height = 70, 640, 150
    pts = [(p, v / unit) for p in points if (v := value(p)) is not None]
    out = [f'<text x="14" y="{top + height / 2}" transform="rotate(-90 14 {top + height / 2})" '
           f'text-anchor="middle" class="axis-title">{html.escape(title)}</text>']
    if not pts:
        out.append(f'<text x="{left + 10}" y="{top + height / 2}" fill="#777">no value in these '
                   "runs</text>")
        return out
    vmax = max(v for _, v in pts) or 1.0
    tk = ticks(vmax)
    if tk[-1] < vmax:  # one gridline above the highest point
        tk.append(tk[-1] + (tk[1] - tk[0] if len(tk) > 1 else vmax))
    vtop = tk[-1]
    step = width / max(1, n_runs - 1)

    def xy(p: Point, v: float) -> tuple[float, float]:
        x = left + p.x * step if n_runs > 1 else left + width / 2
        return x, top + height - v / vtop * height

    for t in tk:
        y = round(top + height - t / vtop * height) + 0.5  # a crisp 1 px line
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + width}" '
                   f'y2="{y:.1f}" stroke="{_GREY}"/><text class="tick" x="{left - 6}" '
                   f'y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="#333"/>'
               f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" '
               'stroke="#333"/>')
    coords = [xy(p, v) for p, v in pts]
    if len(coords) > 1:
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                   + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
    for (p, v), (x, y) in zip(pts, coords, strict=True):
        fill = _RED if p.failed else colour
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}"><title>'
                   f"{html.escape(p.label)}: {v:.4g}{' (failed)' if p.failed else ''}"
                   "</title></circle>")
    return out


def chart_svg(cell_id: str, points: Sequence[Point], n_runs: int) -> str:
    """Duration and TFLOP/s of one cell over the window's runs (oldest left), as one inline SVG
    with two panels sharing the x axis (the runs' start dates)."""
    built = [p for p in points if p.duration_s is not None]
    slow = max((p.duration_s or 0.0 for p in built), default=0.0) > 600
    unit, dur_title = (60.0, "duration (min)") if slow else (1.0, "duration (s)")
    left, width = 70, 640
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="780" height="430" role="img" '
           f'class="chart" aria-label="duration and TFLOP/s of {html.escape(cell_id)} over time" '
           'font-family="sans-serif" font-size="11">']
    out += _panel(points, lambda p: p.duration_s, n_runs, 10, dur_title, _BLUE, unit)
    out += _panel(points, lambda p: p.tflops, n_runs, 200, "TFLOP/s", _ORANGE, 1.0)
    every = max(1, math.ceil(n_runs / 10))
    labels = {p.x: p.label for p in points}
    step = width / max(1, n_runs - 1)
    for x, label in sorted(labels.items()):
        if (n_runs - 1 - x) % every == 0:
            px = left + x * step if n_runs > 1 else left + width / 2
            out.append(f'<text class="xtick" x="{px:.1f}" y="370" text-anchor="middle">'
                       f"{html.escape(label)}</text>")
    out.append(f'<text x="{left + width / 2}" y="395" text-anchor="middle" '
               'class="axis-title">run started (UTC)</text>'
               f'<circle cx="{left}" cy="415" r="4" fill="{_BLUE}"/><text x="{left + 8}" '
               'y="419">duration</text>'
               f'<circle cx="{left + 90}" cy="415" r="4" fill="{_ORANGE}"/>'
               f'<text x="{left + 98}" y="419">TFLOP/s (validated)</text>'
               f'<circle cx="{left + 250}" cy="415" r="4" fill="{_RED}"/>'
               f'<text x="{left + 258}" y="419">failed</text></svg>')
    return "".join(out)


# ----------------------------------------------------------------------------- index.html

_CSS = ("body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
        "margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
        "td.num{white-space:nowrap;text-align:right;font-variant-numeric:tabular-nums}"
        "td:first-child{white-space:nowrap}th{background:#f3f3f3}.success{color:#127a12}"
        ".failed{color:#c00;font-weight:bold}"
        ".skipped,.warning{color:#a66b00}a{color:#0645ad}svg.chart{display:block}")


def _finite(v: float | None) -> float | None:
    """``v`` when the chart can draw it (a number, finite, not negative)."""
    return v if v is not None and math.isfinite(v) and v >= 0 else None


def _status(s: Status | str) -> str:
    v = s.value if isinstance(s, Status) else s
    return f'<span class="{html.escape(v)}">{html.escape(v)}</span>'


def _anchor(cell: str) -> str:
    return "cell-" + re.sub(r"[^a-z0-9._-]", "-", cell.lower())


def _href(rel: str, links: frozenset[str], text: str, missing: str = "-") -> str:
    """A relative link to ``rel`` when it is in ``links``, else ``missing``."""
    if rel not in links:
        return html.escape(missing)
    return f'<a href="{html.escape(quote(rel))}">{html.escape(text)}</a>'


def render_page(runs: Sequence[RunReport], links: frozenset[str] = frozenset()) -> str:
    """``index.html``: the runs (newest first), then per cell a chart and a table over them.
    ``links``: the run-relative files that exist (``existing_links``); others are not linked."""
    e = html.escape
    latest = runs[0]
    order = list(reversed(runs))  # oldest first, for the chart's x axis
    cells = sorted({o.cell_id for r in runs for o in r.outcomes})
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>"
             f"<title>rocmbuild nightly</title><style>{_CSS}</style></head><body>",
             f"<h1>rocmbuild nightly: {_status('success' if latest.ok else 'failed')}</h1>",
             f"<p>Latest run {e(latest.run_id)}, started {e(latest.started)}: "
             f"{e(_count(latest))}. The last {len(runs)} run(s), newest first.</p>",
             "<h2>Runs</h2><table id='runs'><tr><th>run</th><th>started</th><th>finished</th>"
             "<th>executor</th><th>result</th><th>cells</th><th>freed</th><th>notes</th></tr>"]
    for r in runs:
        notes = [n for n in (r.lock_note, *r.notes) if n]
        parts.append(
            f"<tr><td>{_href(f'{r.run_id}/{SUMMARY}', links, r.run_id, r.run_id)}</td>"
            f"<td class='num'>{e(r.started)}</td><td class='num'>{e(r.finished)}</td>"
            f"<td>{e(r.executor)}</td>"
            f"<td>{_status('success' if r.ok else 'failed')}</td><td>{e(_count(r))}</td>"
            f"<td class='num'>{e(size(r.freed_bytes))}</td><td>"
            + "<br>".join(e(_one_line(n)) for n in notes) + "</td></tr>")
    parts.append("</table><h2>Cells</h2><p>A skipped cell was unchanged: its last build's "
                 "numbers are shown.</p><table id='cells'><tr><th>cell</th><th>latest status"
                 "</th><th>last build</th><th>duration</th><th>wheel size</th><th>cache hits"
                 "</th><th>TFLOP/s</th></tr>")
    for c in cells:
        status = next(o.status for r in runs for o in r.outcomes if o.cell_id == c)
        run, o = next(((r, o) for r in runs for o in r.outcomes
                       if o.cell_id == c and o.status is not Status.SKIPPED), (None, None))
        nums = ("<td>-</td>" * 5 if run is None or o is None else
                f"<td>{e(run.run_id)}</td><td class='num'>{duration(o.duration_s)}</td>"
                f"<td class='num'>{size(o.wheel_size)}</td><td class='num'>"
                f"{_pct(o.cache_hit_rate)}</td><td class='num'>{_tf(o.tflops)}</td>")
        parts.append(f"<tr><td><a href='#{_anchor(c)}'>{e(c)}</a></td><td>{_status(status)}"
                     f"</td>{nums}</tr>")
    parts.append("</table>")
    days = [r.started[:10] for r in order]  # x labels: the dates, or times when one repeats
    label = (days if len(set(days)) == len(days)
             else [r.started[5:16].replace("T", " ") for r in order])
    for c in cells:
        points = [Point(i, label[i],
                        None if o.status is Status.SKIPPED else _finite(o.duration_s),
                        _finite(o.tflops), o.status is Status.FAILED)
                  for i, r in enumerate(order) for o in r.outcomes if o.cell_id == c]
        parts.append(f"<h3 id='{_anchor(c)}'>{e(c)}</h3>")
        parts.append(chart_svg(c, points, len(order)))
        parts.append("<table class='history'><tr><th>run</th><th>status</th><th>end</th>"
                     "<th>duration</th><th>peak memory</th><th>disk</th><th>wheel</th>"
                     "<th>size</th><th>cache hits</th><th>TFLOP/s</th><th>log</th>"
                     "<th>reason</th></tr>")
        for r in runs:
            for o in r.outcomes:
                if o.cell_id != c:
                    continue
                log_link = _href(f"{r.run_id}/{safe_log(o.log)}", links, "log")
                parts.append(
                    f"<tr><td>{e(r.run_id)}</td><td>{_status(o.status)}</td>"
                    f"<td>{e(o.end.value)}</td><td class='num'>{duration(o.duration_s)}</td>"
                    f"<td class='num'>{size(o.peak_rss_bytes)}</td>"
                    f"<td class='num'>{size(o.disk_bytes)}</td>"
                    f"<td>{e(o.wheel or '-')}</td><td class='num'>{size(o.wheel_size)}</td>"
                    f"<td class='num'>{_pct(o.cache_hit_rate)}</td><td class='num'>"
                    f"{_tf(o.tflops)}</td><td>{log_link}"
                    f"</td><td>{e(_one_line(o.reason))}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- rocmbuild.prom

_PREFIX = "rocmbuild_nightly_"


def _label(v: str) -> str:
    """A label value escaped per the text exposition format."""
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(round(v, 6))


def _epoch(iso: str) -> int:
    return int(_when(iso).timestamp())


def render_prom(runs: Sequence[RunReport]) -> str:
    """``rocmbuild.prom``: gauges per cell of the latest run (``runs[0]``), for node_exporter's
    textfile collector. A cell the latest run skipped (unchanged) keeps its TFLOP/s and cache
    hit ratio from its last build in ``runs``; the last success time of every cell in ``runs``
    comes from the newest run in which it succeeded."""
    cur = runs[0]
    now = {o.cell_id: o for o in cur.outcomes}
    built: dict[str, CellOutcome] = {}  # each cell's newest non-skipped outcome
    last_ok: dict[str, int] = {}
    for r in runs:
        for o in r.outcomes:
            if o.status is not Status.SKIPPED:
                built.setdefault(o.cell_id, o)
            if o.status in _GOOD:
                last_ok.setdefault(o.cell_id, _epoch(r.finished))

    def carried(c: str, o: CellOutcome) -> CellOutcome:
        return built.get(c, o) if o.status is Status.SKIPPED else o

    fams: list[tuple[str, str, list[tuple[str, float]]]] = [
        ("cell_duration_seconds", "Wall time of the cell in the latest nightly run.",
         [(c, o.duration_s) for c, o in now.items()]),
        ("cell_success", "1 when the cell succeeded or was unchanged (skipped) in the latest "
         "nightly run, 0 when it failed.",
         [(c, 0 if o.status is Status.FAILED else 1) for c, o in now.items()]),
        ("cell_tflops", "Best TFLOP/s of the kernel gate in the cell's latest validated build.",
         [(c, t) for c, o in now.items() if (t := carried(c, o).tflops) is not None]),
        ("cell_compile_cache_hit_ratio", "Compile cache hit ratio (0..1) of the cell's latest "
         "build.", [(c, h) for c, o in now.items()
                    if (h := carried(c, o).cache_hit_rate) is not None]),
        ("cell_last_success_timestamp_seconds", "Unix time the newest nightly run in which the "
         "cell succeeded finished.", list(last_ok.items())),
    ]
    lines = []
    for name, text, samples in fams:
        lines += [f"# HELP {_PREFIX}{name} {_help(text)}", f"# TYPE {_PREFIX}{name} gauge"]
        lines += [f'{_PREFIX}{name}{{cell="{_label(c)}"}} {_value(v)}' for c, v in sorted(samples)]
    for name, text, v in (
        ("last_run_timestamp_seconds", "Unix time the latest nightly run finished.",
         _epoch(cur.finished)),
        ("run_success", "1 when every cell of the latest nightly run that was not skipped "
         "succeeded.", int(cur.ok)),
        ("freed_bytes", "Bytes the latest nightly run's retention prune freed.",
         cur.freed_bytes)):
        lines += [f"# HELP {_PREFIX}{name} {_help(text)}", f"# TYPE {_PREFIX}{name} gauge",
                  f"{_PREFIX}{name} {_value(v)}"]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the webhook


def notification(runs: Sequence[RunReport], reports_dir: Path) -> dict[str, Any] | None:
    """The webhook's JSON for the latest run (``runs[0]``), or None when there is nothing to
    say: ``failure`` when a cell failed, else ``recovery`` when a cell whose last build in the
    earlier runs failed succeeded now. ``changed`` lists the cells whose state changed."""
    cur = runs[0]
    before: dict[str, Status] = {}  # each cell's newest non-skipped status in earlier runs
    for r in runs[1:]:
        for o in r.outcomes:
            if o.status is not Status.SKIPPED:
                before.setdefault(o.cell_id, o.status)
    failed = sorted(o.cell_id for o in cur.outcomes if o.status is Status.FAILED)
    recovered = sorted(o.cell_id for o in cur.outcomes
                       if o.status in _GOOD and before.get(o.cell_id) is Status.FAILED)
    if not failed and not recovered:
        return None
    changed = [{"cell": c, "was": before[c].value if c in before else None,
                "now": Status.FAILED.value} for c in failed if before.get(c) is not Status.FAILED]
    changed += [{"cell": c, "was": Status.FAILED.value, "now": Status.SUCCESS.value}
                for c in recovered]
    event = "failure" if failed else "recovery"
    text = f"rocmbuild nightly {cur.run_id}: " + "; ".join(
        p for p in (f"failed: {', '.join(failed)}" if failed else "",
                    f"recovered: {', '.join(recovered)}" if recovered else "") if p)
    reports_dir = Path(os.path.abspath(reports_dir))
    run_dir = reports_dir / cur.run_id
    return {"event": event, "run": cur.run_id, "ok": cur.ok, "text": text, "failed": failed,
            "recovered": recovered, "changed": changed, "report": str(run_dir / REPORT),
            "summary": str(run_dir / SUMMARY), "page": str(reports_dir / PAGE)}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would turn the POST into a GET without its body: not followed."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def post_json(url: str, payload: dict[str, Any], timeout: float = NOTIFY_TIMEOUT_S) -> str | None:
    """POST ``payload`` to ``url``; None when a 2xx came back, else a one-line warning that
    never shows the URL (it may carry a token). ``user:password@`` in the URL is sent as basic
    authentication."""
    what = "nightly notify: the webhook POST failed"
    try:
        parts = urlsplit(url.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return f"{what}: the URL is not http(s)://host/... (nothing was sent)"
        netloc = parts.netloc.rsplit("@", 1)[-1]
        req = urllib.request.Request(
            urlunsplit(parts._replace(netloc=netloc)), method="POST",
            data=json.dumps(payload, sort_keys=True).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "rocmbuild"})
        if parts.username is not None:
            cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            req.add_header("Authorization", "Basic " + base64.b64encode(cred.encode()).decode())
        with urllib.request.build_opener(_NoRedirect).open(req, timeout=timeout) as resp:
            resp.read(1 << 16)
        return None
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"{what}: HTTP {exc.code} {_one_line(redact(str(exc.reason)), 80)}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = (reason.strerror if isinstance(reason, OSError) and reason.strerror
               else str(reason))
        return f"{what}: {_one_line(redact(why), 80)}"
    except TimeoutError:
        return f"{what}: no answer in {timeout:g} s"
    except OSError as exc:
        return f"{what}: {_one_line(exc.strerror or type(exc).__name__, 80)}"
    except (http.client.HTTPException, ValueError) as exc:
        return f"{what}: {type(exc).__name__}"
