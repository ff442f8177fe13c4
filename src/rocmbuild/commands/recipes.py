"""``rocmbuild recipes``: the recipes found, their variants, sources and archs; with
``--upstream``, each pin against what upstream has now (docs/nightly-reports.md#drift)."""

from __future__ import annotations

import argparse
import re

from rocmbuild.commands import common

DEFAULT_PYPI = "https://pypi.org/simple/"
MAX_UPSTREAM_TIMEOUT = 3600
"""The longest --upstream-timeout (seconds per query)."""


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser("recipes", help="list recipes, variants and supported archs; "
                       "--upstream: each pin against upstream now")
    p.add_argument("names", nargs="*", metavar="RECIPE",
                   help="with --upstream: only these recipes (names or .toml paths) "
                   "[default: all]")
    p.add_argument("--upstream", action="store_true",
                   help="per recipe line (default source, alternatives): the pinned commit or "
                   "version, what upstream has now (branch head, newer tags, the index's newest "
                   "release) and a verdict: current, behind or unknown")
    common.add_setting(p, "pypi")
    common.add_setting(p, "upstream_timeout")
    common.add_json(p, "the list (--upstream: the drift report)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rocmbuild.core import log
    from rocmbuild.core.errors import UsageError
    from rocmbuild.recipe import search

    if args.names and not args.upstream:
        raise UsageError("recipes: RECIPE names are for --upstream",
                         hint=f"rocmbuild recipes --upstream {' '.join(args.names)}")
    if args.upstream:
        return _upstream(args)
    infos = search.list_recipes()
    if args.json:
        common.print_json([i.to_json() for i in infos])
        return 0
    table = Table(box=None, pad_edge=False)
    for col in ("recipe", "variants (default first)", "sources", "archs", "options (--opt)"):
        table.add_column(col)
    for i in infos:
        variants = sorted(i.variants, key=lambda v: v != i.default_variant)
        table.add_row(i.name, ", ".join(variants) or "-", ", ".join(i.sources),
                      ", ".join(i.archs) or "any", ", ".join(i.options) or "-")
    log.out.print(table)
    return 0


def _upstream(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from rocmbuild.core import log, options, quantity
    from rocmbuild.core.errors import UsageError
    from rocmbuild.recipe import load, pins, search
    from rocmbuild.sources import drift

    index = str(options.resolve("pypi", args.pypi, DEFAULT_PYPI))
    if not re.fullmatch(r"https?://\S+", index):
        raise UsageError(f"{options.origin('pypi', args.pypi)}: {index[:200]!r} is not an "
                         "http(s) URL", hint=f"the simple index's URL, e.g. {DEFAULT_PYPI}")
    timeout = common.quantity_flag(
        options.origin("upstream_timeout", args.upstream_timeout),
        options.resolve("upstream_timeout", args.upstream_timeout, drift.DEFAULT_TIMEOUT_S),
        lambda v: quantity.count(v, 1, MAX_UPSTREAM_TIMEOUT, "a number of seconds"),
        f"whole seconds, 1 to {MAX_UPSTREAM_TIMEOUT}, e.g. --upstream-timeout 30")
    names = args.names or search.available()
    found: list[drift.LinePin] = []
    for name in dict.fromkeys(names):
        recipe = load.load(search.find_recipe(name))
        shown = pins.shown_name(name)
        got = pins.pins(recipe, shown)
        if not got:
            log.info(escape(f"{shown}: no git or sdist source (nothing upstream to compare)"))
        found += got
    report = drift.report(found, index.rstrip("/") + "/", float(timeout))
    if args.json:
        common.print_json(report.to_json())
        return 0
    table = Table(box=None, pad_edge=False)
    for col in ("recipe", "line", "pinned", "upstream now", "verdict"):
        table.add_column(col)
    for e in report.entries:
        pinned = (f"{e.pinned[:12]}" + (f" ({e.ref})" if e.ref else "")
                  if e.kind == "git" else e.pinned or "?")
        table.add_row(*(escape(c) for c in (e.recipe, e.line, pinned, e.upstream(),
                                             e.status())))
    log.out.print(table)
    for e in report.entries:
        for note in e.notes:
            log.warn(escape(f"{e.recipe} {e.line}: {note}"))
    return 0
