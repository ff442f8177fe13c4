"""A recipe's plan with the plans of the recipes it depends on (``build.depends``): each
dependency loaded by name and rendered for ``render.dependency_target`` first, recursively, and
passed to ``render.render``, which stays pure and folds their cache keys into the dependent's.
Every caller that renders a recipe for a build (build, plan, nightly, verify, doctor) renders
through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rocmbuild.cache.learned import LearnedMemory
from rocmbuild.core.errors import RecipeError
from rocmbuild.host.detect import Host
from rocmbuild.recipe import depends, load, render
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.plan import Plan

Learned = Callable[[str], Sequence[LearnedMemory]]
"""The unit memory earlier builds of a recipe measured, by recipe name (``learned.load``)."""


def _direct(recipe: Recipe, variant: str | None) -> list[Recipe]:
    """The recipes ``recipe`` names in its depends for ``variant``, loaded (load.load checked
    the names and that they lead to no cycle)."""
    out = []
    for name in depends.of(recipe, variant):
        found = depends.find(name, recipe.path)
        if found is None:  # load.load found it: it went away since
            raise RecipeError([f"{recipe.path.name}: build.depends: recipe {name!r} not found"],
                              hint="it was there when the recipe loaded: check the recipe path")
        out.append(load.load(found))
    return out


def dependencies(recipe: Recipe, target: render.Target) -> list[tuple[Recipe, render.Target]]:
    """Every recipe ``recipe`` depends on for ``target``, recursively, each with the target it
    is rendered for, in build order."""
    dep_target = render.dependency_target(target)
    return [pair for dep in _direct(recipe, target.variant)
            for pair in (*dependencies(dep, dep_target), (dep, dep_target))]


def wants(recipe: Recipe, target: render.Target) -> tuple[bool, bool]:
    """(HIP compiler, ROCm components): whether host detection must look for them, for this
    recipe or one it depends on."""
    every = [(recipe, target), *dependencies(recipe, target)]
    return (any(render.uses_hip_compiler(r, t.variant) for r, t in every),
            any(render.uses_rocm_components(r, t.variant) for r, t in every))


def plan(recipe: Recipe, target: render.Target, host: Host, learned: Learned | None = None
         ) -> Plan:
    """``render.render`` of ``recipe`` with its dependencies' plans, rendered first."""
    deps = [plan(dep, render.dependency_target(target), host, learned)
            for dep in _direct(recipe, target.variant)]
    measured = learned(recipe.path.stem) if learned is not None else ()
    return render.render(recipe, target, host, measured, deps)
