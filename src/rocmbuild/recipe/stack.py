"""Stack files (``stacks/<name>.toml``, docs/stacks.md): a set of recipes built against one torch,
validated together, published in one transaction and locked per arch view.

::

    schema_version = 1
    description = "fine-tuning: torch + flash-attn + bitsandbytes + deepspeed"
    [torch]
    from = "host"                  # the torch rocmbuild runs with (or "recipe": see below)
    requires = ">=2.9,<2.14"       # optional: the torch versions the stack accepts
    [[members]]
    recipe = "flash-attn"          # a recipe name, or a path ending in .toml (relative to here)
    variant = "triton"             # optional, as --variant; also release, source, options

``[torch] from = "recipe"`` names a recipe (``recipe = "pytorch"``, with the member keys) whose
wheel is built, validated, published and locked with the set; the members are then built against
the torch this rocmbuild runs with, which must be that release (the mix check says so).

This is the one reader of stack files: the file is read once (a regular file, no symlink, at
most MAX_BYTES), each problem is one line naming the file and key (``finetune.toml:
members[0].variant: ...``: members are numbered from 0, as every TOML array in rocmbuild's
messages), all at once, as a RecipeError (exit 3); a stack name that names no file is a
UsageError (exit 2). Each member's recipe is loaded here, so a variant, release, source
or option it does not have is the stack file's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import config, fsutil, settings
from rocmbuild.core.errors import RecipeError, RocmbuildError, UsageError
from rocmbuild.recipe import load, search
from rocmbuild.recipe.check import suggest
from rocmbuild.recipe.model import Recipe

SCHEMA_VERSION = 1
MAX_BYTES = 256 << 10
MAX_MEMBERS = 32
TORCH_FROM = ("host", "recipe")
_TOP = ("schema_version", "description", "torch", "members")
_MEMBER = ("recipe", "variant", "release", "source", "options")
_TORCH = ("from", "requires", *_MEMBER)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VALUE = re.compile(r"^[A-Za-z0-9._+-]{1,64}$")
_SPEC = re.compile(r"^\s*(?:(?:===|==|!=|<=|>=|~=|<|>)\s*[0-9][0-9A-Za-z.*+!-]*\s*(?:,|$))+\s*$")


@dataclass(frozen=True)
class Member:
    """One recipe of a stack and what selects its build (as build's flags would)."""

    recipe: Recipe
    key: str
    """Where it is in the stack file: ``members[0]`` (the first) or ``torch``, for messages."""
    variant: str | None = None
    release: str | None = None
    source: str = "default"
    options: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return self.recipe.path.stem


@dataclass(frozen=True)
class Stack:
    path: Path
    name: str
    description: str
    torch_from: str
    """``host`` or ``recipe`` (TORCH_FROM)."""
    torch_requires: str
    """A PEP 440 specifier set the stack's torch must satisfy ("" : any)."""
    torch: Member | None
    """The torch recipe, with ``torch_from == "recipe"``."""
    members: tuple[Member, ...]

    @property
    def all_members(self) -> tuple[Member, ...]:
        """The torch recipe (when there is one) first, then the members, in file order."""
        return ((self.torch,) if self.torch is not None else ()) + self.members


def find(name: str) -> Path:
    """A stack by path (``.toml`` or with a ``/``) or by name in the shipped ``stacks/``."""
    if problem := fsutil.name_problem(name):
        raise UsageError(f"stack {name[:60]!r}{'...' if len(name) > 60 else ''}: {problem}",
                         hint="give a stack's name or the path of its .toml file")
    p = Path(name)
    if p.suffix == ".toml" or "/" in name:
        if not p.exists():
            raise UsageError(f"stack file {name} not found", hint="check the path")
        return p
    cand = config.DATA_ROOT / "stacks" / f"{name}.toml"
    if cand.is_file():
        return cand
    names = available()
    raise UsageError(f"unknown stack {name!r}" + suggest(name, names),
                     hint="stacks: " + (", ".join(names) or "none")
                     + "; or give the path of a stack file")


def available() -> list[str]:
    d = config.DATA_ROOT / "stacks"
    return [p.stem for p in sorted(d.glob("*.toml"))] if d.is_dir() else []


class _Reader(settings.Reader):
    """The stack file's problems, all collected (``settings.Reader``); a RecipeError lists
    them."""

    def known(self, table: Mapping[str, Any], allowed: Iterable[str], at: str,
              what: Callable[[str], str] | None = None, hint: str | None = None) -> None:
        allowed = tuple(allowed)
        super().known(table, allowed, at.rstrip("."),
                      what or (lambda k: "unknown key" + suggest(k, allowed)), hint)

    def text(self, data: dict[str, Any], key: str, where: str, pattern: re.Pattern[str] = _NAME
             ) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.bad(f"{where}{key}", f"expected a string, got {type(value).__name__}")
        elif not pattern.match(value):
            self.bad(f"{where}{key}", f"{value[:80]!r} is not a valid value")
        else:
            return value
        return None


TOML = settings.TomlKind(
    "a stack file", MAX_BYTES, lambda lines, hint: RecipeError(lines, hint=hint),
    {"large": "a stack file names a few recipes",
     "unreadable": "give a regular file (not a symlink, FIFO or directory)",
     "syntax": "save the stack file as UTF-8 TOML; see stacks/finetune.toml",
     "control": "a stack file holds printable text only: retype the keys or values named "
                "without it"},
    secret=lambda url: f"{url!r} holds a user name or password, which a stack file must not")
"""How a stack file is read (``settings.read_toml``)."""


def load_stack(path: Path) -> Stack:
    """Read and check the stack file ``path`` and the recipes it names (the module's
    docstring)."""
    data = settings.read_toml(path, TOML, shown=path.name) or {}
    r = _Reader(path.name)
    if not _NAME.match(path.stem):
        r.bad("(file name)", f"{path.stem[:80]!r} is not a stack name (letters, digits, '.', "
              "'_', '-'; it names the lock files' directory)")
    r.known(data, _TOP, "")
    version = data.get("schema_version")
    if version is None:
        r.bad("schema_version", f"missing (write schema_version = {SCHEMA_VERSION})")
    elif isinstance(version, bool) or version != SCHEMA_VERSION:
        r.bad("schema_version", f"unsupported version {version!r}; this rocmbuild reads "
              f"{SCHEMA_VERSION}")
    description = data.get("description", "")
    if not isinstance(description, str) or len(description) > 500:
        r.bad("description", "expected a string of at most 500 characters")
        description = ""
    torch_from, requires, torch = _torch(r, data.get("torch", {"from": "host"}), path)
    raw = data.get("members")
    members: list[Member] = []
    if raw is None:
        r.bad("members", "missing (write [[members]] tables, each with recipe = \"<name>\")")
    elif not isinstance(raw, list) or not raw:
        r.bad("members", "expected a non-empty list of tables ([[members]])")
    elif len(raw) > MAX_MEMBERS:
        r.bad("members", f"{len(raw)} members (at most {MAX_MEMBERS})")
    else:
        for i, item in enumerate(raw):
            m = _member(r, item, f"members[{i}]", path)
            if m is not None:
                members.append(m)
    seen: dict[str, str] = {torch.name: "torch"} if torch else {}
    projects: dict[str, Member] = {project(torch.recipe): torch} if torch else {}
    for m in members:
        if m.name in seen:
            r.bad(f"{m.key}.recipe", f"{m.name!r} is already {seen[m.name]}: a stack builds "
                  "each recipe once")
            continue
        seen.setdefault(m.name, m.key)
        other = projects.setdefault(project(m.recipe), m)
        if other is not m:  # two wheels of one project: no lock installs both
            r.bad(f"{m.key}.recipe", f"{m.name!r} builds {m.recipe.name!r}, which "
                  f"{other.key} ({other.name}) builds too: a stack installs one wheel of "
                  "each project")
    if r.problems:
        raise RecipeError(r.lines(), hint="fix the keys above; docs/stacks.md describes the "
                          "file, `rocmbuild stack plan <stack> --arch gfx942` checks it")
    return Stack(path, path.stem, description, torch_from, requires, torch, tuple(members))


TORCH_PROJECTS = ("torch", "rocm-torch")
"""What a ``[torch] from = "recipe"`` recipe must build (``plan.model.TORCH_NAMES``)."""


def project(recipe: Recipe) -> str:
    """The project (PEP 503 normalized name) a recipe's wheel is of."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(recipe.name))


def _torch(r: _Reader, data: Any, path: Path) -> tuple[str, str, Member | None]:
    if not isinstance(data, dict):
        r.bad("torch", f"expected a table, got {type(data).__name__}")
        return "host", "", None
    r.known(data, _TORCH, "torch.")
    how = data.get("from", "host")
    if how not in TORCH_FROM:
        r.bad("torch.from", f"{str(how)[:40]!r} is not one of {', '.join(TORCH_FROM)}")
        how = "host"
    requires = data.get("requires", "")
    if not isinstance(requires, str) or (requires and not _specifiers(requires)):
        r.bad("torch.requires", f"{str(requires)[:80]!r} is not a version range like "
              "\">=2.9,<2.14\"")
        requires = ""
    member_keys = [k for k in _MEMBER if k in data]
    if how == "host":
        for k in member_keys:
            r.bad(f"torch.{k}", "only with from = \"recipe\" (the host's torch is not built)")
        return how, requires, None
    if "recipe" not in data:
        r.bad("torch.recipe", "missing (from = \"recipe\" names the torch recipe, e.g. "
              "\"pytorch\")")
        return how, requires, None
    torch = _member(r, {k: data[k] for k in member_keys}, "torch", path, prefix="torch.")
    if torch is not None and project(torch.recipe) not in TORCH_PROJECTS:
        r.bad("torch.recipe", f"{torch.name!r} builds {torch.recipe.name!r}, not torch: the "
              "stack's torch must be a torch recipe (e.g. \"pytorch\")")
        return how, requires, None
    return how, requires, torch


def _specifiers(text: str) -> bool:
    """Whether ``text`` is a PEP 440 specifier set (``>=2.9,<2.14``)."""
    if len(text) > 200 or not _SPEC.match(text):
        return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # only when there is one

    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return False
    return True


def _member(r: _Reader, item: Any, key: str, path: Path, prefix: str = "") -> Member | None:
    where = prefix or f"{key}."
    if not isinstance(item, dict):
        r.bad(key, f"expected a table, got {type(item).__name__}")
        return None
    r.known(item, _MEMBER, where)
    name = item.get("recipe")
    if name is None:
        r.bad(f"{where}recipe", "missing (a recipe name, or a path ending in .toml)")
        return None
    if not isinstance(name, str) or not name or len(name) > 300:
        r.bad(f"{where}recipe", "expected a recipe name or a path ending in .toml")
        return None
    recipe = _recipe(r, name, f"{where}recipe", path)
    variant = r.text(item, "variant", where)
    release = r.text(item, "release", where)
    source = r.text(item, "source", where) or "default"
    options = _options(r, item.get("options"), f"{where}options")
    if recipe is None:
        return None
    if variant is not None and variant not in recipe.variants:
        r.bad(f"{where}variant", f"{recipe.path.stem} has no variant {variant!r}"
              + suggest(variant, recipe.variants) + "; variants: "
              + (", ".join(recipe.variants) or "none"))
    if release is not None and release not in recipe.releases:
        r.bad(f"{where}release", f"{recipe.path.stem} has no release line {release!r}; lines: "
              + (", ".join(recipe.releases) or "none"))
    if source != "default" and source not in recipe.alternatives:
        r.bad(f"{where}source", f"{recipe.path.stem} has no source {source!r}; sources: "
              + ", ".join(["default", *recipe.alternatives]))
    for opt, _ in options:
        if opt not in recipe.options:
            r.bad(f"{where}options.{opt}", f"{recipe.path.stem} has no option {opt!r}"
                  + suggest(opt, recipe.options) + "; options: "
                  + (", ".join(recipe.options) or "none"))
    return Member(recipe, key.rstrip("."), variant, release, source, options)


def _recipe(r: _Reader, name: str, key: str, path: Path) -> Recipe | None:
    target = str(path.absolute().parent / name) if name.endswith(".toml") else name
    if problem := fsutil.name_problem(target):
        r.bad(key, f"{name[:60]!r}{'...' if len(name) > 60 else ''}: {problem}")
        return None
    if not name.endswith(".toml") and not _NAME.match(name):
        r.bad(key, f"{name[:80]!r} is not a recipe name (or a path ending in .toml)")
        return None
    try:
        found = search.find_recipe(target)
        if found.is_symlink() or not found.is_file():
            r.bad(key, f"{name}: not a regular file")
            return None
        return load.load(found)
    except RecipeError as exc:
        first = exc.problems[0] if exc.problems else exc.message
        more = f" (+{len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        r.bad(key, f"recipe {name!r} is invalid: {first}{more}")
    except RocmbuildError as exc:
        r.bad(key, exc.message)
    return None


def _options(r: _Reader, value: Any, key: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        r.bad(key, f"expected a table of name = value, got {type(value).__name__}")
        return ()
    out = []
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, str | int):
            r.bad(f"{key}.{name}", f"expected a string or an integer, got {type(v).__name__}")
        elif not _VALUE.match(str(v)):
            r.bad(f"{key}.{name}", f"{str(v)[:40]!r} is not a valid value")
        else:
            out.append((name, str(v)))
    return tuple(out)
