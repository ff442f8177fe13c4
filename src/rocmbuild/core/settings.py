"""The one reader of settings: a file users write (nightly.toml, its ``[executor]``, stack files,
``[tool.rocmbuild]``) or a saved file rocmbuild wrote (a saved host), parsed, into typed frozen
dataclasses.

- ``read_toml(path, kind)`` is the one TOML entry point: the file read once (``fsutil``'s
  ``read_capped``: a regular file, no symlink followed, a FIFO refused, at most ``kind.limit``
  bytes), parsed (``untrusted.loads_toml``), then refused whole when a string, a key or a table's
  name holds a credential (``untrusted.credentials``: only the keys ``kind.secret_ok`` names may)
  or a control character (``untrusted.controls``). Each refusal is the kind's own error class
  and one line naming the file (and the key), with the kind's hint. A secret never reaches the
  message: the URL is shown with its user and password as ``***``.
- ``Reader`` collects every problem of one file with its dotted key (``matrix[2].archs``,
  ``executor.gpu_mem``), in the order the checks ran; ``first()`` is the error of the first one,
  ``lines()`` are all of them (a RecipeError lists each).
- ``model(cls, table, at, r)`` reads a frozen dataclass whose fields are declared with
  ``setting(...)``: the key, the check that turns the raw value into the field's type (raising
  ``Bad``), the hint. Every key of the table is read and every problem collected; a key the model
  does not declare is an unknown key. A field's documentation is its docstring, under it in the
  class, as scikit-build-core's settings model keeps them.

Nothing heavy at import (a saved host is read on the no-op memo's path): tomllib only inside
``read_toml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocmbuild.core import fsutil, untrusted
from rocmbuild.core.errors import RocmbuildError, UsageError

T = TypeVar("T")


class Bad(ValueError):
    """A check's refusal of one value: what is wrong (``is not a Slurm name``) and, when it knows
    better than the field's declaration, the hint."""

    def __init__(self, what: str, hint: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.hint = hint


@dataclass(frozen=True)
class Problem:
    key: str
    """The dotted key (``matrix[0].archs``; ``(file)`` for the file as a whole)."""
    what: str
    hint: str


def join(at: str, key: str) -> str:
    """``at.key`` (``key`` alone at the top)."""
    return f"{at}.{key}" if at else key


class Reader:
    """The problems of one file, collected: ``shown`` names the file in every line
    (``nightly.toml``, ``--host node.json``)."""

    def __init__(self, shown: str, hint: str = "") -> None:
        self.shown = shown
        self.hint = hint
        self.problems: list[Problem] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    def bad(self, key: str, what: str, hint: str | None = None) -> None:
        self.problems.append(Problem(key, what, self.hint if hint is None else hint))

    def line(self, p: Problem) -> str:
        return f"{self.shown}: {p.key}: {p.what}" if self.shown else f"{p.key}: {p.what}"

    def lines(self) -> list[str]:
        return [self.line(p) for p in self.problems]

    def fail(self, key: str, what: str, hint: str | None = None) -> UsageError:
        """The UsageError of one problem, for a caller that cannot go on past it."""
        self.bad(key, what, hint)
        return self.first()

    def first(self) -> UsageError:
        """The UsageError of the first problem (one line, as every usage error)."""
        p = self.problems[0]
        return UsageError(self.line(p), hint=p.hint)

    def stop(self) -> None:
        """Raise the first problem's UsageError when there is one."""
        if self.problems:
            raise self.first()

    def take(self, table: Mapping[str, Any], key: str, at: str, check: Callable[[Any], T],
             hint: str | None = None) -> T | None:
        """``check(table[key])`` (None: no such key, or ``check`` refused it: the problem is
        kept under ``at.key``)."""
        if key not in table:
            return None
        try:
            return check(table[key])
        except Bad as exc:
            self.bad(join(at, key), exc.what, exc.hint if exc.hint is not None else hint)
            return None

    def known(self, table: Mapping[str, Any], allowed: Iterable[str], at: str,
              what: Callable[[str], str] = lambda k: "unknown key",
              hint: str | None = None) -> None:
        """An ``unknown key`` problem for each key of ``table`` not in ``allowed``."""
        allowed = tuple(allowed)
        for k in table:
            if k not in allowed:
                self.bad(join(at, k), what(k), hint)


# --------------------------------------------------------------------------- typed models

_SETTING = "rocmbuild.setting"


@dataclass(frozen=True)
class _Declared:
    key: str | None
    check: Check
    hint: str
    required: bool | Callable[[Mapping[str, Any]], bool]
    absent: Any = None


Check = Callable[[Any, Mapping[str, Any], Path], Any]
"""A field's check: (the raw value, the whole table, where relative paths start) -> the
field's value, or ``Bad``."""


def setting(default: Any, check: Check, *, key: str | None = None, hint: str = "",
            required: bool | Callable[[Mapping[str, Any]], bool] = False,
            absent: Any = None) -> Any:
    """A dataclass field read from a table by ``model``: ``key`` (default: the field's name),
    ``check(value, table, base)`` -> the field's value or ``Bad``; ``default`` when the key is
    absent (``check`` is not called then), unless ``required`` (or ``required(table)``) makes
    its absence a ``missing`` problem, or ``absent`` (not None) is checked as if it were written
    (a default directory relative to the file, refused when a file stands in its way)."""
    return dataclasses.field(default=default,
                             metadata={_SETTING: _Declared(key, check, hint, required, absent)})


def keys(cls: type[Any]) -> tuple[str, ...]:
    """The keys a ``model`` class reads, in its fields' order."""
    out = []
    for f in dataclasses.fields(cls):
        d = f.metadata.get(_SETTING)
        if d is not None:
            out.append(d.key or f.name)
    return tuple(out)


def model(cls: type[T], table: Mapping[str, Any], at: str, r: Reader, base: Path = Path(),
          unknown: bool = True, order: tuple[str, ...] = ()) -> T:
    """``cls`` (a frozen dataclass of ``setting`` fields) from ``table`` at the dotted key
    ``at`` (``base``: where its relative paths start): each declared key checked (the keys in
    ``order`` first, in that order, then the others in the fields' order), each problem kept
    in ``r`` (a field with a problem keeps its default); with ``unknown``, keys not declared
    are problems too. The caller raises ``r``'s problems when it has read what it reads."""
    declared = {(d.key or f.name): (f.name, d) for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if (d := f.metadata.get(_SETTING)) is not None}
    values: dict[str, Any] = {}
    for key in (*order, *(k for k in declared if k not in order)):
        name, d = declared[key]
        if key in table or d.absent is not None:
            try:
                values[name] = d.check(table[key] if key in table else d.absent, table, base)
            except Bad as exc:
                r.bad(join(at, key), exc.what, d.hint if exc.hint is None else exc.hint)
        elif d.required is True or (callable(d.required) and d.required(table)):
            r.bad(join(at, key), "missing", d.hint)
    if unknown:
        r.known(table, declared, at)
    return cls(**values)


# --------------------------------------------------------------------------- the TOML entry point

@dataclass(frozen=True)
class TomlKind:
    """One kind of TOML file: how it is read and how each refusal reads."""

    what: str
    """What the file is, in the control hint: ``a stack file``."""
    limit: int
    """The most bytes read."""
    error: Callable[[list[str], str], RocmbuildError]
    """(the refusal's lines, hint) -> the kind's error: a RecipeError lists every line, a
    UsageError (``first_line``) takes the first."""
    hints: Mapping[str, str]
    """The hint of each refusal: ``large``, ``unreadable``, ``syntax``, ``depth`` and
    ``control`` (no ``control``: the caller checks control characters itself)."""
    file_key: str = ""
    """What a syntax error names as its key (nightly.toml: ``(file)``; "": none)."""
    secret: Callable[[str], str] = lambda url: f"{url!r} holds a user name or password"
    """The URL with its credentials as ``***`` -> what is said after ``file: key:``."""
    secret_hint: str = untrusted.CREDENTIALS_HINT
    """The hint of a credential's refusal."""
    secret_ok: tuple[str, ...] = ()
    """Dotted keys that may hold credentials (nightly.toml's ``publish.index``)."""
    table: str = ""
    """The dotted table the file is read for (``tool.rocmbuild``: only it is checked and
    returned, None where the file has none); "": the whole file."""
    max_depth: int | None = None
    """Tables and lists nested deeper are refused (a recipe: 16)."""
    read_error: Callable[[Path, Exception], RocmbuildError] | None = None
    """Its own refusal of a file that cannot be read (nightly's ``--config``); None: the
    kind's ``shown: larger than ...`` / ``shown: cannot read: ...``."""
    missing_ok: bool = False
    """A missing file is no refusal: ``read_bytes`` lets its FileNotFoundError through (no
    pyproject.toml is no ``[tool.rocmbuild]``)."""
    wanted: Callable[[bytes], bool] | None = None
    """Whether the bytes are to be parsed at all (a pyproject.toml that never names
    rocmbuild is not: ``table`` is then None)."""


def first_line(lines: list[str], hint: str) -> RocmbuildError:
    """A TomlKind's ``error`` for files refused with a UsageError (the first line)."""
    return UsageError(lines[0], hint=hint)


def read_bytes(path: Path, kind: TomlKind, shown: str | Path | None = None) -> bytes:
    """The bytes of ``path``, read once, or the kind's refusal naming ``shown``."""
    name = str(path if shown is None else shown)
    try:
        return fsutil.read_capped(path, kind.limit)
    except (fsutil.TooLarge, OSError) as exc:
        if kind.missing_ok and isinstance(exc, FileNotFoundError):
            raise
        if kind.read_error is not None:
            raise kind.read_error(path, exc) from None
        if isinstance(exc, fsutil.TooLarge):
            raise kind.error([f"{name}: larger than {kind.limit} bytes"],
                             kind.hints["large"]) from None
        raise kind.error([f"{name}: cannot read: {exc.strerror or exc}"],
                         kind.hints["unreadable"]) from None


def read_toml(path: Path, kind: TomlKind, raw: bytes | None = None,
              shown: str | Path | None = None) -> dict[str, Any] | None:
    """The checked TOML of ``path`` (``raw``: its bytes, already read by ``read_bytes``),
    ``kind.table`` of it when the kind names one (None: the file has no such table, or is not
    ``wanted``); every refusal names ``shown`` (default: the path)."""
    name = str(path if shown is None else shown)
    raw = read_bytes(path, kind, shown) if raw is None else raw
    if kind.wanted is not None and not kind.wanted(raw):
        return None
    try:
        data: Any = untrusted.loads_toml(raw)
    except untrusted.BadToml as exc:
        at = f"{kind.file_key}: " if kind.file_key else ""
        raise kind.error([f"{name}: {at}{exc}"], kind.hints["syntax"]) from None
    for part in kind.table.split(".") if kind.table else ():
        data = data.get(part) if isinstance(data, dict) else None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise kind.error([f"{name}: {kind.table}: expected a table"], f"[{kind.table}]")
    if kind.max_depth is not None:
        depth = _depth(data, kind.max_depth + 1)
        if depth > kind.max_depth:
            raise kind.error([f"{name}: nested {depth} levels deep (at most {kind.max_depth})"],
                             kind.hints["depth"])
    found = untrusted.credentials(data, kind.table, kind.secret_ok)
    if found:  # before any other check could echo it (a key, a table, a wrong type)
        raise kind.error([f"{name}: {key}: {kind.secret(url)}" for key, url in found],
                         kind.secret_hint)
    controls = untrusted.controls(data, kind.table) if "control" in kind.hints else []
    if controls:
        raise kind.error([f"{name}: {key}: {what}" for key, what in controls],
                         kind.hints["control"])
    return dict(data)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of tables and lists, counted up to ``limit``."""
    if limit <= 0 or not isinstance(value, dict | list):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in items), default=0)
