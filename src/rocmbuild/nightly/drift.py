"""The nightly report's "Upstream drift" section: for each recipe line the run's cells build
(a cell's recipe and source; with release lines, that source on every line, since the build
host picks the line), the pin against what upstream has now (sources/drift.py), so a stale line
shows the night it goes stale.

``for_manifest`` asks upstream (``git ls-remote``, the config's ``pypi`` index; each query
within ``upstream-timeout``); an unreachable upstream is an ``unknown`` line, never a failed
run. ``section`` renders summary.md's lines; report.json keeps ``DriftReport.to_json()`` under
``upstream_drift``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rocmbuild.core import options
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.recipe import load, pins, search
from rocmbuild.sources import drift
from rocmbuild.sources.drift import DriftReport, Verdict
from rocmbuild.sources.upstream import Fetch

KEY = "upstream_drift"
"""report.json's key."""


def for_lines(lines: Iterable[tuple[str, str]], pypi: str, get: Fetch | None = None
              ) -> DriftReport:
    """The drift of each distinct (recipe, source), on every release line that has that source;
    a recipe that does not load is left out (its cells fail and say why)."""
    found: list[drift.LinePin] = []
    for recipe_name, source in dict.fromkeys(lines):
        try:
            recipe = load.load(search.find_recipe(recipe_name))
        except RocmbuildError:
            continue
        found += pins.pins(recipe, pins.shown_name(recipe_name),
                           only=pins.for_source(recipe, source))
    timeout = options.resolve("upstream_timeout", None, drift.DEFAULT_TIMEOUT_S)
    return drift.report(found, pypi, float(timeout), get)


def for_manifest(data: Mapping[str, Any], pypi: str, get: Fetch | None = None) -> DriftReport:
    """The drift of the lines the run's manifest's cells build."""
    lines = []
    for e in data.get("cells", ()):
        cell = e.get("cell") if isinstance(e, dict) else None
        if isinstance(cell, dict) and isinstance(cell.get("recipe"), str) \
                and isinstance(cell.get("source"), str):
            lines.append((cell["recipe"], cell["source"]))
    return for_lines(lines, pypi, get)


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")[:300]


def section(report: DriftReport | None) -> list[str]:
    """summary.md's "Upstream drift" lines (none without a report). Deterministic."""
    if report is None:
        return []
    counts = ", ".join(f"{report.count(v)} {v.value}" for v in Verdict)
    out = ["", f"Upstream drift ({counts}; index {_md(report.index)}):", ""]
    if not report.entries:
        return [*out, "No git or sdist lines."]
    out += ["| recipe | line | pinned | upstream now | verdict |", "|---|---|---|---|---|"]
    for e in report.entries:
        pinned = (e.pinned[:12] + (f" ({e.ref})" if e.ref else "") if e.kind == "git"
                  else e.pinned or "?")
        out.append(f"| {_md(e.recipe)} | {_md(e.line)} | {_md(pinned)} | {_md(e.upstream())} "
                   f"| {_md(e.status())} |")
    notes = [f"- {_md(e.recipe)} {_md(e.line)}: {_md(n)}" for e in report.entries
             for n in e.notes]
    return [*out, *(["", *notes] if notes else [])]
