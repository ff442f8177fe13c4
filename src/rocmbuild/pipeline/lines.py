"""Which release line of a recipe a host gets: the one place that decides (docs/releases.md).

``plan(recipe, target, host)`` is what ``build``, ``plan``, ``doctor``, ``verify`` and the nightly
render through. A recipe without ``[releases]`` renders as it is. ``--release NAME``
(``Target.release``) renders that line. Otherwise the lines are tried newest first (the order
the recipe declares them): each is rendered (``recipe.render``, pure) and judged with
``requirements.missing``, the same check ``preflight`` makes, without the ROCm components (a line
is picked by its ranges; a missing component of the picked line is then preflight's to report).
The first line with nothing missing wins, and the plan says why; when none fits, a
ToolchainError names what each line is missing, one line per line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rocmbuild.cache.learned import LearnedMemory
from rocmbuild.core.errors import ToolchainError
from rocmbuild.host.detect import Host
from rocmbuild.pipeline import requirements
from rocmbuild.recipe import render
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.plan import Plan


def candidates(recipe: Recipe, release: str | None) -> list[Recipe]:
    """The recipe on each line a plan may use: the forced one, every line, or (no lines) the
    recipe itself. For what must be detected before the line is known (the HIP compiler, the
    ROCm components): what any candidate needs."""
    if release or not recipe.releases:
        return [recipe.on_line(release) if release else recipe]
    return [recipe.on_line(name) for name in recipe.releases]


def wants(recipe: Recipe, target: render.Target) -> tuple[bool, bool]:
    """(HIP compiler, ROCm components): whether detection must look for them for this target."""
    lines = candidates(recipe, target.release)
    return (any(render.uses_hip_compiler(r, target.variant) for r in lines),
            any(render.uses_rocm_components(r, target.variant) for r in lines))


def _unavailable(recipe: Recipe, name: str, target: render.Target) -> str | None:
    """Why line ``name`` cannot give this target at all (a variant it does not build, a source
    it does not have), whatever the host."""
    line, on = recipe.releases[name], recipe.on_line(name)
    variant = target.variant or on.default_variant
    if line.offers is not None and variant not in line.offers:
        return (f"does not build variant {variant!r}"
                + (f" ({line.offers_reason})" if line.offers_reason else ""))
    if target.source != "default" and target.source not in on.alternatives:
        return f"has no source {target.source!r}"
    return None


def plan(recipe: Recipe, target: render.Target, host: Host,
         learned: Sequence[LearnedMemory] = ()) -> Plan:
    """The plan of the line this host gets (see the module's docstring)."""
    if not recipe.releases or target.release:
        out = render.render(recipe, target, host, learned)
        return replace(out, release_why=f"forced by --release {target.release}") \
            if target.release else out
    passed: list[str] = []
    for name in recipe.releases:
        why = _unavailable(recipe, name, target)
        if why is None:
            candidate = render.render(recipe, replace(target, release=name), host, learned)
            lacking = requirements.missing(replace(candidate, rocm_components=()), host)
            if not lacking:
                ranges = ", ".join(candidate.host_requires) or "no host ranges"
                return replace(candidate, release_why=(
                    f"newest line whose ranges this host satisfies: {ranges}"
                    + (f" (newer: {'; '.join(passed)})" if passed else "")))
            why = "needs " + "; and ".join(lacking)
        passed.append(f"{name} {why}")
    raise ToolchainError(
        f"{recipe.path.stem}: no release line fits this host:\n"
        + "\n".join(f"  {p}" for p in passed),
        hint="install what one line needs, or force one with --release NAME (lines, newest "
        f"first: {', '.join(recipe.releases)})")
