"""Render a validation report (the JSON dict) as Markdown and as one self-contained HTML page
with an inline SVG chart: TFLOP/s by shape, this run against the baseline and torch SDPA.

It reads the JSON rather than ValidationReport so that saved reports render too, including
those written before there was one status vocabulary ("passed" reads as success)."""

from __future__ import annotations

import html
import math
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.validate import modelreport


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _perf_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (shape, direction) of the kernel under test, with SDPA and baseline."""
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for e in run.get("throughput") or []:
        for d in ("fwd", "bwd"):
            if d not in e:
                continue
            row = by_key.setdefault((e["shape"], d), {"shape": e["shape"], "direction": d})
            if e.get("role", "test") == "test":
                row.update(tflops=e[d]["tflops"], ms=e[d]["ms"], spread=e[d].get("spread"),
                           pct_peak=e[d].get("pct_peak"), do_bench_ms=e[d].get("do_bench_ms"),
                           first_ms=e.get(f"first_call_{d}_ms"))
            else:
                row["sdpa_tflops"] = e[d]["tflops"]
    for b in (run.get("baseline") or {}).get("rows", []):
        if b.get("role", "test") == "test" and (b["shape"], b["direction"]) in by_key:
            by_key[(b["shape"], b["direction"])]["baseline_tflops"] = b.get("baseline_tflops")
    return [r for r in by_key.values() if "tflops" in r]


def peak_text(dev: dict[str, Any]) -> str:
    """The device's peak and its source, or why no % of peak is shown."""
    if not dev.get("peak_tflops"):
        return str(dev.get("peak_source") or "unknown device: % of peak not shown")
    est = " (estimated)" if dev.get("peak_estimated") else ""
    model = f"{dev['model']}: " if dev.get("model") else ""
    src = f"; source: {dev['peak_source']}" if dev.get("peak_source") else ""
    return f"{model}{dev['peak_tflops']:.1f} TFLOP/s dense fp16/bf16{est}{src}"


def _worst_row(c: dict[str, Any]) -> tuple[float | None, str]:
    """The worst row error / its tolerance over out, dq, dk, dv, and where ("out [b, s, h]")."""
    best: tuple[float | None, str] = (None, "-")
    for n, v in (c.get("row_errors") or {}).items():
        tol = (c.get("row_tolerance") or {}).get(n)
        if tol and (best[0] is None or v / tol > best[0]):
            best = (v / tol, f"{n} {list((c.get('worst_row') or {}).get(n, []))}")
    return best


def fix(step: str, st: dict[str, Any], data: dict[str, Any]) -> str:
    """What to do about a failed step (empty unless it failed): one line, from the report
    alone, so saved reports get it too."""
    if Status.parse(st.get("status", "skipped")) is not Status.FAILED:
        return ""
    log_file = (data.get("environment") or {}).get("log") or "the validation log"
    if step == "install":
        return (f"read pip's output in {log_file}; a requirement the index lacks: pass "
                "`validate --with REQ` or set PIP_FIND_LINKS")
    if step == "guard":
        return ("install the torch the wheel was built against in this environment, or rebuild "
                "the wheel here against this torch (`rocmbuild build RECIPE --arch ARCH`)")
    if step == "import":
        return ("read the guard row first (a wheel built for another torch fails to import); a "
                "missing module: `validate --with MODULE` or the recipe's [validate] requires")
    if step == "audit":
        return "rebuild for the missing archs: `rocmbuild build RECIPE --arch ARCH[,ARCH]`"
    if step == "upstream":
        fails = [f for fn in (st.get("detail") or {}).get("functions", [])
                 for f in fn.get("failures", [])]
        if fails:
            return ("rerun the failing case in the source tree: `python -m pytest "
                    f"'{fails[0].split(': ', 1)[0]}'` (same wheel, same venv)")
        return "read the upstream step's reason; `--upstream-tests 0` turns the step off"
    if step == "kernels":
        runs = (data.get("kernels") or {}).get("runs", [])
        slow = any(Status.parse((r.get("baseline") or {}).get("status", "skipped"))
                   is Status.FAILED for r in runs)
        wrong = any(Status.parse(c.get("status", "skipped")) is Status.FAILED
                    for r in runs for c in r.get("correctness") or [])
        out = []
        if wrong:
            out.append("wrong results: see the correctness table (the worst row's index says "
                       "where); `--kernel sdpa` on the same host rules the harness out")
        if slow:
            out.append("slower than the baseline: rerun on an idle GPU; if it stays slow, "
                       "bisect the change (an intended slowdown: pass --baseline FILE or move "
                       "<workdir>/baselines/throughput.json away)")
        return "; ".join(out) or "read the kernel gate's reason below"
    if step == "model":
        return modelreport.MODEL_FIX
    return ""


def to_markdown(data: dict[str, Any]) -> str:
    lines = [f"## rocmbuild validate: {data['status'].upper()}", ""]
    lines += ["| wheel | install | guard | import | audit | kernels | upstream |",
              "|---|---|---|---|---|---|---|"]
    fixes = []
    for w in data["wheels"]:
        st = w["steps"]
        cells = [st.get(k, {}).get("status", "-") for k in
                 ("install", "guard", "import", "audit", "kernels", "upstream")]
        lines.append(f"| {w['wheel']} | " + " | ".join(cells) + " |")
        fixes += [f"- {w['wheel']}: {k}: fix: {fx}" for k, v in st.items()
                  if (fx := fix(k, v, data))]
        up = st.get("upstream") or {}
        if up.get("reason"):
            fixes.insert(0, f"- {w['wheel']}: upstream: {up['reason']}")
        imp = st.get("import") or {}
        if imp.get("status") == "warning":  # imported, but fell back (no native library)
            fixes.insert(0, f"- {w['wheel']}: import: {imp.get('reason', '')}")
    lines += ["", *fixes] if fixes else []
    k = data["kernels"]
    lines += ["", f"Kernel gate: **{k.get('status', '-')}** {k.get('reason', '')}".rstrip()]
    for run in k.get("runs", []):
        dev = run.get("device") or {}
        lines += ["", f"### {run.get('kernel')}" + (f" (fault: {run['fault']})"
                                                    if run.get("fault") else "")
                  + f": {run.get('status')}" + (f" on {dev.get('name')}" if dev else "")]
        if dev:
            lines.append(f"Peak: {peak_text(dev)}")
        if run.get("reason"):
            lines.append(f"Reason: {run['reason']}")
        base = run.get("baseline") or {}
        if base.get("reason"):
            lines.append(f"Baseline: {base.get('status')}: {base['reason']}")
        cases = run.get("correctness") or []
        if cases:
            n_pass = sum(Status.parse(c["status"]) is Status.SUCCESS for c in cases)
            n_skip = sum(Status.parse(c["status"]) is Status.SKIPPED for c in cases)
            lines += ["", f"Correctness: {n_pass}/{len(cases)} passed, {n_skip} skipped", "",
                      "| case | status | max rel err / tol | worst row / row tol | at |",
                      "|---|---|---|---|---|"]
            for c in cases:
                worst = max(((e / c["tolerance"][n]) for n, e in c["errors"].items()),
                            default=None)
                rw, at = _worst_row(c)
                lines.append(f"| {c['case']} | {c['status']} | {_fmt(worst, '.3f')} | "
                             f"{_fmt(rw, '.3f')} | {at} |")
        rows = _perf_rows(run)
        if rows:
            lines += ["", "| shape | dir | TFLOP/s | % peak | SDPA TFLOP/s | baseline | "
                      "spread | first call ms |", "|---|---|---|---|---|---|---|---|"]
            for r in rows:
                lines.append(
                    f"| {r['shape']} | {r['direction']} | {_fmt(r['tflops'])} | "
                    f"{_fmt(r.get('pct_peak'))} | {_fmt(r.get('sdpa_tflops'))} | "
                    f"{_fmt(r.get('baseline_tflops'))} | {_fmt(r.get('spread'), '.1%')} | "
                    f"{_fmt(r.get('first_ms'), '.0f')} |")
        for f in (run.get("baseline") or {}).get("problems", []):
            lines.append(f"- baseline: {f}")
    lines += modelreport.markdown(data)
    if data.get("failures"):
        lines += ["", "Failures:"] + [f"- {f}" for f in data["failures"]]
    return "\n".join(lines) + "\n"


_COLORS = {"this run": "#1f77b4", "baseline": "#aaaaaa", "torch SDPA": "#ff7f0e"}


def chart_svg(rows: list[dict[str, Any]], width: int = 900) -> str:
    """Grouped horizontal bars: per shape and direction, this run / baseline / SDPA TFLOP/s."""
    series = [("this run", "tflops"), ("baseline", "baseline_tflops"),
              ("torch SDPA", "sdpa_tflops")]
    series = [s for s in series if any(r.get(s[1]) for r in rows)]
    if not rows or not series:
        return ""
    bar_h, gap, left, right, top = 14, 12, 300, 70, 30
    group_h = bar_h * len(series) + gap
    height = top + group_h * len(rows) + 40
    vmax = max(r.get(k) or 0 for r in rows for _, k in series) or 1.0
    scale = (width - left - right) / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="TFLOP/s by shape" font-family="sans-serif" font-size="12">']
    x = left
    for name, _ in series:  # legend
        out.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{_COLORS[name]}"/>'
                   f'<text x="{x + 16}" y="18">{html.escape(name)}</text>')
        x += 120
    for i, r in enumerate(rows):
        y0 = top + i * group_h
        label = f"{r['shape']} {r['direction']}"
        out.append(f'<text x="{left - 6}" y="{y0 + group_h / 2}" text-anchor="end">'
                   f'{html.escape(label)}</text>')
        for j, (name, key) in enumerate(series):
            v = r.get(key)
            if not v:
                continue
            y = y0 + j * bar_h
            w = max(1.0, v * scale)
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{_COLORS[name]}"><title>{html.escape(name)}: {v:.1f}</title></rect>'
                       f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 4}">{v:.0f}</text>')
    axis_y = top + group_h * len(rows)
    grid = []
    for t in ticks(vmax):  # labelled gridlines behind the bars
        gx = left + t * scale
        grid.append(f'<line class="grid" x1="{gx:.1f}" y1="{top - 4}" x2="{gx:.1f}" '
                    f'y2="{axis_y}" stroke="#ddd"/><text class="tick" x="{gx:.1f}" '
                    f'y="{axis_y + 16}" text-anchor="middle">{t:g}</text>')
    out[1:1] = grid
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}" '
               f'stroke="#333"/><text x="{width - right}" y="{axis_y + 30}" text-anchor="end">'
               f'TFLOP/s</text></svg>')
    return "".join(out)


def ticks(vmax: float) -> list[float]:
    """Gridline values 0, step, 2 step ... up to vmax, with a 1/2/5 x 10^n step (4-10 lines)."""
    if vmax <= 0:
        return [0.0]
    raw = vmax / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(vmax // step) + 1)]


_CSS = """body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;
margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
td.num{white-space:nowrap;text-align:right;font-variant-numeric:tabular-nums}
td.fix{color:#024;background:#eef5ff}
th{background:#f3f3f3}.passed,.success{color:#127a12}.failed{color:#c00;font-weight:bold}
.skipped,.warning{color:#a66b00}h1 .failed,h1 .passed,h1 .success{font-weight:bold}"""


def _status(s: str) -> str:
    return f'<span class="{html.escape(s)}">{html.escape(s)}</span>'


def to_html(data: dict[str, Any]) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>rocmbuild validate"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>rocmbuild validate: {_status(data['status'])}</h1>",
             f"<p>{e(data['created'])} &middot; rocmbuild {e(data['rocmbuild_version'])}"
             f" &middot; torch {e(str((data['environment'].get('torch') or {}).get('version')))}"
             "</p>", "<h2>Wheels</h2><table><tr><th>wheel</th><th>step</th><th>status</th>"
             "<th>details</th><th>fix</th></tr>"]
    for w in data["wheels"]:
        for name, st in w["steps"].items():
            fx = fix(name, st, data)
            parts.append(f"<tr><td>{e(w['wheel'])}</td><td>{e(name)}</td>"
                         f"<td>{_status(st['status'])}</td><td>{e(st.get('reason', ''))}</td>"
                         + (f"<td class='fix'>{e(fx)}</td>" if fx else "<td></td>") + "</tr>")
    parts.append("</table>")
    for w in data["wheels"]:
        up = (w["steps"].get("upstream") or {}).get("detail")
        if isinstance(up, dict) and up.get("functions"):
            parts.append(f"<h3>Upstream tests of {e(w['wheel'])} (seed {e(str(up.get('seed')))}"
                         f", {e(str(up.get('per_function')))} per function, cap "
                         f"{e(str(up.get('time_cap_s')))} s)</h3><table><tr><th>test function"
                         "</th><th>cases</th><th>sampled</th><th>passed</th><th>failed</th>"
                         "<th>skipped</th><th>not reached</th><th>failures (test id)</th></tr>")
            for fn in up["functions"]:
                nums = "".join(f"<td class='num'>{int(fn.get(x, 0))}</td>" for x in (
                    "cases", "sampled", "passed", "failed", "skipped", "not_reached"))
                parts.append(f"<tr><td>{e(fn['function'])}</td>{nums}<td>"
                             + "<br>".join(e(f) for f in fn.get("failures", [])) + "</td></tr>")
            parts.append("</table>")
    k = data["kernels"]
    parts.append(f"<h2>Kernel gate: {_status(k.get('status', '-'))}</h2>"
                 f"<p>{e(k.get('reason', '') or '')}</p>")
    for run in k.get("runs", []):
        dev = run.get("device") or {}
        title = f"{run.get('kernel')}" + (f" (fault: {run['fault']})" if run.get("fault") else "")
        parts.append(f"<h3>{e(title)}: {_status(run.get('status', '-'))} "
                     f"{e(dev.get('name', ''))}</h3>")
        if dev:
            parts.append(f"<p>Peak: {e(peak_text(dev))}</p>")
        if run.get("reason"):
            parts.append(f"<p>{e(run['reason'])}</p>")
        base = run.get("baseline") or {}
        if base.get("reason") or base.get("problems"):
            parts.append(f"<p>Baseline: {_status(base.get('status', '-'))} "
                         f"{e(base.get('reason', ''))}</p>")
        rows = _perf_rows(run)
        if rows:
            parts.append(chart_svg(rows))
            parts.append("<table><tr><th>shape</th><th>dir</th><th>TFLOP/s</th><th>% peak</th>"
                         "<th>SDPA TFLOP/s</th><th>baseline</th><th>spread</th>"
                         "<th>first call ms</th></tr>")
            for r in rows:
                nums = "".join(f"<td class='num'>{v}</td>" for v in (
                    _fmt(r["tflops"]), _fmt(r.get("pct_peak")), _fmt(r.get("sdpa_tflops")),
                    _fmt(r.get("baseline_tflops")), _fmt(r.get("spread"), ".1%"),
                    _fmt(r.get("first_ms"), ".0f")))
                parts.append(f"<tr><td>{e(r['shape'])}</td><td>{r['direction']}</td>{nums}</tr>")
            parts.append("</table>")
        cases = run.get("correctness") or []
        if cases:
            parts.append("<table><tr><th>correctness case</th><th>status</th>"
                         "<th>rel err (out, dq, dk, dv)</th><th>tolerance</th>"
                         "<th>worst row / row tol</th><th>worst row</th><th>reason</th></tr>")
            for c in cases:
                errs = "<br>".join(f"{n} {v:.1e}" for n, v in c["errors"].items())
                tols = "<br>".join(sorted({f"{v:.1e}" for v in c["tolerance"].values()}))
                rw, at = _worst_row(c)
                parts.append(f"<tr><td>{e(c['case'])}</td><td>{_status(c['status'])}</td>"
                             f"<td class='num'>{errs}</td><td class='num'>{tols}</td>"
                             f"<td class='num'>{_fmt(rw, '.3f')}</td><td class='num'>{e(at)}"
                             f"</td><td>{e(c['reason'])}</td></tr>")
            parts.append("</table>")
    parts += modelreport.html_parts(data, _status)
    if data.get("failures"):
        parts.append("<h2>Failures</h2><ul>" + "".join(f"<li>{e(f)}</li>"
                                                      for f in data["failures"]) + "</ul>")
        fixes = [(w["wheel"], k, fx) for w in data["wheels"] for k, v in w["steps"].items()
                 if (fx := fix(k, v, data))]
        if fixes:
            parts.append("<h2>What to do</h2><ul>" + "".join(
                f"<li class='fix'><b>{e(k)}</b> ({e(wh)}): {e(fx)}</li>" for wh, k, fx in fixes)
                + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
