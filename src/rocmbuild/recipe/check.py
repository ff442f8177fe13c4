"""The recipe checker, driven by the model's field metadata (``model.Key``).

Two passes over a parsed TOML table: ``Checker.walk`` reports unknown keys (with a typo hint) and
values of the wrong TOML type anywhere in the table; ``Checker.read`` then takes each field's value
from its key, checks it (choices, patterns, numbers > 0, placeholders, environment names) and
converts it to the field's Python shape. Every problem is collected, one line each:
``<file>: <key.path>: <what> (did you mean X?)``.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import untrusted
from rocmbuild.core.log import redact
from rocmbuild.core.pep508 import simple_requirement, simple_specifiers, split_requirement
from rocmbuild.recipe.keys import (
    KNOWN_ENV,
    PLACEHOLDERS,
    RANGED_REQUIREMENTS,
    Key,
    keys,
)


def suggest(key: str, choices: Iterable[str], cutoff: float = 0.75) -> str:
    import difflib  # only for the "did you mean" of a bad key

    close = difflib.get_close_matches(key, list(choices), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""


@dataclass(frozen=True)
class Leaf:
    owner: type
    """The model class the key belongs to."""
    name: str
    """The field it fills."""
    key: Key


Tree = dict[str, "Tree | Leaf"]


def tree(cls: type) -> Tree:
    """The TOML keys of ``cls`` as nested tables. A ``table`` key's own keys sit in its table,
    next to any other keys under the same location ([source] and [source.alternatives])."""
    root: Tree = {}
    for f, k in keys(cls):
        *parents, last = k.toml.split(".")
        node = root
        for part in parents:
            child = node.setdefault(part, {})
            assert isinstance(child, dict), k.toml
            node = child
        if k.type == "table":
            assert k.item is not None
            table = node.setdefault(last, {})
            assert isinstance(table, dict), k.toml
            table.update(tree(k.item))
        else:
            node[last] = Leaf(cls, f.name, k)
    return root


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "strings": list,
    "env": dict,
    "table": dict,
    "tables": dict,
    "array": list,
    "conditions": dict,
}
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "strings": "a list",
    "array": "a list",
}


def type_ok(type_: str, value: Any) -> bool:
    if type_ in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _PYTHON_TYPES[type_])


def type_name(type_: str) -> str:
    return _TYPE_NAMES.get(type_, "a table")


MISSING = object()
MAX_NUMBER = 1e9
"""The largest number a recipe key takes (GB, TFLOP/s, units: far above any real value, and
small enough that arithmetic on it never overflows)."""


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _control_msg(what: str, lines: bool) -> str:
    """The problem of a control character (``untrusted.controls``' ``what``) in a string."""
    allowed = "printable text, tabs and line breaks" if lines else "printable text"
    return f"{what}: a recipe holds {allowed} only (retype it without)"


def userinfo_problem(text: str) -> str | None:
    """Why the string ``text`` may not be in a recipe (None: it may): a URL anywhere in it (a
    URL key's value, a pip or cmake argument ``--index-url=https://...``, an env value, a URL
    inside a URL) holding a user name or password (``untrusted.userinfo``), a secret committed
    with the recipe. The message shows that URL alone, and never the secret."""
    shown = untrusted.userinfo(text)
    return None if shown is None else userinfo_message(shown)


def userinfo_message(shown: str) -> str:
    """The problem of the URL ``shown`` (redacted, ``untrusted.userinfo``) in a recipe."""
    return (f"{shown!r} holds a user name or password, which a committed recipe must "
            "not: put them in ~/.netrc (or the file NETRC names) as `machine <host> login "
            "<user> password <token>`, which fetch reads")


def lookup(data: dict[str, Any], loc: str) -> Any:
    """The value at dotted ``loc`` in ``data``, or MISSING."""
    node: Any = data
    for part in loc.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


class Checker:
    def __init__(self, shown: Path) -> None:
        self.path = shown
        self.problems: list[str] = []
        self.unprintable: set[str] = set()
        """Keys whose text holds a control character: their other problems are not reported
        (the text is not what was meant)."""

    def bad(self, key: str, msg: str) -> None:
        if key in self.unprintable or any(key.startswith((k + ".", k + "["))
                                          for k in self.unprintable):
            return
        self.problems.append(f"{self.path}: {key}: {msg}")

    def unprintable_text(self, key: str, msg: str) -> None:
        self.bad(key, msg)
        self.unprintable.add(key)

    # ---------------------------------------------------------------- pass 1: keys and types

    def walk(self, data: dict[str, Any], node: Tree, prefix: str) -> None:
        """Unknown keys and wrong TOML types in ``data`` against the key tree ``node``."""
        for key, value in data.items():
            full = f"{prefix}{key}"
            if self.control(key, full):
                continue
            if key not in node:
                self.bad(full, "unknown key" + suggest(key, node))
                continue
            want = node[key]
            if isinstance(want, dict):
                if not isinstance(value, dict):
                    self.bad(full, f"expected a table, got {type(value).__name__}")
                else:
                    self.walk(value, want, full + ".")
            elif not type_ok(want.key.type, value):
                self.bad(full, f"expected {type_name(want.key.type)}, got {type(value).__name__}")
            elif want.key.type in ("tables", "array"):
                # their entries are walked by their readers; here only the tables' names
                for name in value if isinstance(value, dict) else ():
                    self.control(name, f"{full}.{name}")
            else:
                for at, what in untrusted.controls(value, full, want.key.lines):
                    self.unprintable_text(at, _control_msg(what, want.key.lines))

    def control(self, key: str, at: str) -> bool:
        """Whether the key name ``key`` holds a control character (then reported)."""
        what = untrusted.control(key)
        if what:
            self.unprintable_text(at, _control_msg(f"{what} in the key's name", False))
        return what is not None

    # ---------------------------------------------------------------- pass 2: values

    def read(self, cls: type, data: dict[str, Any], prefix: str, kind: str = "") -> dict[str, Any]:
        """Checked, converted values of ``cls``'s fields from its table ``data`` (already walked),
        by field name. Absent optional keys and values with problems are left out, so the field
        default applies. Keys of another source kind than ``kind`` are not read. Nested tables
        (table, tables, array) are left to the caller."""
        out: dict[str, Any] = {}
        for f, k in keys(cls):
            if k.kind and k.kind != kind:
                continue
            loc = prefix + k.toml
            value = lookup(data, k.toml)
            if value is MISSING:
                if k.required is not None and k.pattern_msg:
                    self.bad(loc, k.pattern_msg.replace("%r", repr("")))
                elif k.required is not None:
                    self.bad(loc, "missing" + (f" ({k.required})" if k.required else ""))
                continue
            if not type_ok(k.type, value) or k.type in ("table", "tables", "array"):
                continue  # a wrong type was reported by walk; nested tables are the caller's
            ok, converted = self.value(k, value, loc)
            if ok:
                out[f.name] = converted
        return out

    def value(self, k: Key, value: Any, loc: str) -> tuple[bool, Any]:
        if k.type == "string":
            if problem := userinfo_problem(value):
                self.bad(loc, problem)
                return False, None
            if k.pattern and not re.match(k.pattern, value):
                self.bad(loc, k.pattern_msg.replace("%r", repr(redact(value))))
            self.choice(k, value, loc)
            if k.placeholders:
                self.placeholders(value, loc)
            return True, value
        if k.type == "integer":
            if k.const is not None and value != k.const:
                self.bad(loc, f"unsupported version {_shown(value)}; this rocmbuild reads "
                         f"{k.const}")
            if k.positive and value <= 0:
                self.bad(loc, f"must be > 0, got {_shown(value)}")
                return False, None
            if k.const is None and abs(value) > MAX_NUMBER:
                self.bad(loc, f"must be at most {MAX_NUMBER:.0e}, got {_shown(value)}")
                return False, None
            return True, value
        if k.type == "number":
            if isinstance(value, int) and abs(value) > MAX_NUMBER:  # float() would overflow
                self.bad(loc, f"must be at most {MAX_NUMBER:.0e}, got {_shown(value)}")
                return False, None
            if not math.isfinite(value):
                self.bad(loc, f"must be a finite number, got {value}")
                return False, None
            if abs(value) > MAX_NUMBER:
                self.bad(loc, f"must be at most {MAX_NUMBER:.0e}, got {value:g}")
                return False, None
            if k.positive and value <= 0:
                self.bad(loc, f"must be > 0, got {value}")
                return False, None
            return True, float(value)
        if k.type == "boolean":
            return True, value
        if k.type == "strings":
            items = self.without_userinfo(self.strings(value, loc), loc)
            for i, item in enumerate(items):
                self.choice(k, item, loc)
                if k.pattern and not re.match(k.pattern, item):
                    self.bad(f"{loc}[{i}]", k.pattern_msg.replace("%r", repr(redact(item))))
            if k.requirement:
                for i, item in enumerate(items):
                    self.requirement(item, f"{loc}[{i}]")
            if k.placeholders:
                for i, item in enumerate(items):
                    self.placeholders(item, f"{loc}[{i}]")
            return True, items
        if k.type == "env":
            return True, self.env(value, loc, k.placeholders)
        if k.type == "conditions":
            return True, self.conditions(k, value, loc)
        raise AssertionError(f"no reader for {k.type}")

    def choice(self, k: Key, value: str, loc: str) -> None:
        allowed = k.allowed()
        if not allowed:
            return
        base, spec = split_requirement(value) if k.versioned else (value, "")
        if base in allowed:
            if spec:
                self.version_range(base, spec, value, loc)
            return
        known = f"; known: {', '.join(allowed)}" if len(allowed) <= 8 else ""
        self.bad(loc, f"unknown {k.noun} {value!r}" + suggest(base, allowed) + known)

    def version_range(self, base: str, spec: str, value: str, loc: str) -> None:
        if base not in RANGED_REQUIREMENTS:
            self.bad(loc, f"{base!r} takes no version range, got {value!r} (ranges: "
                     f"{', '.join(RANGED_REQUIREMENTS)})")
            return
        if simple_specifiers(spec):  # valid at a glance: packaging not imported
            return
        if "===" in spec:  # arbitrary equality: a string match, which no host version makes
            self.bad(loc, f"{value!r}: '===' compares strings, not versions; write a range "
                     f"such as \"{base}>=2.13,<2.14\"")
            return
        from packaging.specifiers import InvalidSpecifier, SpecifierSet  # only when there is one

        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            self.bad(loc, f"bad version range in {value!r}: expected PEP 440 specifiers "
                     f"separated by commas, e.g. \"{base}>=6.2,<7.1\"")

    def requirement(self, text: str, key: str) -> None:
        """A PEP 508 requirement from an index: a URL or a path would bypass the pins."""
        if simple_requirement(text):  # valid at a glance: packaging not imported
            return
        from packaging.requirements import InvalidRequirement, Requirement  # when there is one

        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            self.bad(key, f"{text!r} is not a requirement ({str(exc).splitlines()[0]})")
            return
        if req.url:
            self.bad(key, f"{text!r}: a URL requirement is not pinned by the index; name a "
                     "version instead")

    def without_userinfo(self, items: tuple[str, ...], key: str) -> tuple[str, ...]:
        """``items`` less those holding a URL with a user name or password (each reported, and
        checked no further: other messages would show it)."""
        out = []
        for i, item in enumerate(items):
            if problem := userinfo_problem(item):
                self.bad(f"{key}[{i}]", problem)
            else:
                out.append(item)
        return tuple(out)

    def strings(self, value: list[Any], key: str) -> tuple[str, ...]:
        if not all(isinstance(v, str) for v in value):
            self.bad(key, "expected a list of strings")
            return ()
        return tuple(value)

    def env(self, value: dict[str, Any], key: str, placeholders: bool
            ) -> tuple[tuple[str, str], ...]:
        out = []
        for name, val in value.items():
            k = f"{key}.{name}"
            if not isinstance(val, str):
                self.bad(k, f'expected a string, got {type(val).__name__} (quote it: "{val}")')
                continue
            if name not in KNOWN_ENV:
                import difflib  # only for a bad name

                close = difflib.get_close_matches(name, KNOWN_ENV, n=1, cutoff=0.9)
                if close:
                    self.bad(k, f"unknown variable (did you mean {close[0]}?)")
                    continue
            if problem := userinfo_problem(val):  # PIP_INDEX_URL = "https://user:token@..."
                self.bad(k, problem)
                continue
            if placeholders:
                self.placeholders(val, k)
            out.append((name, val))
        return tuple(out)

    def conditions(self, k: Key, value: dict[str, Any], key: str
                   ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        out: list[tuple[str, tuple[str, ...]]] = []
        allowed = k.allowed()
        for name, val in value.items():
            loc = f"{key}.{name}"
            if name not in allowed:
                self.bad(loc, f"unknown {k.noun}" + suggest(name, allowed)
                         + f"; known: {', '.join(allowed)}")
                continue
            if isinstance(val, str):
                out.append((name, (val,)))
            elif isinstance(val, list) and not val:
                self.bad(loc, "empty list: it would match nothing (leave the key out to match "
                         "every value)")
            elif isinstance(val, list):
                out.append((name, self.strings(val, loc)))
            else:
                self.bad(loc, f"expected a string or a list of strings, got {type(val).__name__}")
        return tuple(out)

    def placeholders(self, text: str, key: str) -> None:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            self.bad(key, f"bad placeholder syntax in {text!r}: {exc} (write {{{{ for a brace)")
            return
        for f in fields:
            if f not in PLACEHOLDERS:
                self.bad(
                    key,
                    f"unknown placeholder {{{f}}}"
                    + suggest(f, PLACEHOLDERS)
                    + f"; known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                )
