"""The history page's chart: duration and TFLOP/s of one cell over the window's runs, as one
inline SVG with two panels sharing the x axis. Pure: same points, same bytes."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocmbuild.validate.report import ticks

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
