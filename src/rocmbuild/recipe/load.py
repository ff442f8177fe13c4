"""Load recipes/*.toml into frozen dataclasses, reporting every problem at once.

Each problem is one line: ``<file>: <key.path>: <what> (did you mean X?)``. The keys, their types
and defaults come from the model's field metadata (``recipe.model``) through ``recipe.check``;
this module reads the file and adds the rules that relate keys to each other or to files.
Finding a recipe by name, and listing them, is ``recipe.search``'s.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmbuild.core.errors import RecipeError
from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.core.pep508 import simple_requirement
from rocmbuild.recipe.check import MISSING, Checker, lookup, suggest, tree
from rocmbuild.recipe.model import (
    GPU_VENDORS,
    OPTION_NAME,
    SOURCE_KINDS,
    Download,
    Floor,
    Hipify,
    Key,
    Option,
    Patch,
    Recipe,
    Source,
    Variant,
    key_of,
)


def files_read(recipe: Recipe) -> tuple[Path, ...] | None:
    """The files loading ``recipe`` read: the recipe and its patches; None when it has a local
    source (a path, or a git repository on this machine), whose content only the full render and
    the fetch stage look at (``rocmbuild.commands.quickhit`` then keeps no memo)."""
    for src in (recipe.source, *recipe.alternatives.values()):
        if src.kind == "path" or (src.kind == "git" and src.url.startswith("/")):
            return None
    return (recipe.path.absolute(), *(p.file for p in recipe.patches))


def _display(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def load(path: Path) -> Recipe:
    """Parse and check a recipe. Raises RecipeError listing every problem."""
    shown = _display(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeError([f"{shown}: cannot read: {exc.strerror or exc}"],
                          hint="check the file's path and permissions") from exc
    try:
        # A UTF-8 byte order mark (Windows editors write one) is accepted and skipped.
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise RecipeError(
            [f"{shown}: not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})"],
            hint="save the recipe as UTF-8",
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(
            [f"{shown}: invalid TOML: {exc}"],
            hint="fix the syntax; see recipes/flash-attn.toml for an example",
        ) from exc
    except RecursionError as exc:
        raise RecipeError([f"{shown}: invalid TOML: nested too deeply"],
                          hint="a recipe needs a few levels of tables, not hundreds") from exc
    depth = _depth(data)
    if depth > MAX_DEPTH:
        raise RecipeError([f"{shown}: nested {depth} levels deep (at most {MAX_DEPTH})"],
                          hint="a recipe needs a few levels of tables and lists; "
                          "see recipes/flash-attn.toml")
    c = Checker(shown)
    c.walk(data, tree(Recipe), "")
    fields = c.read(Recipe, data, "")
    source_at = key_of(Recipe, "source").toml
    raw_source = lookup(data, source_at)
    source = _source(c, raw_source, source_at, path) if isinstance(raw_source, dict) else None
    alts = key_of(Recipe, "alternatives")
    alternatives = _tables(c, data, alts, lambda v, key: _source(c, v, key, path))
    if lookup(data, f"{alts.toml}.default") is not MISSING:
        c.bad(f"{alts.toml}.default", "'default' is reserved for [source]")
    variants = _tables(c, data, key_of(Recipe, "variants"), lambda v, key: _variant(c, v, key))
    floors = _tables(c, data, key_of(Recipe, "validate_floor"), lambda v, key: _floor(c, v, key))
    opts = _tables(c, data, key_of(Recipe, "options"), lambda v, key: _option(c, v, key))
    _option_checks(c, opts, variants, fields)
    default_variant = fields.get("default_variant") or next(iter(variants), "default")
    if variants and default_variant not in variants:
        c.bad(
            key_of(Recipe, "default_variant").toml,
            f"{default_variant!r} is not a variant"
            + suggest(str(default_variant), variants, 0.5)
            + f"; variants: {', '.join(variants)}",
        )
    patches = _patches(c, lookup(data, key_of(Recipe, "patches").toml), path, variants,
                       alternatives)
    downloads = _downloads(c, lookup(data, key_of(Recipe, "downloads").toml),
                           _when_checks(variants, alternatives))
    _variant_submodules(c, source, alternatives, variants)
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
    if fields.get("backend") == "cmake" and not fields.get("version"):
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
        patches=patches,
        downloads=downloads,
        raw_sha256=hashlib.sha256(raw).hexdigest(),
        hipify_step=hipify_step,
        **fields,
    )


MAX_DEPTH = 16
"""Tables and lists deeper than this are no recipe (the deepest key is about 5 levels)."""


def _depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """Nesting depth of tables and lists, counted up to ``limit``."""
    if limit <= 0 or not isinstance(value, dict | list):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in items), default=0)


def _tables(c: Checker, data: dict[str, Any], k: Key, read: Callable[[Any, str], Any]
            ) -> dict[str, Any]:
    """The named tables of key ``k`` ([variants.<name>]), each read by ``read`` (None: unusable)."""
    node = lookup(data, k.toml)
    if not isinstance(node, dict):
        return {}  # absent, or reported by walk
    out: dict[str, Any] = {}
    for name, value in node.items():
        key = f"{k.toml}.{name}"
        if not isinstance(value, dict):
            c.bad(key, k.item_msg)
            continue
        out[name] = read(value, key)
    return out


def _source(c: Checker, data: dict[str, Any], key: str, path: Path) -> Source | None:
    if key != key_of(Recipe, "source").toml:  # [source] was walked with the whole file
        c.walk(data, tree(Source), key + ".")
    kinds = [k for k in SOURCE_KINDS if k in data]
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        c.bad(key, f"needs exactly one of {', '.join(SOURCE_KINDS)} (found {what})")
        return None
    kind = kinds[0]
    values = c.read(Source, data, key + ".", kind=kind)
    base = path.absolute().parent
    if kind == "path" and "path" in values:
        where = base / values["path"]
        if not where.is_dir():
            c.bad(f"{key}.{key_of(Source, 'path').toml}",
                  f"{where} is not a directory (a path source is relative to the recipe file)")
        values["path"] = str(where.resolve())
    if kind == "git" and values.get("url"):
        local = local_git_path(values["url"], base)
        if local is not None:
            if not local.exists():
                c.bad(f"{key}.git", f"{local} does not exist (a local repository path is "
                      "relative to the recipe file)")
            values["url"] = str(local)
    return Source(kind, **values)


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
        from rocmbuild.core.run import redact

        return (f"{redact(text)!r} is not a requirement: {redact(str(exc).splitlines()[0])} "
                '(e.g. "triton>=3.0")')
    return None


def local_git_path(url: str, base: Path) -> Path | None:
    """The local repository a ``git`` value names, made absolute against ``base`` (the recipe
    file's directory): a plain path (``../repo``, ``/srv/repo``) or a ``file://`` URL, whose
    relative form (``file://../repo``) is relative too. None for a remote URL (``https://``,
    ``ssh://``, ``git@host:path``)."""
    if url.startswith("file://"):
        rest = url[len("file://"):]
        return Path(rest) if rest.startswith("/") else (base / rest).resolve()
    if "://" in url:
        return None
    head = url.split("/", 1)[0]
    if ":" in head and not url.startswith((".", "/")):
        return None  # scp-like: git@github.com:ROCm/flash-attention.git
    return (base / url).resolve()


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


def _option(c: Checker, data: dict[str, Any], key: str) -> Option | None:
    c.walk(data, tree(Option), key + ".")
    name = key.rsplit(".", 1)[1]
    if not re.fullmatch(OPTION_NAME, name):
        c.bad(key, f"option name {name!r} must be lower case letters, digits and _ "
              "(e.g. opt_dim)")
        return None
    return Option(name=name, **c.read(Option, data, key + "."))


def _option_checks(c: Checker, opts: dict[str, Option | None],
                   variants: dict[str, Variant | None], fields: dict[str, Any]) -> None:
    """Each option's default is one of its own values, its variants exist, and its variable is
    set by nothing else (build.env, arch.env, a variant's env, another option)."""
    owners: dict[str, str] = {}
    for name, o in opts.items():
        if o is None:
            continue
        at = f"{key_of(Recipe, 'options').toml}.{name}"
        if o.pattern:
            try:
                re.compile(o.pattern)
            except re.error as exc:
                c.bad(f"{at}.pattern", f"not a regular expression: {exc}")
                continue
        problem = o.problem(o.default)
        if problem:
            c.bad(f"{at}.default", problem)
        for i, v in enumerate(o.variants):
            if v not in variants:
                c.bad(f"{at}.variants[{i}]", f"{v!r} is not a variant" + suggest(v, variants, 0.5)
                      + (f"; variants: {', '.join(variants)}" if variants else ""))
        set_by = [k for k, pairs in (("build.env", fields.get("env", ())),
                                     ("arch.env", fields.get("arch_env", ())))
                  if o.env in dict(pairs)]
        set_by += [f"variants.{n}.env" for n, v in variants.items()
                   if v is not None and o.env in dict(v.env)]
        if o.env in owners:
            set_by.append(f"options.{owners[o.env]}")
        owners[o.env] = name
        if set_by:
            c.bad(f"{at}.env", f"{o.env} is also set by {', '.join(set_by)} (an option's "
                  "variable is the option's alone)")


def _floor(c: Checker, data: dict[str, Any], key: str) -> Floor:
    c.walk(data, tree(Floor), key + ".")
    return Floor(name=key.rsplit(".", 1)[1], **c.read(Floor, data, key + "."))


def _patches(
    c: Checker,
    items: Any,
    path: Path,
    variants: dict[str, Variant | None],
    alternatives: dict[str, Source | None],
) -> tuple[Patch, ...]:
    if not isinstance(items, list):
        return ()  # reported by walk
    out: list[Patch] = []
    valid = _when_checks(variants, alternatives)
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
                    c.bad(f"{key}.when.{wk}", _not_valid(wk, v))
        # Placeholders for missing required keys: those were reported, and load raises.
        out.append(Patch(**{"sha256": "", "reason": "", **values, "file": f}))
    return tuple(out)


def _when_checks(variants: dict[str, Variant | None], alternatives: dict[str, Source | None]
                 ) -> dict[str, Callable[[str], bool]]:
    """What each ``when`` key of a patch or download accepts."""
    return {
        "variant": lambda v: v in variants,
        "source": lambda v: v == "default" or v in alternatives,
        "arch": lambda v: v in KNOWN_ARCHS,
        "gpu_vendor": lambda v: v in GPU_VENDORS,
        "rocm": lambda v: re.fullmatch(r"\d+\.\d+", v) is not None,
    }


def _not_valid(when_key: str, value: str) -> str:
    if when_key == "rocm":
        return f"{value!r} is not a ROCm major.minor version like 6.4"
    return f"{value!r} is not a known {when_key.replace('_', ' ')}"


def _downloads(c: Checker, items: Any, valid: dict[str, Callable[[str], bool]]
               ) -> tuple[Download, ...]:
    if not isinstance(items, list):
        return ()  # absent, or reported by walk
    out: list[Download] = []
    names: set[str] = set()
    for i, item in enumerate(items):
        key = f"downloads[{i}]"
        if not isinstance(item, dict):
            c.bad(key, key_of(Recipe, "downloads").item_msg)
            continue
        c.walk(item, tree(Download), key + ".")
        values = c.read(Download, item, key + ".")
        name = values.get("name", "")
        if name in names:
            c.bad(f"{key}.name", f"{name!r} is named twice (each download needs its own name)")
        names.add(name)
        for wk, wvalues in values.get("when", ()):
            for v in wvalues:
                if not valid[wk](v):
                    c.bad(f"{key}.when.{wk}", _not_valid(wk, v))
        # Placeholders for missing required keys: those were reported, and load raises.
        out.append(Download(**{"name": "", "url": "", "env": "", **values}))
    return tuple(out)
