"""Requirement strings and version ranges that are valid at a glance.

Loading a recipe checks its requirement strings (PEP 508) and version ranges (PEP 440) with
``packaging``, whose import (``packaging.specifiers`` pulls in ``packaging.tags``, ``logging``
and more) costs a cache hit about a tenth of a second. The common forms (``ninja``,
``setuptools>=70.1,<80``, ``rocm-sdk>=6.2,<7.1``) are recognised here by a strict pattern that
accepts only strings ``packaging`` accepts as well (tests/unit/core/test_pep508.py checks that);
anything else, valid or not, goes to ``packaging`` as before: the same answers and messages.
``simple_contains`` does the same for ``plan.requirements.preflight``'s check of a host's
versions against a recipe's ranges; ``major_minor`` is the one reading of a version's ``X.Y``."""

from __future__ import annotations

import re

# A release number (1, 6.2, 70.1.0): no epoch, pre, post, dev or local part, no wildcard
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
# One specifier; ~= needs at least two release components (~=1 is invalid)
_SPEC = rf"(?:(?:==|!=|<=|>=|<|>){_RELEASE}|~=[0-9]+(?:\.[0-9]+)+)"
_SPECS = rf"{_SPEC}(?:,{_SPEC})*"
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"

_SIMPLE_SPECS = re.compile(_SPECS)
_SIMPLE_REQUIREMENT = re.compile(rf"{_NAME}(?:{_SPECS})?")


def split_requirement(text: str) -> tuple[str, str]:
    """``"rocm-sdk>=6.2,<7.1"`` -> ``("rocm-sdk", ">=6.2,<7.1")``; no range: ``(text, "")``."""
    for i, ch in enumerate(text):
        if ch in "<>=!~":
            return text[:i].strip(), text[i:].strip()
    return text.strip(), ""


def simple_specifiers(spec: str) -> bool:
    """True when ``spec`` is a comma-separated list of plain release specifiers, no spaces
    (``>=6.2,<7.1``): a valid PEP 440 specifier set. False says nothing: ask packaging."""
    return _SIMPLE_SPECS.fullmatch(spec) is not None


def simple_requirement(text: str) -> bool:
    """True when ``text`` is a bare project name with optional plain release specifiers, no
    spaces, extras, markers or URL (``setuptools>=70.1,<80``): a valid PEP 508 requirement from
    an index. False says nothing: ask packaging."""
    return _SIMPLE_REQUIREMENT.fullmatch(text) is not None


_VERSION = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:\+[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?")
_ONE_SPEC = re.compile(rf"(==|!=|<=|>=|<|>|~=)({_RELEASE})")
_LEADING_ZERO = re.compile(r"(?:^|[^0-9])0[0-9]")  # 06.2: left to packaging's normalisation


def _release(text: str) -> tuple[int, ...]:
    """``6.2.0`` -> ``(6, 2)``: trailing zeros do not count (6.2 == 6.2.0 in PEP 440)."""
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def simple_contains(version: str, spec: str) -> bool | None:
    """Whether the plain release ``version`` (a local label such as ``+rocm6.2`` ignored) is
    inside the plain range ``spec``, as ``SpecifierSet(spec).contains(Version(version).public,
    prereleases=True)`` answers; None when either is not plain: ask packaging."""
    m = _VERSION.fullmatch(version)
    if m is None or not simple_specifiers(spec) or _LEADING_ZERO.search(m.group(1) + "," + spec):
        return None
    v = _release(m.group(1))
    for item in spec.split(","):
        op, text = _ONE_SPEC.fullmatch(item).groups()  # type: ignore[union-attr]
        s = _release(text)
        if op == "~=":  # >= s, and the same release up to the last component given
            n = len(text.split(".")) - 1
            ok = v >= s and (v + (0,) * n)[:n] == (s + (0,) * n)[:n]
        else:
            ok = {"==": v == s, "!=": v != s, "<=": v <= s, ">=": v >= s, "<": v < s,
                  ">": v > s}[op]
        if not ok:
            return False
    return True


def major_minor(version: str) -> str:
    """ "6.2.41133-dd7f95766" -> "6.2", "2.9.1+rocm6.4" -> "2.9"; "" when it does not start with
    one."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else ""
