"""Formatting shared by the nightly's renderers (summary.md, index.html, the warnings and the
webhook): one-line text, durations, sizes, ratios, TFLOP/s, Markdown table cells, a run's count
line, and the statuses that count as a good build."""

from __future__ import annotations

import math
import re

from rocmbuild.artifacts.results import Status
from rocmbuild.nightly.model import CellOutcome, RunReport, Validation

GOOD = (Status.SUCCESS, Status.WARNING)


def one_line(text: str, limit: int = 300) -> str:
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


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def tf(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}"


def md(text: str) -> str:
    """One Markdown table cell: one line, ``|`` escaped."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|") or "-"


def count(r: RunReport) -> str:
    n = {s: sum(o.status is s for o in r.outcomes) for s in Status}
    parts = [f"{n[Status.SUCCESS] + n[Status.WARNING]} succeeded", f"{n[Status.FAILED]} failed",
             f"{n[Status.SKIPPED]} skipped"]
    waiting = sum(o.pending for o in r.outcomes)
    if waiting:
        parts.append(f"{waiting} built and pending validation")
    return ", ".join(parts)


def steps(o: CellOutcome) -> str:
    """The cell's two steps apart: ``built, validated``, ``built, pending validation``,
    ``built, validation failed``; ``-`` when unknown (skipped, the build failed, an older
    report)."""
    return {Validation.PASSED: "built, validated",
            Validation.PENDING: "built, pending validation",
            Validation.FAILED: "built, validation failed"}.get(o.validation, "-")
