"""``rocmbuild recipes``: the recipes found, their variants, sources and archs."""

from __future__ import annotations

import argparse
from typing import Any

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser("recipes", help="list recipes, variants and supported archs")
    common.add_json(p, "the list")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rocmbuild import log
    from rocmbuild.recipe import load

    rows: list[dict[str, Any]] = []
    for name in load.available():
        recipe = load.load(load.find_recipe(name))
        rows.append({
            "name": name,
            "package": recipe.name,
            "description": recipe.description,
            "default_variant": recipe.default_variant,
            "variants": {v.name: v.description for v in recipe.variants.values()},
            "sources": ["default", *recipe.alternatives],
            "archs": list(recipe.supported_archs),
            "path": str(recipe.path),
        })
    if args.json:
        common.print_json(rows)
        return 0
    table = Table(box=None, pad_edge=False)
    for col in ("recipe", "variants (default first)", "sources", "archs"):
        table.add_column(col)
    for r in rows:
        variants = sorted(r["variants"], key=lambda v: v != r["default_variant"])
        table.add_row(r["name"], ", ".join(variants) or "-", ", ".join(r["sources"]),
                      ", ".join(r["archs"]) or "any")
    log.out.print(table)
    return 0
