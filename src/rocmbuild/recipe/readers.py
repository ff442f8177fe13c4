"""Readers of the recipe's tables that appear in more than one place: sources, named tables,
options, downloads and their ``when`` checks, and the release lines (``[releases.<name>]``), whose
tables hold the same keys as the recipe's own. ``recipe.load`` reads the file with them."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.core.options import GPU_VENDORS
from rocmbuild.recipe.check import MISSING, Checker, lookup, suggest, tree
from rocmbuild.recipe.keys import SOURCE_KINDS, Key, key_of
from rocmbuild.recipe.releases import RELEASE_NAME, Release
from rocmbuild.recipe.tables import OPTION_NAME, Download, Option, Source, Variant

DOWNLOADS_MSG = "expected a table ([[downloads]] with name, url, sha256, env)"


def tables(c: Checker, data: dict[str, Any], k: Key, read: Callable[[Any, str], Any],
           prefix: str = "") -> dict[str, Any]:
    """The named tables of key ``k`` ([variants.<name>]), each read by ``read`` (None: unusable);
    ``prefix``: where ``data`` sits in the file (``releases.main.``), for messages."""
    node = lookup(data, k.toml)
    if not isinstance(node, dict):
        return {}  # absent, or reported by walk
    out: dict[str, Any] = {}
    for name, value in node.items():
        key = f"{prefix}{k.toml}.{name}"
        if not isinstance(value, dict):
            c.bad(key, k.item_msg)
            continue
        out[name] = read(value, key)
    return out


def source(c: Checker, data: dict[str, Any], key: str, path: Path, walked: bool = False
           ) -> Source | None:
    """The source table ``data`` at ``key``; ``walked``: its keys were checked with the table
    around it ([source] with the whole file, a line's with its line)."""
    if not walked:
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


def option(c: Checker, data: dict[str, Any], key: str) -> Option | None:
    c.walk(data, tree(Option), key + ".")
    name = key.rsplit(".", 1)[1]
    if not re.fullmatch(OPTION_NAME, name):
        c.bad(key, f"option name {name!r} must be lower case letters, digits and _ "
              "(e.g. opt_dim)")
        return None
    return Option(name=name, **c.read(Option, data, key + "."))


def option_checks(c: Checker, opts: dict[str, Option | None],
                  variants: dict[str, Variant | None], fields: dict[str, Any],
                  prefix: str = "", sources: Collection[str] = ("default",)) -> None:
    """Each option's default is one of its own values, its variants and ``sources`` (the
    names ``--source`` takes where the options apply) exist, and its variable is set by nothing
    else (build.env, arch.env, a variant's env, another option). ``prefix``: where the options
    sit (``releases.main.``)."""
    owners: dict[str, str] = {}
    for name, o in opts.items():
        if o is None:
            continue
        at = f"{prefix}options.{name}"
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
        for i, src in enumerate(o.sources):
            if src not in sources:
                c.bad(f"{at}.sources[{i}]", f"{src!r} is not a source here"
                      + suggest(src, sources, 0.5) + f"; sources: {', '.join(sources)}")
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


def when_checks(variants: dict[str, Variant | None], alternatives: dict[str, Source | None],
                releases: Collection[str] = ()) -> dict[str, Callable[[str], bool]]:
    """What each ``when`` key of a patch or download accepts (``releases``: the recipe's line
    names)."""
    return {
        "release": lambda v: v in releases,
        "variant": lambda v: v in variants,
        "source": lambda v: v == "default" or v in alternatives,
        "arch": lambda v: v in KNOWN_ARCHS,
        "gpu_vendor": lambda v: v in GPU_VENDORS,
        "rocm": lambda v: re.fullmatch(r"\d+\.\d+", v) is not None,
    }


def not_valid(when_key: str, value: str) -> str:
    if when_key == "release":
        return f"{value!r} is not a release line of this recipe ([releases.<name>])"
    if when_key == "rocm":
        return f"{value!r} is not a ROCm major.minor version like 6.4"
    return f"{value!r} is not a known {when_key.replace('_', ' ')}"


def downloads(c: Checker, items: Any, valid: dict[str, Callable[[str], bool]],
              at: str = "downloads") -> tuple[Download, ...]:
    if not isinstance(items, list):
        return ()  # absent, or reported by walk
    out: list[Download] = []
    names: set[str] = set()
    for i, item in enumerate(items):
        key = f"{at}[{i}]"
        if not isinstance(item, dict):
            c.bad(key, DOWNLOADS_MSG)
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
                    c.bad(f"{key}.when.{wk}", not_valid(wk, v))
        # Placeholders for missing required keys: those were reported, and load raises.
        out.append(Download(**{"name": "", "url": "", "env": "", **values}))
    return tuple(out)


def release(c: Checker, data: dict[str, Any], key: str, path: Path,
            variants: dict[str, Variant | None], top: dict[str, Any]) -> Release | None:
    """The line ``[releases.<name>]`` at ``key``. ``top``: the recipe's own values by field
    (default_variant, env, arch_env, alternatives), which the line's keys are checked with."""
    name = key[len("releases."):]
    c.walk(data, tree(Release), key + ".")
    if not re.fullmatch(RELEASE_NAME, name):
        c.bad(key, f"release name {name!r} must be letters, digits, '.', '_' or '-' "
              "(e.g. 2.8-fork)")
        return None
    values = c.read(Release, data, key + ".")
    if isinstance(raw := lookup(data, "source"), dict):
        values["source"] = source(c, raw, f"{key}.source", path, walked=True)
    alternatives = top.get("alternatives", {})
    if lookup(data, "source.alternatives") is not MISSING:
        alternatives = tables(c, data, key_of(Release, "alternatives"),
                              lambda v, k: source(c, v, k, path), prefix=key + ".")
        if "default" in alternatives:
            c.bad(f"{key}.source.alternatives.default", "'default' is reserved for [source]")
        values["alternatives"] = {k: v for k, v in alternatives.items() if v is not None}
    if lookup(data, "options") is not MISSING:
        opts = tables(c, data, key_of(Release, "options"), lambda v, k: option(c, v, k),
                      prefix=key + ".")
        env = {**dict(top.get("env", ())), **dict(values.get("env", ()))}
        option_checks(c, opts, variants, {**top, "env": tuple(env.items())}, prefix=key + ".",
                      sources=("default", *alternatives))
        values["options"] = {k: v for k, v in opts.items() if v is not None}
    if lookup(data, "downloads") is not MISSING:
        values["downloads"] = downloads(c, lookup(data, "downloads"),
                                        when_checks(variants, alternatives, top["releases"]),
                                        f"{key}.downloads")
    offers = values.get("offers")
    if offers is not None and not variants:
        c.bad(f"{key}.variants", "the recipe has no [variants] to choose from")
    for i, v in enumerate(offers or ()):
        if v not in variants:
            c.bad(f"{key}.variants[{i}]", f"{v!r} is not a variant" + suggest(v, variants, 0.5)
                  + (f"; variants: {', '.join(variants)}" if variants else ""))
    default = values.get("default_variant")
    if default is not None and default not in variants:
        c.bad(f"{key}.build.default_variant", f"{default!r} is not a variant"
              + suggest(default, variants, 0.5))
    elif offers and variants and (default or top["default_variant"]) not in offers:
        c.bad(f"{key}.variants", f"leaves out the default variant "
              f"{default or top['default_variant']!r}: set {key}.build.default_variant to one of "
              + ", ".join(offers))
    return Release(name=name, **values)
