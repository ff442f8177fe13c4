"""Flags shared by several commands, each defined once, and the steps several commands share:
options -> Target, recipe, Host."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rocmbuild.core import log, options, quantity
from rocmbuild.core.errors import UsageError
from rocmbuild.core.options import SETTINGS

T = TypeVar("T")

if TYPE_CHECKING:  # imported where used: a hit served by noop_memo imports no recipe model
    from rocmbuild.host.detect import Host
    from rocmbuild.plan.model import Plan
    from rocmbuild.plan.planning import HostSource, Wants
    from rocmbuild.recipe.model import Recipe

Subparsers = Any  # argparse's _SubParsersAction is private


def add_setting(p: argparse.ArgumentParser, name: str, command: str | None = None,
                default: object = None) -> None:
    """The flag of setting ``name`` (core.options.SETTINGS), made from its declaration alone:
    its names, kind, choices, metavar and help (``command``'s, where it differs there)."""
    s = SETTINGS[name]
    kw: dict[str, Any] = {"action": "store_true"} if s.kind == "bool" else {}
    if s.kind == "int":
        kw["type"] = int
    if s.choices:
        kw["choices"] = s.choices
    if s.metavar:
        kw["metavar"] = s.metavar
    p.add_argument(*s.flags, default=default, help=s.help(command), **kw)


def add_json(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout")


def add_global_options(p: argparse.ArgumentParser, top: bool) -> None:
    """Global options work before and after the command; only the top level sets defaults."""

    def d(value: object) -> object:
        return value if top else argparse.SUPPRESS

    p.add_argument("-v", "--verbose", action="count", default=d(0),
                   help="more output (-v streams build output to the console)")
    p.add_argument("-q", "--quiet", action="count", default=d(0), help="less output")
    add_setting(p, "workdir", default=d(None))
    add_setting(p, "cache_dir", default=d(None))
    p.add_argument("--recipes", action="append", default=d([]), metavar="DIR",
                   help="a directory of your own <name>.toml recipes, searched before "
                   "ROCMBUILD_RECIPE_PATH and the shipped ones (repeatable)")


def add_target_options(p: argparse.ArgumentParser) -> None:
    """What to build: the recipe and everything that selects or places it."""
    p.add_argument("recipe", help="recipe name (see `rocmbuild recipes`) or path to a .toml file")
    for name in ("arch", "variant", "release", "source", "jobs", "rocm_version", "hip_compiler",
                 "gpu_vendor", "rocm_path"):
        add_setting(p, name)
    p.add_argument("--opt", action="append", default=[], metavar="RECIPE.NAME=VALUE",
                   help="set a recipe option (its [options] table; `rocmbuild recipes` lists "
                   "them), e.g. --opt flash-attn.opt_dim=128; repeatable; part of the cache key")
    add_setting(p, "build_tag")


def jobs(args: argparse.Namespace) -> int | None:
    """--jobs / ROCMBUILD_JOBS / [tool.rocmbuild] jobs, checked (1 .. jobs.MAX_JOBS)."""
    from rocmbuild.core.jobs import MAX_JOBS

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: must be at least 1, got {str(args.jobs)[:20]}",
                         hint="leave it out to let rocmbuild choose from cpus and memory")
    result: int | None = options.resolve("jobs", args.jobs)
    if result is not None:
        quantity_flag(options.origin("jobs", args.jobs), result,
                      lambda v: quantity.count(v, 1, MAX_JOBS, "a number of jobs"),
                      "leave it out to let rocmbuild choose from cpus and memory")
    return result


def quantity_flag(where: str, value: object, parse: Callable[[object], T], hint: str) -> T:
    """``parse(value)`` (one of core.quantity's parsers), or one usage error naming ``where``
    (the flag, the variable or the file and key): ``--max-size: '12X' is not a size``."""
    try:
        return parse(value)
    except quantity.BadQuantity as exc:
        raise UsageError(f"{where}: {exc}", hint=hint) from None


def parse_opts(given: list[str], recipe: str) -> tuple[tuple[str, str], ...]:
    """``--opt flash-attn.opt_dim=128`` (repeatable) -> (("opt_dim", "128"),); the prefix must
    name ``recipe``. Unknown names and bad values are the renderer's to report."""
    out: dict[str, str] = {}
    for text in given:
        where, sep, value = text.partition("=")
        prefix, dot, name = where.rpartition(".")
        if not sep or not dot or not name:
            raise UsageError(f"--opt: {text!r} is not RECIPE.NAME=VALUE",
                             hint=f"e.g. --opt {recipe}.opt_dim=128")
        if prefix != recipe:
            raise UsageError(f"--opt: {text!r} names recipe {prefix!r}, but this builds {recipe}",
                             hint=f"--opt {recipe}.{name}={value}")
        out[name] = value  # the last one wins, as with any repeated flag
    return tuple(out.items())


def print_json(data: object) -> None:
    log.out.print_json(json.dumps(data))


def plan_from_args(args: argparse.Namespace, host_file: str | None = None) -> tuple[Plan, Host]:
    """(Plan, Host) for build and plan: ``rendered_from_args``'s."""
    r = rendered_from_args(args, host_file)
    return r.plan, r.host


@dataclass(frozen=True)
class Rendered:
    """A plan as ``rendered_from_args`` made it, with what it read (noop_memo's memo keeps the
    host and what its detection looked for)."""

    recipe: Recipe
    plan: Plan
    host: Host
    wants: Wants | None


def host_source(args: argparse.Namespace, host_file: str | None = None) -> HostSource:
    """Where the flags say the Host comes from: ``host_file`` (``--host FILE``), else this
    machine with --rocm-path and --hip-compiler."""
    from rocmbuild.plan import planning

    if host_file:
        return planning.SavedHost(Path(host_file))
    return planning.Detect(rocm_path=options.resolve("rocm_path", args.rocm_path),
                           hip_compiler=options.resolve("hip_compiler", args.hip_compiler))


def rendered_from_args(args: argparse.Namespace, host_file: str | None = None) -> Rendered:
    """The recipe, the Target from the flags, and the Host detected here (or read from
    ``host_file``), planned by ``planning.plan_for``: with the unit memory earlier builds
    measured, from the cache a controller may share with its nodes."""
    from rocmbuild.core import config
    from rocmbuild.plan import planning, render
    from rocmbuild.recipe import load, search

    recipe = load.load(search.find_recipe(args.recipe))
    target = render.Target(
        arch=options.resolve("arch", args.arch, "native"),
        variant=options.resolve("variant", args.variant),
        source=options.resolve("source", args.source, "default"),
        jobs=jobs(args),
        rocm_version=options.resolve("rocm_version", args.rocm_version),
        gpu_vendor=options.resolve("gpu_vendor", args.gpu_vendor, "amd"),
        build_tag=options.resolve("build_tag", getattr(args, "build_tag", None)),
        options=parse_opts(getattr(args, "opt", None) or [], recipe.path.stem),
        release=options.resolve("release", getattr(args, "release", None)),
    )
    ws = config.workspace(getattr(args, "workdir", None), getattr(args, "cache_dir", None))
    planned = planning.plan_for(recipe, target, host_source(args, host_file), ws.cache)
    return Rendered(recipe, planned.plan, planned.host, planned.wants)
