"""The one plan path: recipe + target + host + learned memory -> Plan (docs/architecture.md).

``plan(recipe, target, host, learned)`` is what ``build``, ``plan``, ``doctor``, ``verify``,
``stack`` and every nightly cell render through (by ``plan_for``, below), so they agree on the
release line, MAX_JOBS and its reason, and the cache key. It does the two things
``plan.render`` (pure: one recipe on one line) does not:

- **The release line** (docs/releases.md). A recipe without ``[releases]`` renders as it is;
  ``--release NAME`` (``Target.release``) renders that line. Otherwise the lines are tried newest
  first (the order the recipe declares them): each is rendered and judged with
  ``requirements.missing``, the same check ``preflight`` makes, on it and on the recipes it
  depends on, without the ROCm components (a line is picked by its ranges; a missing component
  of the picked line is preflight's to report). The first line with nothing missing wins and
  the plan says why; when none fits, a ToolchainError names what each line is missing, one
  line per line.
- **Dependencies** (``build.depends``, docs/build-env.md): each recipe a plan depends on is
  loaded by name, planned for ``render.dependency_target`` first (recursively, on its own line),
  and passed to ``render``, which folds their cache keys into the dependent's.

``learned`` gives the unit memory earlier builds of a recipe measured, by recipe name;
``plan_for`` reads it from a workspace's cache (``cache.learned.load``), so MAX_JOBS is the
learned figure wherever a plan is made. The plan carries the figure it used (``Plan.learned``,
None: the recipe's ``mem_per_job_gb``); ``Plan.job_mem_gb`` is the memory per compile job MAX_JOBS
was planned with, which the Slurm executor asks for (x jobs). Learning never changes the key.

**The entry point** every command, the nightly, verify, doctor and stack use: ``plan_for(recipe,
target, source, cache)``, where the host source says where the Host comes from: ``Detect`` (this
machine, with the flags that steer detection), ``SavedHost`` (a ``--host FILE``) or a ``Host``
already in hand (a controller's, one detected once for a stack or a run's cells). ``host_for``
is the one place that turns a source into a Host: detection looks for the HIP compiler and the
ROCm components exactly when a plan of the given (recipe, target) pairs needs them (``wants``).
The recipe is passed loaded, because detecting the host needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rocmbuild.cache import learned as learned_store
from rocmbuild.cache.learned import LearnedMemory
from rocmbuild.core.errors import RecipeError, ToolchainError
from rocmbuild.host import detect
from rocmbuild.host.detect import Host
from rocmbuild.plan import render, requirements
from rocmbuild.plan.model import Plan
from rocmbuild.recipe import depends, load
from rocmbuild.recipe.model import Recipe

Learned = Callable[[str], Sequence[LearnedMemory]]
"""The unit memory earlier builds of a recipe measured, by recipe name (``learned.load``)."""


def nothing_learned(name: str) -> Sequence[LearnedMemory]:
    return ()


def _on(recipe: Recipe, release: str | None) -> Recipe:
    return recipe.on_line(release) if release and recipe.releases else recipe


def candidates(recipe: Recipe, release: str | None) -> list[Recipe]:
    """The recipe on each line a plan may use: the forced one, every line, or (no lines) the
    recipe itself. For what must be detected before the line is known (the HIP compiler, the
    ROCm components): what any candidate needs."""
    if release or not recipe.releases:
        return [_on(recipe, release)]
    return [recipe.on_line(name) for name in recipe.releases]


def _direct(recipe: Recipe, variant: str | None) -> list[Recipe]:
    """The recipes ``recipe`` (on its line) names in its depends for ``variant``, loaded
    (load.load checked the names and that they lead to no cycle)."""
    out = []
    for name in depends.of(recipe, variant):
        found = depends.find(name, recipe.path)
        if found is None:  # load.load found it: it went away since
            raise RecipeError([f"{recipe.path.name}: build.depends: recipe {name!r} not found"],
                              hint="it was there when the recipe loaded: check the recipe path")
        out.append(load.load(found))
    return out


def dependencies(recipe: Recipe, target: render.Target) -> list[tuple[Recipe, render.Target]]:
    """Every recipe ``recipe`` (on ``target``'s line, or any line) depends on, recursively, each
    with the target it is rendered for, in build order."""
    dep_target = render.dependency_target(target)
    return [pair for line in candidates(recipe, target.release)
            for dep in _direct(line, target.variant)
            for pair in (*dependencies(dep, dep_target), (dep, dep_target))]


@dataclass(frozen=True)
class Wants:
    """What host detection must look for, for some plans: the HIP compiler, the ROCm components
    (for any line a target may use, or a recipe it depends on), and the Python distributions
    their recipes check (``build.python_requires``)."""

    compiler: bool
    components: bool
    dists: tuple[str, ...]


def wants(pairs: Iterable[tuple[Recipe, render.Target]]) -> Wants:
    """What detecting a host for the plans of ``pairs`` must look for (``Wants``)."""
    compiler = components = False
    dists: dict[str, None] = {}
    for recipe, target in pairs:
        every = [*((r, target) for r in candidates(recipe, target.release)),
                 *dependencies(recipe, target)]
        compiler = compiler or any(render.uses_hip_compiler(r, t.variant) for r, t in every)
        components = components or any(render.uses_rocm_components(r, t.variant)
                                       for r, t in every)
        dists.update(dict.fromkeys(recipe.python_requires))
    return Wants(compiler, components, tuple(dists))


@dataclass(frozen=True)
class Detect:
    """Detect this machine (``host.detect.detect``) for the plans at hand."""

    rocm_path: str | None = None
    """--rocm-path (None: ROCM_PATH, HIP_PATH, a pip ROCm, /opt/rocm, ...)."""
    hip_compiler: str | None = None
    """--hip-compiler: it must exist (unless ``strict_compiler`` is off)."""
    dists: tuple[str, ...] = ()
    """Distributions to record besides the recipes' python_requires (doctor: every recipe's,
    so that its saved host can be judged for any)."""
    fs_root: Path = Path("/")
    """The file system root detection reads (fixture trees)."""
    site_paths: tuple[str, ...] | None = None
    """The site dirs searched for torch and a pip ROCm (None: sys.path)."""
    strict_compiler: bool = True
    """A --hip-compiler that is not there is an error (doctor reports it instead)."""
    everything: bool = False
    """Look for the HIP compiler and the ROCm components whatever the plans need (doctor, which
    reports both)."""


@dataclass(frozen=True)
class SavedHost:
    """A saved host (``--host FILE``: ``rocmbuild doctor --json > host.json`` on the node)."""

    path: Path


HostSource = Detect | SavedHost | Host
"""Where the Host of a plan comes from: this machine, a saved file, or one already in hand."""


def _found(pairs: Iterable[tuple[Recipe, render.Target]], source: HostSource
           ) -> tuple[Host, Wants | None]:
    """The Host of ``source``, and what detecting it looked for (None: nothing was detected,
    so the plans' wants, which read the recipes they depend on, are not worked out)."""
    if isinstance(source, Host):
        return source, None
    if isinstance(source, SavedHost):
        return detect.load(source.path), None
    w = wants(pairs)
    return detect.detect(
        rocm_path=source.rocm_path, hip_compiler=source.hip_compiler,
        want_compiler=w.compiler or source.everything,
        want_components=w.components or source.everything,
        dists=dict.fromkeys([*w.dists, *source.dists]), fs_root=source.fs_root,
        site_paths=None if source.site_paths is None else list(source.site_paths),
        strict_compiler=source.strict_compiler), w


def host_for(pairs: Iterable[tuple[Recipe, render.Target]], source: HostSource) -> Host:
    """The Host of ``source`` for the plans of ``pairs`` (one recipe and target, a stack's
    members, a run's cells): the one place a host is detected or read for a plan. Detection
    looks for what ``wants(pairs)`` says, no more (``Detect.everything``: all of it)."""
    return _found(pairs, source)[0]


def _render(recipe: Recipe, target: render.Target, host: Host, learned: Learned) -> Plan:
    """``render.render`` of ``recipe`` on ``target.release`` with its dependencies' plans."""
    deps = [plan(dep, render.dependency_target(target), host, learned)
            for dep in _direct(_on(recipe, target.release), target.variant)]
    return render.render(recipe, target, host, learned(recipe.path.stem), deps)


def _lacking(plan: Plan, host: Host) -> list[str]:
    """What the host lacks for ``plan`` and for the plans it depends on, ROCm components aside
    (a line is picked by its ranges and its dependencies'; the components are preflight's)."""
    out = requirements.missing(replace(plan, rocm_components=()), host)
    for dep in plan.depends:
        out += [f"for its dependency {dep.recipe}: {m}" for m in _lacking(dep, host)]
    return out


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
         learned: Learned = nothing_learned) -> Plan:
    """The plan of the line this host gets, with its dependencies (the module's docstring)."""
    if not recipe.releases or target.release:
        out = _render(recipe, target, host, learned)
        return replace(out, release_why=f"forced by --release {target.release}") \
            if target.release else out
    passed: list[str] = []
    for name in recipe.releases:
        why = _unavailable(recipe, name, target)
        if why is None:
            candidate = _render(recipe, replace(target, release=name), host, learned)
            lacking = _lacking(candidate, host)
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


@dataclass(frozen=True)
class Planned:
    """``plan_for``'s result: the plan, the Host it was planned for, and what detecting that
    host looked for (the no-op memo detects the same again to check it; None: the host was
    not detected here, a saved one or one in hand)."""

    plan: Plan
    host: Host
    wants: Wants | None


def plan_for(recipe: Recipe, target: render.Target, source: HostSource, cache: Path) -> Planned:
    """The entry point (the module's docstring): the Host of ``source`` (``host_for``), and
    ``plan`` for it with the units earlier builds measured, read from ``cache``
    (``<cache>/learned/<recipe>/``; they apply when they match the variant, archs and
    compiler, else the recipe's ``mem_per_job_gb`` does)."""
    host, w = _found([(recipe, target)], source)
    return Planned(plan(recipe, target, host, lambda name: learned_store.load(cache, name)),
                   host, w)
