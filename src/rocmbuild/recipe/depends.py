"""Recipe dependencies (``build.depends``, ``variants.<name>.depends``): finding the recipes they
name and refusing unknown names and cycles when a recipe loads (docs/build-env.md).

A dependency is named like a recipe on the command line: searched in ``config.recipe_dirs()``
(``--recipes``, ROCMBUILD_RECIPE_PATH, the shipped recipes), then in the directory of the recipe
that names it (so a recipe given by path finds its sibling). Loading a recipe loads every recipe
it names, recursively (their problems are reported with it); one that names a recipe on the way
to it again is a cycle. The loading itself is ``load.load``'s, passed in (this module is below
it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rocmbuild.core import config, fsutil
from rocmbuild.core.errors import RecipeError
from rocmbuild.recipe.check import Checker, suggest
from rocmbuild.recipe.model import Recipe

MAX_DEPTH = 8
"""Dependencies of dependencies nested deeper than this are refused (aiter is one level)."""

Loader = Callable[[Path, tuple[Path, ...]], object]
"""``load.load(path, within)``: loads and checks a recipe named on the way ``within``."""


def of(recipe: Recipe, variant: str | None) -> tuple[str, ...]:
    """The recipes a plan of this variant needs built first: its depends, else build.depends
    (``Recipe.on_known_variant``)."""
    return recipe.on_known_variant(variant).depends


def find(name: str, near: Path) -> Path | None:
    """The recipe file ``name`` names: the recipe search path first, then ``near``'s
    directory (the recipe that names it); None when there is none."""
    for d in (*config.recipe_dirs(), near.parent):
        cand = d / f"{name}.toml"
        if cand.is_file():
            return cand
    return None


def _available(near: Path) -> list[str]:
    names: list[str] = []
    for d in (*config.recipe_dirs(), near.parent):
        if d.is_dir():
            names += [p.stem for p in sorted(d.glob("*.toml")) if p.stem not in names]
    return names


def check(c: Checker, path: Path, lists: dict[str, tuple[str, ...]], within: tuple[Path, ...],
          loader: Loader, project: str = "") -> None:
    """Report (on ``c``) each name in ``lists`` (recipe key -> names) that is repeated, names
    no recipe, or leads back to a recipe on the way here (``within`` and ``path``: a cycle);
    load the others with ``loader``, adding their problems. A dependency whose wheel is of
    ``project`` (the dependent's own ``package.name``) is refused: the two wheels would share a
    file name in the wheel directory, and the dependent's would overwrite the one it needs."""
    from packaging.utils import canonicalize_name

    mine = canonicalize_name(project) if project else None
    chain = (*within, path.resolve())
    if len(chain) > MAX_DEPTH + 1:
        c.bad(next(iter(lists)), f"dependencies nested more than {MAX_DEPTH} levels deep "
              f"({' -> '.join(p.stem for p in chain)})")
        return
    loaded: set[Path] = set()
    for key, names in lists.items():
        for i, name in enumerate(names):
            at = f"{key}[{i}]"
            if name in names[:i]:
                c.bad(at, f"{name!r} is named twice")
                continue
            if problem := fsutil.name_problem(f"{name}.toml"):
                c.bad(at, f"{name[:60]!r}{'...' if len(name) > 60 else ''}: {problem}")
                continue
            found = find(name, path)
            if found is None:
                c.bad(at, f"unknown recipe {name!r}" + suggest(name, _available(path))
                      + " (searched the recipe path and this file's directory)")
                continue
            if found.resolve() in chain:
                cycle = [p.stem for p in chain[chain.index(found.resolve()):]]
                c.bad(at, f"a dependency cycle: {' -> '.join([*cycle, name])}")
                continue
            if found.resolve() in loaded:
                continue
            loaded.add(found.resolve())
            try:
                dep = loader(found, chain)
            except RecipeError as exc:
                c.problems += [p for p in exc.problems if p not in c.problems]
                continue
            if isinstance(dep, Recipe) and mine is not None \
                    and canonicalize_name(dep.name) == mine:
                c.bad(at, f"{name!r} builds {dep.name!r}, the project this recipe builds: a "
                      "dependency must be another project")
