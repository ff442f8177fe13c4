"""Load recipes/*.toml into frozen dataclasses, reporting every problem at once.

Each problem is one line: ``<file>: <key.path>: <what> (did you mean X?)``. The keys, their types
and defaults come from the model's field metadata (``recipe.model``) through ``recipe.check``;
this module reads the file and adds the rules that relate keys to each other or to files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, settings, untrusted
from rocmbuild.core.errors import RecipeError
from rocmbuild.core.pep508 import simple_requirement
from rocmbuild.recipe import depends, readers
from rocmbuild.recipe.check import MISSING, Checker, lookup, suggest, tree, userinfo_message
from rocmbuild.recipe.keys import key_of
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.releases import Release
from rocmbuild.recipe.tables import (
    Floor,
    Hipify,
    Patch,
    Source,
    Variant,
)

MAX_BYTES = 4 << 20
"""The largest recipe file read (flash-attn's, the largest shipped, is about 20 KiB)."""


def files_read(recipe: Recipe, *, depends_on_others: bool) -> tuple[Path, ...] | None:
    """The files loading ``recipe`` for a plan read: the recipe and its patches; None when it
    has a local source (a path, or a git repository on this machine), whose content only the
    full render and the fetch stage look at (``rocmbuild.commands.noop_memo`` then keeps no
    memo), or when the plan depends on other recipes (``depends_on_others``: their files are
    not tracked by the memo)."""
    if depends_on_others:
        return None
    lines = recipe.releases.values()
    for src in (recipe.source, *recipe.alternatives.values(), *(
            s for line in lines for s in (line.source, *(line.alternatives or {}).values())
            if s is not None)):
        if src.kind == "path" or (src.kind == "git" and src.url.startswith("/")):
            return None
    return (recipe.path.absolute(), *(p.file for p in recipe.patches))


def _display(path: Path) -> Path:
    if path.is_symlink():  # refused by the read: named as given, not by its target
        return fsutil.shown(path.absolute())
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def load(path: Path, within: tuple[Path, ...] = ()) -> Recipe:
    """Parse and check a recipe (and the recipes it depends on: ``within`` are those on the
    way to it). Raises RecipeError listing every problem."""
    shown = _display(path)
    raw, data = _read(path, shown)
    c = Checker(shown)
    c.walk(data, tree(Recipe), "")
    fields = c.read(Recipe, data, "")
    source_at = key_of(Recipe, "source").toml
    raw_source = lookup(data, source_at)
    source = (readers.source(c, raw_source, source_at, path, walked=True)
              if isinstance(raw_source, dict) else None)
    alts = key_of(Recipe, "alternatives")
    alternatives = readers.tables(c, data, alts, lambda v, key: readers.source(c, v, key, path))
    if lookup(data, f"{alts.toml}.default") is not MISSING:
        c.bad(f"{alts.toml}.default", "'default' is reserved for [source]")
    variants = readers.tables(c, data, key_of(Recipe, "variants"),
                              lambda v, key: _variant(c, v, key))
    floors = readers.tables(c, data, key_of(Recipe, "validate_floor"),
                            lambda v, key: _floor(c, v, key))
    opts = readers.tables(c, data, key_of(Recipe, "options"),
                          lambda v, key: readers.option(c, v, key))
    readers.option_checks(c, opts, variants, fields,
                          sources=("default", *alternatives))
    raw_lines = lookup(data, "releases")
    lines = tuple(raw_lines) if isinstance(raw_lines, dict) else ()
    default_variant = fields.get("default_variant") or next(iter(variants), "default")
    if variants and default_variant not in variants:
        c.bad(
            key_of(Recipe, "default_variant").toml,
            f"{default_variant!r} is not a variant"
            + suggest(str(default_variant), variants, 0.5)
            + f"; variants: {', '.join(variants)}",
        )
    valid = readers.when_checks(variants, alternatives, lines)
    patches = _patches(c, lookup(data, key_of(Recipe, "patches").toml), path, valid)
    downloads = readers.downloads(c, lookup(data, key_of(Recipe, "downloads").toml), valid)
    _variant_submodules(c, source, alternatives, variants)
    top = {**fields, "default_variant": default_variant, "alternatives": alternatives,
           "releases": lines}
    releases = readers.tables(c, data, key_of(Recipe, "releases"),
                              lambda v, key: readers.release(c, v, key, path, variants, top))
    if lookup(data, "releases") == {}:
        c.bad("releases", "no lines: declare [releases.<name>] tables (newest first), or leave "
              "[releases] out")
    for line in releases.values():
        if line is not None and (line.source is not None or line.alternatives is not None):
            _variant_submodules(c, line.source or source, alternatives if line.alternatives
                                is None else dict(line.alternatives),
                                {n: v for n, v in variants.items()
                                 if line.offers is None or n in line.offers})
    _cmake_args(c, fields.get("cmake_args", ()))
    hipify_step = _hipify(c, data, fields.get("hipify", ()))
    for i, req in enumerate(fields.get("validate_requires", ())):
        problem = requirement_problem(req)
        if problem:
            c.bad(f"{key_of(Recipe, 'validate_requires').toml}[{i}]", problem)
    tests_at = {key_of(Recipe, "validate_upstream_tests").toml: fields.get(
        "validate_upstream_tests", ())}
    tests_at |= {f"variants.{n}.upstream_tests": v.upstream_tests or ()
                 for n, v in variants.items() if v is not None}
    for at, tests in tests_at.items():
        for i, rel in enumerate(tests):
            parts = rel.replace("\\", "/").split("/")
            if not rel or rel.startswith("/") or ".." in parts:
                c.bad(f"{at}[{i}]", f"must be a relative path inside the source tree, got {rel!r}")
    # each named by the key the file holds (releases.<n>.build.depends, variants.<n>.depends)
    deps = {f"variants.{n}.{key_of(Variant, 'depends').toml}": v.depends
            for n, v in variants.items() if v and v.depends}
    deps.update({f"releases.{n}.{key_of(Release, 'depends').toml}": r.depends
                 for n, r in releases.items() if r and r.depends})
    if fields.get("depends") or deps:
        depends.check(c, path, {key_of(Recipe, "depends").toml: fields.get("depends", ()),
                                **deps}, within, load, str(fields.get("name", "")))
    if fields.get("backend") == "cmake" and not fields.get("version") \
            and fields.get("cmake_wheel", "install") == "install":
        c.bad(key_of(Recipe, "version").toml, "missing (the cmake backend needs the wheel version, "
              "e.g. version = \"1.0.0\")")
    if c.problems or source is None:
        raise RecipeError(
            c.problems or [f"{shown}: source: missing"],
            hint="fix the keys above; `rocmbuild plan <recipe> --arch gfx942` "
            "checks a recipe without building",
        )
    fields.update(default_variant=default_variant)
    return Recipe(
        path=path,
        source=source,
        alternatives={k: v for k, v in alternatives.items() if v is not None},
        variants={k: v for k, v in variants.items() if v is not None},
        validate_floor={k: v for k, v in floors.items() if v is not None},
        options={k: v for k, v in opts.items() if v is not None},
        releases={k: v for k, v in releases.items() if v is not None},
        patches=patches,
        downloads=downloads,
        raw_sha256=hashlib.sha256(raw).hexdigest(),
        hipify_step=hipify_step,
        **fields,
    )


MAX_DEPTH = 16
"""Tables and lists deeper than this are no recipe (the deepest key is about 5 levels)."""

TOML = settings.TomlKind(
    "a recipe", MAX_BYTES, lambda lines, hint: RecipeError(lines, hint=hint),
    {"large": "a recipe is a few kilobytes of TOML",
     "unreadable": "check the file's path and permissions (a recipe is a regular file, not a "
                   "symbolic link, FIFO or directory)",
     "syntax": "save the recipe as UTF-8 TOML; see recipes/flash-attn.toml for an example",
     "depth": "a recipe needs a few levels of tables and lists; see recipes/flash-attn.toml"},
    secret=userinfo_message, secret_hint=untrusted.CREDENTIALS_HINT + " (fetch reads it)",
    max_depth=MAX_DEPTH)
"""How a recipe file is read (``settings.read_toml``): size, depth and credentials are refused
before any key is looked at."""


def _read(path: Path, shown: Path) -> tuple[bytes, dict[str, Any]]:
    """The recipe file's bytes and its TOML, checked for what must be refused before any key
    is looked at (size, depth, credentials); RecipeError naming ``shown``."""
    raw = settings.read_bytes(path, TOML, shown)
    return raw, settings.read_toml(path, TOML, raw, shown) or {}


def requirement_problem(text: str) -> str | None:
    """Why ``text`` is not a PEP 508 requirement pip may be given (None: it is one)."""
    if text.strip().startswith("-"):  # not echoed: it may carry an index URL's password
        return "a pip option, not a requirement (set pip options in pip.conf or PIP_*)"
    if simple_requirement(text):  # valid at a glance: packaging not imported
        return None
    from packaging.requirements import InvalidRequirement, Requirement  # when there is one

    try:
        Requirement(text)
    except InvalidRequirement as exc:  # user:password@ never reaches output
        from rocmbuild.core.log import redact

        return (f"{redact(text)!r} is not a requirement: {redact(str(exc).splitlines()[0])} "
                '(e.g. "triton>=3.0")')
    return None


def _variant_submodules(c: Checker, source: Source | None,
                        alternatives: dict[str, Source | None],
                        variants: dict[str, Variant | None]) -> None:
    """A variant's submodules narrow the git sources': each must be one of theirs."""
    gits = {name: s for name, s in [("source", source), *(
        (f"source.alternatives.{n}", a) for n, a in alternatives.items())]
        if s is not None and s.kind == "git"}
    for v in variants.values():
        if v is None or v.submodules is None:
            continue
        key = f"variants.{v.name}.submodules"
        if not gits:
            c.bad(key, "no git source to narrow (submodules only apply to a git source)")
            continue
        for sub in v.submodules:
            for where, s in gits.items():
                if "*" in s.submodules:
                    continue
                if sub == "*" or sub not in s.submodules:
                    have = ", ".join(s.submodules) or "none"
                    c.bad(key, f"{sub!r} is not one of {where}.submodules ({have})"
                          + suggest(sub, s.submodules, 0.6))
                    break


_CMAKE_OWNED = ("-S", "-B", "-G", "-H", "--build", "--install-prefix", "-DCMAKE_INSTALL_PREFIX")


def _cmake_args(c: Checker, args: tuple[str, ...]) -> None:
    """rocmbuild owns the source, build and install directories and the generator."""
    for i, a in enumerate(args):
        if a in ("-S", "-B", "-G", "-H") or a.startswith(_CMAKE_OWNED):
            c.bad(f"{key_of(Recipe, 'cmake_args').toml}[{i}]",
                  f"{a!r}: rocmbuild sets the source, build and install directories and the "
                  "generator (for a CMakeLists.txt in a subdirectory set build.source_dir)")


def _hipify(c: Checker, data: dict[str, Any], legacy: tuple[str, ...]) -> Hipify | None:
    """The [hipify] table; ``build.hipify`` alone is ``tool = "command"`` with that command."""
    at = key_of(Recipe, "hipify_step").toml
    table = lookup(data, at)
    if not isinstance(table, dict):  # absent, or reported by walk
        return Hipify(tool="command", command=legacy) if legacy else None
    step = Hipify(**c.read(Hipify, table, at + "."))
    if legacy:
        c.bad(key_of(Recipe, "hipify").toml, f"set both here and in [{at}]: keep one "
              f'(build.hipify is [{at}] tool = "command" with command = [...])')
    if step.tool == "command":
        if not step.command:
            c.bad(f"{at}.command", 'missing (tool = "command" runs it, e.g. command = '
                  '["python", "tools/amd_build/build_amd.py"])')
        for name in ("project_dir", "includes", "ignores", "header_include_dirs",
                     "out_of_place"):
            if name in table:
                c.bad(f"{at}.{name}", 'not used with tool = "command" (the command decides '
                      "what it translates)")
    elif "command" in table:
        c.bad(f"{at}.command", f'only used with tool = "command" (tool is {step.tool!r})')
    if step.tool == "perl":
        for name in ("header_include_dirs", "out_of_place"):
            if table.get(name):
                c.bad(f"{at}.{name}", 'not supported with tool = "perl" (it translates in '
                      'place and leaves #include lines to you; tool = "torch" does both)')
    for i, d in enumerate(step.header_include_dirs):
        if d.startswith("/") or ".." in Path(d).parts:
            c.bad(f"{at}.header_include_dirs[{i}]", "must be a relative path inside "
                  f"project_dir (no leading / and no ..), got {d!r}")
    return step


def _variant(c: Checker, data: dict[str, Any], key: str) -> Variant:
    c.walk(data, tree(Variant), key + ".")
    return Variant(name=key.rsplit(".", 1)[1], **c.read(Variant, data, key + "."))


def _floor(c: Checker, data: dict[str, Any], key: str) -> Floor:
    c.walk(data, tree(Floor), key + ".")
    return Floor(name=key.rsplit(".", 1)[1], **c.read(Floor, data, key + "."))


def _patches(c: Checker, items: Any, path: Path,
             valid: dict[str, Callable[[str], bool]]) -> tuple[Patch, ...]:
    """[[patches]]; ``valid``: what each ``when`` key accepts (``readers.when_checks``)."""
    if not isinstance(items, list):
        return ()  # reported by walk
    out: list[Patch] = []
    for i, item in enumerate(items):
        key = f"patches[{i}]"
        if not isinstance(item, dict):
            c.bad(key, key_of(Recipe, "patches").item_msg)
            continue
        c.walk(item, tree(Patch), key + ".")
        values = c.read(Patch, item, key + ".")
        f = path.absolute().parent / values.get("file", "")
        if "file" in values:
            if not f.is_file():
                c.bad(f"{key}.file", f"{f} not found")
            elif "sha256" in values:
                actual = hashlib.sha256(f.read_bytes()).hexdigest()
                if actual != values["sha256"]:
                    c.bad(f"{key}.sha256", f"does not match {item['file']} (file has {actual})")
        for wk, wvalues in values.get("when", ()):
            for v in wvalues:
                if not valid[wk](v):
                    c.bad(f"{key}.when.{wk}", readers.not_valid(wk, v))
        # Placeholders for missing required keys: those were reported, and load raises.
        out.append(Patch(**{"sha256": "", "reason": "", **values, "file": f}))
    return tuple(out)


