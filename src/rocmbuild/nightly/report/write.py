"""The nightly's reports: ``report.json`` and ``summary.md`` per run, ``index.html`` (a history
page over the last runs with an SVG chart per cell) and ``rocmbuild.prom`` (node_exporter's
textfile collector) for the reports directory, and the ``notify`` webhook.

``write`` is the one entry point (the controller calls it at the end of a run). The renderers
(``summary.render_summary``, ``page.render_page``, ``chart.chart_svg``, ``prom.render_prom``,
``webhook.notification``) are pure: same values, same bytes. The history is read back by
``history`` from the earlier runs' ``report.json`` files, which are untrusted.

The webhook URL may carry a token: it is never shown (not in a warning, the report or the page).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.markup import escape

from rocmbuild.core import fsutil, log
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.nightly.model import RUN_ID, RunReport
from rocmbuild.nightly.report.history import (
    PAGE,
    PROM,
    REPORT,
    SUMMARY,
    existing_links,
    iso_time,
    load_history,
)
from rocmbuild.nightly.report.page import render_page
from rocmbuild.nightly.report.prom import render_prom
from rocmbuild.nightly.report.summary import render_summary
from rocmbuild.nightly.report.webhook import notification, post_json

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
            iso_time(when)
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


def rewrite(reports_dir: Path, report: RunReport, history: int = 30) -> ReportFiles:
    """An earlier run's report changed afterwards (``nightly --validate-pending`` validated
    and promoted its pending wheels): its ``report.json`` and ``summary.md`` again, then the
    page and ``rocmbuild.prom`` over the newest ``history`` runs read back (the newest run
    stays the prom's latest, whichever run changed). No notification."""
    run_dir = reports_dir / report.run_id
    with fsutil.os_errors(RocmbuildError, "nightly report", reports_dir, _HINT):
        fsutil.write_atomic(run_dir / REPORT, json.dumps(report.to_json(), indent=1) + "\n")
        fsutil.write_atomic(run_dir / SUMMARY, render_summary(report))
        runs, warnings = load_history(reports_dir, limit=max(1, history))
        for w in warnings:
            log.warn(escape(w))
        fsutil.write_atomic(reports_dir / PAGE, render_page(runs, existing_links(reports_dir,
                                                                                  runs)))
        fsutil.write_atomic(reports_dir / PROM, render_prom(runs))
    return ReportFiles(run_dir, run_dir / REPORT, run_dir / SUMMARY, reports_dir / PAGE,
                       reports_dir / PROM, runs=len(runs), warnings=warnings)


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
