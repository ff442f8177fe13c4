"""The model check and the stack step in the Markdown and HTML reports (from the report's JSON,
so saved reports render too; reports written before these steps have neither)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

MODEL_FIX = ("the wheel's attention, run by transformers in a small decoder, deviates from torch "
             "SDPA and eager by more than the allowed multiple of their own deviation: read the "
             "failing cases (size, dtype, padding, worst quantity) in the model check below; "
             "the kernel gate's rows say whether the kernel itself or the integration is wrong")


def _g(x: Any) -> str:
    return "-" if x is None else (f"{x:.2e}" if isinstance(x, float) else str(x))


def _i(x: Any) -> str:
    return "-" if x is None else str(int(x))


def _r(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}"


CASE_HEAD = ("case", "status", "logits W-SDPA", "logits W-eager", "logits SDPA-eager",
             "worst token ratio", "grads max W-SDPA", "grads max SDPA-eager", "worst ratio",
             "worst quantity")


def case_cells(c: dict[str, Any]) -> list[str]:
    lg, gr, w = c.get("logits") or {}, c.get("grads") or {}, c.get("worst") or {}
    rows = c.get("logits_rows") or {}
    name = (f"{c.get('size')} {c.get('attention')} S{_i(c.get('seq'))} {c.get('dtype')} "
            f"{'padded' if c.get('padded') else 'full'} seed {_i(c.get('seed'))}")
    return [name, str(c.get("status")), _g(lg.get("test_sdpa")), _g(lg.get("test_eager")),
            _g(lg.get("sdpa_eager")), _r(rows.get("ratio")),
            _g((gr.get("test_sdpa") or {}).get("max")),
            _g((gr.get("sdpa_eager") or {}).get("max")), _r(w.get("ratio")),
            str(w.get("quantity") or c.get("reason") or "")]


def _steps(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return data.get("model") or {}, data.get("stack") or {}


def _versions(d: dict[str, Any]) -> str:
    v = d.get("versions") or {}
    return ", ".join(f"{k} {x}" for k, x in v.items() if x)


def markdown(data: dict[str, Any]) -> list[str]:
    model, stack = _steps(data)
    lines: list[str] = []
    if model:
        det = model.get("detail") or {}
        lines += ["", f"Model check: **{model.get('status')}** {model.get('reason', '')}".rstrip()]
        if det.get("cases"):
            lines += [f"Allowed: {det.get('multiple')}x the references' deviation from each "
                      f"other; {_versions(det)}", "",
                      "| " + " | ".join(CASE_HEAD) + " |", "|" + "---|" * len(CASE_HEAD)]
            lines += ["| " + " | ".join(case_cells(c)) + " |" for c in det["cases"]]
    if stack:
        det = stack.get("detail") or {}
        lines += ["", f"Stack step: **{stack.get('status')}** {stack.get('reason', '')}".rstrip()]
        if det.get("parts"):
            lines += ["", "| part | status | reason | loss before -> after |", "|---|---|---|---|"]
            for name, p in det["parts"].items():
                loss = (f"{_r(p.get('loss_before'))} -> {_r(p.get('loss_after'))}"
                        if p.get("loss_before") is not None else "-")
                lines.append(f"| {name} | {p.get('status')} | {p.get('reason', '')} | {loss} |")
            lines += ["", f"Versions: {_versions(det)}"]
            lines += [f"- {m} loaded: {', '.join(x.rsplit('/', 1)[-1] for x in libs) or 'none'}"
                      for m, libs in (det.get("loaded") or {}).items()]
            if det.get("runtime"):
                lines.append("- GPU runtime: " + ", ".join(det["runtime"]))
    return lines


def html_parts(data: dict[str, Any], status: Callable[[str], str]) -> list[str]:
    e = html.escape
    model, stack = _steps(data)
    parts: list[str] = []
    if model:
        det = model.get("detail") or {}
        parts.append(f"<h2>Model check: {status(model.get('status', '-'))}</h2>"
                     f"<p>{e(model.get('reason', '') or '')}</p>")
        if det.get("cases"):
            parts.append(f"<p>Allowed: {e(str(det.get('multiple')))}x the references' "
                         f"deviation from each other; {e(_versions(det))}</p>")
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in CASE_HEAD)
                         + "</tr>")
            for c in det["cases"]:
                cells = case_cells(c)
                parts.append(f"<tr><td>{e(cells[0])}</td><td>{status(cells[1])}</td>"
                             + "".join(f"<td class='num'>{e(x)}</td>" for x in cells[2:9])
                             + f"<td>{e(cells[9])}</td></tr>")
            parts.append("</table>")
    if stack:
        det = stack.get("detail") or {}
        parts.append(f"<h2>Stack step: {status(stack.get('status', '-'))}</h2>"
                     f"<p>{e(stack.get('reason', '') or '')}</p>")
        if det.get("parts"):
            parts.append("<table><tr><th>part</th><th>status</th><th>reason</th>"
                         "<th>loss before</th><th>loss after</th></tr>")
            for name, p in det["parts"].items():
                parts.append(f"<tr><td>{e(name)}</td><td>{status(p.get('status', '-'))}</td>"
                             f"<td>{e(p.get('reason', '') or '')}</td><td class='num'>"
                             f"{_r(p.get('loss_before'))}</td><td class='num'>"
                             f"{_r(p.get('loss_after'))}</td></tr>")
            parts.append("</table>")
            parts.append(f"<p>Versions: {e(_versions(det))}</p><ul>" + "".join(
                f"<li>{e(m)} loaded: {e(', '.join(libs) or 'none')}</li>"
                for m, libs in (det.get("loaded") or {}).items()) + "</ul>")
    return parts
