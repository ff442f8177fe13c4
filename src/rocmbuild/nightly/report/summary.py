"""``summary.md``: one run's cells as a Markdown table, then reasons, the lock note, what
retention freed, and the notes. Pure: same values, same bytes."""

from __future__ import annotations

from urllib.parse import quote

from rocmbuild.nightly import drift
from rocmbuild.nightly.model import RunReport
from rocmbuild.nightly.report.fmt import count, duration, md, one_line, pct, size, steps, tf
from rocmbuild.nightly.report.history import safe_log


def render_summary(report: RunReport) -> str:
    """``summary.md``: the run's cells as a table, then reasons, the lock note, what retention
    freed, and the notes. Deterministic."""
    verdict = "OK" if report.ok else "FAILED"
    lines = [f"# rocmbuild nightly {report.run_id}: {verdict}", "",
             f"Started {report.started}, finished {report.finished}, executor "
             f"{md(report.executor)}: {count(report)}.", "",
             "| cell | status | end | steps | duration | peak memory | disk | wheel | size "
             "| cache hits | TFLOP/s | log |",
             "|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for o in sorted(report.outcomes, key=lambda o: o.cell_id):
        log_rel = safe_log(o.log)
        link = f"[log]({quote(log_rel)})" if log_rel else "-"
        lines.append(f"| {md(o.cell_id)} | {o.status.value} | {o.end.value} | {steps(o)} | "
                     f"{duration(o.duration_s)} | {size(o.peak_rss_bytes)} | "
                     f"{size(o.disk_bytes)} | {md(o.wheel or '')} | {size(o.wheel_size)} | "
                     f"{pct(o.cache_hit_rate)} | {tf(o.tflops)} | {link} |")
    why = [f"- {o.cell_id}: {o.status.value}: {one_line(o.reason)}"
           for o in sorted(report.outcomes, key=lambda o: o.cell_id) if o.reason]
    if why:
        lines += ["", "Reasons:", "", *why]
    waiting = sorted(o.cell_id for o in report.outcomes if o.pending)
    if waiting:
        lines += ["", f"Pending validation (built and in staging, not promoted): "
                  f"{', '.join(waiting)}. This host could not validate them; on a host that "
                  "can (a GPU host with the same workspace and cache), run `rocmbuild nightly "
                  "--config <nightly.toml> --validate-pending` to validate and promote them."]
    lines += drift.section(report.drift)
    lines.append("")
    if report.lock_note:
        lines.append(f"Lock: {one_line(report.lock_note)}")
    lines.append(f"Freed by retention: {size(report.freed_bytes)}.")
    if report.notes:
        lines += ["", "Notes:", "", *(f"- {one_line(n)}" for n in report.notes)]
    return "\n".join(lines) + "\n"
