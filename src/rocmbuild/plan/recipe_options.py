"""The values of a recipe's ``[options]`` in one plan (docs/options.md): each option that the
plan's variant and source honour gets its default or what ``--opt`` sets; an option set for a
variant or a source that does not honour it is a usage error naming the recipe, the release line
and the source (the fork of flash-attn never passes OPT_DIM to its generator, so
``--opt flash-attn.opt_dim=128`` there would change the cache key and nothing else)."""

from __future__ import annotations

from typing import NoReturn

from rocmbuild.core.errors import UsageError
from rocmbuild.recipe.check import suggest
from rocmbuild.recipe.model import Recipe


def resolve(recipe: Recipe, variant: str, source: str, given: tuple[tuple[str, str], ...],
            flag: str = "--opt") -> tuple[tuple[str, str], ...]:
    """The value of every [options] entry ``variant`` built from ``source`` (``default`` or an
    alternative's name) honours: its default, or what ``given`` sets (checked: a known option
    honoured here, an allowed value), by name. ``flag`` names where ``given`` came from in
    errors (``--opt``, or a nightly.toml key)."""
    name = recipe.path.stem
    mine = {n: o for n, o in recipe.options.items() if o.honoured_by(variant, source)}
    values = {n: o.default for n, o in mine.items()}
    for opt, value in given:
        o = mine.get(opt)
        if o is None:
            _refuse(recipe, opt, variant, source, flag)
        problem = o.problem(value)
        if problem is not None:
            raise UsageError(f"{flag}: {name}.{opt}: {problem}",
                             hint=f"{o.help}; default {o.default!r}")
        values[opt] = value
    return tuple(sorted(values.items()))


def _refuse(recipe: Recipe, opt: str, variant: str, source: str, flag: str) -> NoReturn:
    """The UsageError for ``--opt <recipe>.<opt>`` that this plan does not honour."""
    name = recipe.path.stem
    o = recipe.options.get(opt)
    if o is None:
        raise UsageError(
            f"{flag}: {name} has no option {opt!r}" + suggest(opt, recipe.options, 0.5),
            hint=(f"options of {name}: {', '.join(recipe.options)}" if recipe.options
                  else f"{name} declares no [options]"))
    if o.variants and variant not in o.variants:
        raise UsageError(f"{flag}: {name}.{opt} does not apply to variant {variant!r}",
                         hint=f"it applies to variant(s) {', '.join(o.variants)}")
    line = f" on line {recipe.release}" if recipe.release else ""
    raise UsageError(
        f"{flag}: {name}.{opt} is not honoured by source {source!r}{line}"
        + (f": {o.sources_reason}" if o.sources_reason else ""),
        hint=f"source(s) that honour it{line}: "
        + ", ".join(f"--source {s}" if s != "default" else "the default" for s in o.sources)
        + "; or leave the option out")
