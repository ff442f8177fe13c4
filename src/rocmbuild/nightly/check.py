"""The matrix checked against its recipes before anything runs (``--dry-run`` too): each cell's
recipe exists, its variant, source, options and archs are ones the recipe has (the recipe
layer's own checks, their errors naming ``nightly.toml: matrix[i].<key>``, never a flag the user
did not type), and no two cells build the same thing: the same recipe, variant (``default``
and the recipe's default variant are one), source, set of targets (in any order) and option
values (an option given its default is the option left out)."""

from __future__ import annotations

from collections.abc import Sequence

from rocmbuild.core import gfx
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly.model import Cell
from rocmbuild.plan import recipe_options, render
from rocmbuild.recipe import load, search
from rocmbuild.recipe.model import Recipe

Key = tuple[str, str, str, frozenset[str], tuple[tuple[str, str], ...]]
FLAG_KEYS = {"--variant": "variants", "--source": "sources", "--opt": "options",
             "--arch": "archs", "--release": "recipes"}
"""The recipe layer's flags and the matrix keys a nightly cell's values come from."""


def renamed(exc: UsageError, cell: Cell, name: str) -> UsageError:
    """``exc`` raised while planning ``cell`` (a release line picked for this host that does not
    build its variant, ...) with the nightly key in place of the flag it names (``--variant:
    ...`` -> ``nightly.toml: matrix[1].variants: ...``); ``exc`` when it names no such flag."""
    flag, sep, rest = exc.message.partition(": ")
    if not sep or flag not in FLAG_KEYS:
        return exc
    return UsageError(f"{name}: matrix[{cell.entry}].{FLAG_KEYS[flag]}: {rest} (cell {cell.id})",
                      hint=exc.hint)


def key(cell: Cell, recipe: Recipe, name: str) -> Key:
    """What the cell builds, checked (``name``: the config file's name, for errors)."""
    where = f"{name}: matrix[{cell.entry}]"
    variant = recipe.on_variant(cell.variant, f"{where}.variants").variant
    render.source_of(recipe, cell.source, f"{where}.sources")
    archs = gfx.parse_archs(cell.arch, recipe.supported_archs,
                            f"{recipe.path.name}: arch.supported", flag=f"{where}.archs")
    chosen = recipe_options.resolve(recipe, variant, cell.source, cell.options, f"{where}.options")
    return (str(recipe.path.resolve()), variant, cell.source, frozenset(archs), chosen)


def check(cells: Sequence[Cell], name: str) -> None:
    """Raise UsageError on the first cell the recipes refuse, or that builds what an earlier
    cell builds (the error names both matrix entries)."""
    recipes: dict[str, Recipe] = {}
    seen: dict[Key, Cell] = {}
    for cell in cells:
        if cell.recipe not in recipes:
            try:
                path = search.find_recipe(cell.recipe)
            except UsageError as exc:  # "unknown recipe 'x'": say where it was named
                raise UsageError(f"{name}: matrix[{cell.entry}].recipes: {exc.message}",
                                 hint=exc.hint) from None
            recipes[cell.recipe] = load.load(path)
        k = key(cell, recipes[cell.recipe], name)
        first = seen.setdefault(k, cell)
        if first is not cell:
            what = "variants" if first.variant != cell.variant else (
                "archs" if first.arch != cell.arch else "options")
            raise UsageError(
                f"{name}: matrix[{cell.entry}].{what}: cell {cell.id} builds what cell "
                f"{first.id} of matrix[{first.entry}] builds ({k[1]}, {cell.source}, "
                f"{','.join(sorted(k[3]))})",
                hint="list each build once: \"default\" is the recipe's default variant, "
                "the order of targets in one arch set makes no other build, and an option "
                "given its default is the option left out")
