"""Finding recipes: by name on the search path (``--recipes``, ROCMBUILD_RECIPE_PATH, the
bundled recipes/) or by path, what a search depended on (for the no-op rebuild's memo), and the
list of every available recipe (``rocmbuild recipes``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.core import config, fsutil
from rocmbuild.core.errors import UsageError
from rocmbuild.recipe.check import suggest
from rocmbuild.recipe.load import load


def find_recipe(name: str) -> Path:
    """A recipe by name (searched in config.recipe_dirs()) or by path."""
    if problem := fsutil.name_problem(name):
        raise UsageError(f"recipe {name[:60]!r}...: {problem}" if len(name) > 60
                         else f"recipe {name!r}: {problem}",
                         hint="give a recipe's name or the path of its .toml file")
    p = Path(name)
    is_dir = UsageError(f"recipe {name}: is a directory, not a recipe file",
                        hint=f"name the .toml file inside it, e.g. {p / 'recipe.toml'}")
    if _names_a_path(name):
        if p.is_dir():
            raise is_dir
        if not p.exists():
            raise UsageError(f"recipe file {name} not found", hint="check the path")
        if not p.is_file():
            raise UsageError(f"recipe {name}: not a regular file", hint="give a .toml file")
        return p
    for d in config.recipe_dirs():
        cand = d / f"{name}.toml"
        if cand.is_file():
            return cand
    if p.is_dir():  # a bare name that is no recipe but a directory here
        raise is_dir
    names = available()
    raise UsageError(
        f"unknown recipe {name!r}" + suggest(name, names),
        hint="available: " + (", ".join(names) or "none") + " (`rocmbuild recipes`)",
    )


def _names_a_path(name: str) -> bool:
    return Path(name).suffix == ".toml" or "/" in name or name in (".", "..")


def search_inputs(name: str, found: Path) -> tuple[list[Path], list[Path]]:
    """What ``find_recipe(name)`` depended on besides the file ``found``: the candidates it
    looked at before it (absent then) and the directories that had to exist (``--recipes``,
    and for a name ROCMBUILD_RECIPE_PATH's). ``rocmbuild.commands.noop_memo`` checks both again."""
    if _names_a_path(name):
        return [], list(config.flag_recipe_dirs())
    dirs = config.recipe_dirs()
    before: list[Path] = []
    for d in dirs:
        cand = d / f"{name}.toml"
        if cand == found:
            break
        before.append(cand)
    return before, dirs[:-1]


def available() -> list[str]:
    names: list[str] = []
    for d in config.recipe_dirs():
        if d.is_dir():
            names += [p.stem for p in sorted(d.glob("*.toml")) if p.stem not in names]
    return names


@dataclass(frozen=True)
class RecipeInfo:
    """One line of ``rocmbuild recipes``."""

    name: str
    package: str
    description: str
    default_variant: str
    variants: dict[str, str]
    """Variant name -> description."""
    sources: tuple[str, ...]
    archs: tuple[str, ...]
    path: str
    options: dict[str, str] = field(default_factory=dict)
    """Option name -> its default (``--opt <recipe>.<name>=...``)."""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "sources": list(self.sources), "archs": list(self.archs)}


def list_recipes() -> list[RecipeInfo]:
    """Every available recipe, loaded (a bad one raises RecipeError)."""
    out = []
    for name in available():
        recipe = load(find_recipe(name))
        out.append(
            RecipeInfo(
                name=name,
                package=recipe.name,
                description=recipe.description,
                default_variant=recipe.default_variant,
                variants={v.name: v.description for v in recipe.variants.values()},
                sources=("default", *recipe.alternatives),
                archs=recipe.supported_archs,
                path=str(recipe.path),
                options={n: o.default for n, o in recipe.options.items()},
            )
        )
    return out
