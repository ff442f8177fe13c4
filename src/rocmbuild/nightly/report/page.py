"""``index.html``: the history page over the last runs (newest first), then per cell a chart
and a table over them; only files that exist inside their run's directory are linked. Pure:
same runs and links, same bytes."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from urllib.parse import quote

from rocmbuild.artifacts.results import Status
from rocmbuild.nightly.model import RunReport
from rocmbuild.nightly.report.chart import Point, chart_svg
from rocmbuild.nightly.report.fmt import count, duration, one_line, pct, size, steps, tf
from rocmbuild.nightly.report.history import SUMMARY, safe_log

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
             f"{e(count(latest))}. The last {len(runs)} run(s), newest first.</p>",
             "<h2>Runs</h2><table id='runs'><tr><th>run</th><th>started</th><th>finished</th>"
             "<th>executor</th><th>result</th><th>cells</th><th>freed</th><th>notes</th></tr>"]
    for r in runs:
        notes = [n for n in (r.lock_note, *r.notes) if n]
        parts.append(
            f"<tr><td>{_href(f'{r.run_id}/{SUMMARY}', links, r.run_id, r.run_id)}</td>"
            f"<td class='num'>{e(r.started)}</td><td class='num'>{e(r.finished)}</td>"
            f"<td>{e(r.executor)}</td>"
            f"<td>{_status('success' if r.ok else 'failed')}</td><td>{e(count(r))}</td>"
            f"<td class='num'>{e(size(r.freed_bytes))}</td><td>"
            + "<br>".join(e(one_line(n)) for n in notes) + "</td></tr>")
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
                f"{pct(o.cache_hit_rate)}</td><td class='num'>{tf(o.tflops)}</td>")
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
                     "<th>steps</th><th>duration</th><th>peak memory</th><th>disk</th>"
                     "<th>wheel</th><th>size</th><th>cache hits</th><th>TFLOP/s</th><th>log</th>"
                     "<th>reason</th></tr>")
        for r in runs:
            for o in r.outcomes:
                if o.cell_id != c:
                    continue
                log_link = _href(f"{r.run_id}/{safe_log(o.log)}", links, "log")
                parts.append(
                    f"<tr><td>{e(r.run_id)}</td><td>{_status(o.status)}</td>"
                    f"<td>{e(o.end.value)}</td><td>{e(steps(o))}</td>"
                    f"<td class='num'>{duration(o.duration_s)}</td>"
                    f"<td class='num'>{size(o.peak_rss_bytes)}</td>"
                    f"<td class='num'>{size(o.disk_bytes)}</td>"
                    f"<td>{e(o.wheel or '-')}</td><td class='num'>{size(o.wheel_size)}</td>"
                    f"<td class='num'>{pct(o.cache_hit_rate)}</td><td class='num'>"
                    f"{tf(o.tflops)}</td><td>{log_link}"
                    f"</td><td>{e(one_line(o.reason))}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
