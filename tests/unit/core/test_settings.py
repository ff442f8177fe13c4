"""core/settings: the one typed reader of settings (``Reader``, ``model``) and the one TOML entry
point (``read_toml``), on real files in a temporary directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.core import settings
from rocmbuild.core.errors import RecipeError, UsageError


def _count(v: Any, table: Any, base: Path) -> int:
    if type(v) is not int or v < 1:
        raise settings.Bad(f"{v!r} is not a count")
    return v


def _here(v: Any, table: Any, base: Path) -> Path:
    if not isinstance(v, str):
        raise settings.Bad("must be a path", "a directory")
    return base / v


@dataclass(frozen=True)
class _Model:
    jobs: int = settings.setting(1, _count, hint="e.g. jobs = 8")
    """Parallel jobs."""
    where: Path | None = settings.setting(None, _here, key="dir", hint="a path")
    """A directory."""


def test_model_reads_declared_keys_and_collects_every_problem(tmp_path: Path) -> None:
    r = settings.Reader("x.toml")
    m = settings.model(_Model, {"jobs": 4, "dir": "d"}, "tool", r, tmp_path)
    assert r.ok and m == _Model(4, tmp_path / "d")
    assert settings.keys(_Model) == ("jobs", "dir")
    r = settings.Reader("x.toml", hint="see the docs")
    m = settings.model(_Model, {"jobs": 0, "dir": 3, "colour": "red"}, "tool", r, tmp_path)
    assert m == _Model()  # a field with a problem keeps its default
    assert r.lines() == ["x.toml: tool.jobs: 0 is not a count",
                         "x.toml: tool.dir: must be a path",
                         "x.toml: tool.colour: unknown key"]
    assert [p.hint for p in r.problems] == ["e.g. jobs = 8", "a directory", "see the docs"]
    with pytest.raises(UsageError) as exc:
        r.stop()
    assert exc.value.message == "x.toml: tool.jobs: 0 is not a count"
    assert exc.value.hint == "e.g. jobs = 8"


@dataclass(frozen=True)
class _Out:
    out: Path | None = settings.setting(None, _here, hint="a path", absent="out")
    """Where it goes: ``out`` beside the file unless written."""


def test_an_absent_default_is_checked_as_written(tmp_path: Path) -> None:
    r = settings.Reader("x.toml")
    assert settings.model(_Out, {}, "tool", r, tmp_path) == _Out(tmp_path / "out")
    assert settings.model(_Out, {"out": "o"}, "tool", r, tmp_path) == _Out(tmp_path / "o")
    assert r.ok
    settings.model(_Out, {"out": 3}, "tool", r, tmp_path)
    assert r.lines() == ["x.toml: tool.out: must be a path"]


def test_model_checks_in_the_order_given() -> None:
    r = settings.Reader("")
    settings.model(_Model, {"jobs": "x", "dir": 1}, "", r, order=("dir",))
    assert r.lines() == ["dir: must be a path", "jobs: 'x' is not a count"]


_KIND = settings.TomlKind(
    "a test file", 64, lambda lines, hint: RecipeError(lines, hint=hint),
    {"large": "smaller", "unreadable": "a file", "syntax": "fix it", "depth": "flatter",
     "control": "printable"}, max_depth=3)


def _file(tmp_path: Path, text: str | bytes) -> Path:
    p = tmp_path / "f.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(("text", "line", "hint"), [
    ("a = [", "f.toml: invalid TOML", "fix it"),
    (b"a = '\xff'", "f.toml: not UTF-8 text", "fix it"),
    ("a = [[[[1]]]]", "f.toml: nested 4 levels deep (at most 3)", "flatter"),
    ("a = 'https://u:tok@h/x'", "f.toml: a: 'https://***@h/x' holds a user name or password",
     "~/.netrc"),
    ('a = "\\u001b[31m"', "f.toml: a: control character U+001B", "printable"),
    ("a = '" + "x" * 80 + "'", "f.toml: larger than 64 bytes", "smaller"),
])
def test_read_toml_refusals(tmp_path: Path, text: str | bytes, line: str, hint: str) -> None:
    with pytest.raises(RecipeError) as exc:
        settings.read_toml(_file(tmp_path, text), _KIND, shown="f.toml")
    assert exc.value.problems[0].startswith(line) and hint in (exc.value.hint or "")
    assert "tok" not in str(exc.value)


def test_read_toml_refuses_a_symlink_and_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "link.toml").symlink_to(_file(tmp_path, "a = 1"))
    os.mkfifo(tmp_path / "pipe.toml")
    for name in ("link.toml", "pipe.toml"):
        with pytest.raises(RecipeError, match=f"{name}: cannot read"):
            settings.read_toml(tmp_path / name, _KIND)


def test_read_toml_table_and_wanted(tmp_path: Path) -> None:
    kind = settings.TomlKind("x", 1 << 10, settings.first_line,
                             {"large": "", "unreadable": "", "syntax": ""},
                             table="tool.me", wanted=lambda raw: b"me" in raw, missing_ok=True)
    assert settings.read_toml(_file(tmp_path, "[tool.me]\na = 1\n"), kind) == {"a": 1}
    assert settings.read_toml(_file(tmp_path, "[tool.other]\nme = 1\n"), kind) is None
    assert settings.read_toml(_file(tmp_path, "[tool]\nx = 'no'\n"), kind) is None
    with pytest.raises(UsageError, match=r"tool\.me: expected a table"):
        settings.read_toml(_file(tmp_path, "tool = { me = 1 }\n"), kind)
    with pytest.raises(FileNotFoundError):
        settings.read_toml(tmp_path / "absent.toml", kind)


@dataclass(frozen=True)
class _Needs:
    name: str = settings.setting("", lambda v, t, b: str(v), hint='e.g. name = "x"',
                                 required=lambda table: "alias" not in table)
    """Required unless an alias is given."""
    size: int = settings.setting(0, _count, required=True, hint="e.g. size = 2")
    """Always required."""


def test_model_required_keys() -> None:
    r = settings.Reader("f.toml")
    settings.model(_Needs, {"alias": 1}, "t", r, unknown=False)
    assert r.lines() == ["f.toml: t.size: missing"] and r.problems[0].hint == "e.g. size = 2"
    r = settings.Reader("f.toml")
    settings.model(_Needs, {}, "t", r, unknown=False)
    assert r.lines() == ["f.toml: t.name: missing", "f.toml: t.size: missing"]
