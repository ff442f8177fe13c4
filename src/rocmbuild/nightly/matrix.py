"""One ``[[matrix]]`` table of nightly.toml, read by ``settings.model``: each key is declared once
here, with its check and hint, and documented on its field. ``config`` expands an entry into
cells (recipe x variant x source x arch set, and a stack's members)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import quantity, settings

DEFAULT_TIMEOUT_S = 6 * 3600
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ARCHS = re.compile(r"gfx[0-9a-z]+(:[a-z+-]+)*(,gfx[0-9a-z]+(:[a-z+-]+)*)*")


def _strings(key: str, default: str = "...") -> settings.Check:
    """A non-empty list of distinct non-blank strings (one string: a list of it)."""
    def check(v: Any, table: Mapping[str, Any], base: Path) -> tuple[str, ...]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not v or not all(isinstance(s, str) and s.strip()
                                                        for s in v):
            raise settings.Bad(f"expected a non-empty list of strings, got {v!r}",
                               f'e.g. {key} = ["{default}"]')
        if len(set(v)) != len(v):
            raise settings.Bad(f"lists a value twice: {v!r}", "list each value once")
        return tuple(v)
    return check


def _archs(v: Any, table: Mapping[str, Any], base: Path) -> tuple[str, ...]:
    archs: tuple[str, ...] = _strings("archs")(v, table, base)
    for a in archs:
        if not _ARCHS.fullmatch(a):
            raise settings.Bad(f"{a!r} is not a gfx target list",
                               'one string per cell, e.g. archs = ["gfx942", "gfx90a,gfx942"] '
                               '(no "native": a nightly must say what it builds)')
    sets: dict[frozenset[str], str] = {}
    for a in archs:
        spelled = sets.setdefault(frozenset(a.split(",")), a)
        if spelled != a:
            raise settings.Bad(f"{spelled!r} and {a!r} are the same targets",
                               "list each set of targets once (the order within one does not "
                               "make another build)")
    return archs


def _follow(v: Any, table: Mapping[str, Any], base: Path) -> bool:
    if not isinstance(v, bool):
        raise settings.Bad(f"expected true or false, got {v!r}")
    return v


def _timeout(v: Any, table: Mapping[str, Any], base: Path) -> int:
    try:
        return math.ceil(quantity.duration(v))
    except quantity.BadQuantity as exc:
        raise settings.Bad(str(exc)) from None


def _options(v: Any, table: Mapping[str, Any], base: Path) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict) or not all(
            isinstance(k, str) and _NAME.fullmatch(k) and isinstance(x, str | int | bool)
            for k, x in v.items()):
        raise settings.Bad("expected a table of name = value")
    return tuple(sorted((k, str(x).lower() if isinstance(x, bool) else str(x))
                        for k, x in v.items()))


@dataclass(frozen=True)
class Entry:
    """One ``[[matrix]]`` table (docs/nightly.md)."""

    recipes: tuple[str, ...] = settings.setting(
        (), _strings("recipes"), hint='e.g. recipes = ["..."]',
        required=lambda table: not table.get("stacks"))
    """Recipe names (``rocmbuild recipes``) or paths ending in .toml; required unless the entry
    names stacks."""
    variants: tuple[str, ...] = settings.setting(("default",), _strings("variants", "default"))
    """Variants to build; ``default`` is the recipe's default variant."""
    sources: tuple[str, ...] = settings.setting(("default",), _strings("sources", "default"))
    """``default`` (the recipe's ``[source]``) or source alternatives the recipe names."""
    archs: tuple[str, ...] = settings.setting((), _archs, hint='e.g. archs = ["..."]',
                                              required=True)
    """One string per cell: ``gfx942``, ``gfx90a,gfx942`` (never ``native``)."""
    follow: bool = settings.setting(False, _follow, hint="follow = true builds what upstream "
                                    "has now; false the recipe's pin")
    """Build what upstream has now (PyPI's newest sdist, the git ref's head), not the pin."""
    timeout_s: int = settings.setting(DEFAULT_TIMEOUT_S, _timeout, key="timeout",
                                      hint='e.g. timeout = "2h" (s, m, h, d; a bare number is '
                                      "seconds; at most a year)")
    """Each cell's time limit (default 6h); below ``executor.time`` on Slurm."""
    options: tuple[tuple[str, str], ...] = settings.setting(
        (), _options, hint='e.g. options = { dropout = "off" }')
    """Recipe options, ``name = value``, kept in the manifest."""
    stacks: tuple[str, ...] = settings.setting((), _strings("stacks"))
    """Stack names or .toml paths: one cell per member and arch set, promoted together."""


KEYS = settings.keys(Entry)
"""The keys of a ``[[matrix]]`` table."""
CHECKED = ("stacks",)
"""Checked first (whether ``recipes`` is required depends on it); then the fields' order."""
