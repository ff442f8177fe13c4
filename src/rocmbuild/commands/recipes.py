"""``rocmbuild recipes``: the recipes found, their variants, sources and archs."""

from __future__ import annotations

import argparse

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser("recipes", help="list recipes, variants and supported archs")
    common.add_json(p, "the list")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rocmbuild.core import log
    from rocmbuild.recipe import search

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
