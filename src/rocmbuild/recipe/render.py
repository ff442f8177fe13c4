"""Render a recipe for a target into a Plan. Every later stage reads only the Plan."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rocmbuild import __version__, arch, compiler, jobs, toolchain
from rocmbuild.config import REPO_ROOT, SOURCE_TREE_IGNORE
from rocmbuild.errors import ToolchainError, UsageError
from rocmbuild.recipe.model import Patch, Recipe, Source


@dataclass(frozen=True)
class Target:
    """What the user asked for on the command line."""

    arch: str = "native"
    variant: str | None = None
    source: str = "default"
    jobs: int | None = None
    rocm_version: str | None = None
    rocm_path: str | None = None
    gpu_vendor: str = "amd"
    hip_compiler: str | None = None


@dataclass(frozen=True)
class Plan:
    recipe: str
    recipe_path: str
    recipe_sha256: str
    package: str
    variant: str
    source_name: str
    source: dict[str, Any]
    archs: tuple[str, ...]
    gpu_vendor: str
    backend: str
    env: dict[str, str]
    jobs: int
    jobs_reason: str
    mem_per_job_gb: float
    disk_gb: float
    patches: tuple[dict[str, str], ...]
    hipify: tuple[str, ...]
    commands: tuple[tuple[str, ...], ...]
    python_requires: tuple[str, ...]
    host_requires: tuple[str, ...]
    rocm: dict[str, Any]
    local_version: str
    host: dict[str, Any]
    validate: dict[str, Any]
    version: str = ""
    runtime_env: dict[str, str] = field(default_factory=dict)
    cache_key: str = field(default="")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["archs"] = list(self.archs)
        d["hipify"] = list(self.hipify)
        d["commands"] = [list(c) for c in self.commands]
        d["patches"] = list(self.patches)
        return d

    @property
    def short_key(self) -> str:
        return self.cache_key[:16]


def _fill(template: str, values: Mapping[str, str], where: str) -> str:
    try:
        return template.format_map(values)
    except KeyError as exc:  # a placeholder that needs something the host does not have
        raise ToolchainError(
            f"{where}: {{{exc.args[0]}}} cannot be resolved on this host",
            hint="run `rocmbuild doctor` to see what is missing",
        ) from exc


def _applies(patch: Patch, facts: Mapping[str, tuple[str, ...]]) -> bool:
    return all(set(values) & set(facts[key]) for key, values in patch.when)


def render(recipe: Recipe, target: Target) -> Plan:
    if target.variant and recipe.variants and target.variant not in recipe.variants:
        raise UsageError(
            f"--variant: {recipe.path.stem} has no variant {target.variant!r}",
            hint=f"variants: {', '.join(recipe.variants)}",
        )
    if not recipe.variants and target.variant not in (None, "default"):
        raise UsageError(
            f"--variant: {recipe.path.stem} has no variants", hint="leave --variant out"
        )
    variant_name = target.variant or recipe.default_variant
    variant = recipe.variants.get(variant_name)
    if target.source == "default":
        source: Source = recipe.source
    elif target.source in recipe.alternatives:
        source = recipe.alternatives[target.source]
    else:
        raise UsageError(
            f"--source: {recipe.path.stem} has no source {target.source!r}",
            hint="sources: " + ", ".join(["default", *recipe.alternatives]),
        )
    if target.gpu_vendor not in ("amd", "nvidia"):
        raise UsageError(
            f"--gpu-vendor: {target.gpu_vendor!r} is not amd or nvidia",
            hint="amd is the default; nvidia only for checking HIP-portable code "
            "(Triton) on NVIDIA GPUs",
        )
    archs = arch.parse_archs(
        target.arch, recipe.supported_archs, f"{recipe.path.name}: arch.supported"
    )
    mem = variant.mem_per_job_gb if variant and variant.mem_per_job_gb else recipe.mem_per_job_gb
    disk = variant.disk_gb if variant and variant.disk_gb else recipe.disk_gb
    host_requires = (
        variant.host_requires
        if variant and variant.host_requires is not None
        else recipe.host_requires
    )
    job_plan = jobs.plan_jobs(mem, target.jobs)
    root = toolchain.find_rocm_root(target.rocm_path)
    torch = toolchain.torch_info()
    if target.rocm_version:
        rocm_version, rocm_from = target.rocm_version, "--rocm-version"
    elif torch.hip_short:
        rocm_version, rocm_from = torch.hip_short, f"torch {torch.version} (HIP {torch.hip})"
    elif root is not None and root.kind == "rocm" and root.version:
        rocm_version = ".".join(root.version.split(".")[:2])
        rocm_from = f"ROCm root {root.path}"
    else:
        rocm_version, rocm_from = recipe.rocm_default, f"{recipe.path.name}: target.rocm"
    if not re.fullmatch(r"\d+(\.\d+)*", rocm_version):
        raise UsageError(
            f"--rocm-version: {rocm_version!r} is not a version like 6.2",
            hint="e.g. --rocm-version 6.2",
        )

    values = {
        "archs": ";".join(archs),
        "archs_comma": ",".join(archs),
        "jobs": str(job_plan.jobs),
        "rocm_version": rocm_version,
    }
    if root is not None and root.kind == "rocm":
        values["rocm_path"] = str(root.path)
    if recipe.backend == "cmake" and "hip-compiler" not in host_requires:
        host_requires = (*host_requires, "hip-compiler")
    uses_compiler = recipe.backend == "cmake" or any(
        "{hip_" in v for _, v in (*recipe.env, *recipe.arch_env, *(variant.env if variant else ()))
    )
    compiler_versions: dict[str, str] = {}
    if uses_compiler or "hip-compiler" in host_requires:
        values.update(_compiler_values(compiler_versions, target.hip_compiler))

    env: dict[str, str] = {"HIP_PLATFORM": "amd"}  # /usr/local/cuda makes HIP tools pick nvidia
    if root is not None and root.kind == "rocm":
        env["ROCM_PATH"] = str(root.path)
        env["HIP_PATH"] = str(root.path)
    keyed_env: dict[str, str] = dict(env)
    key_values = dict(values, jobs="{jobs}")
    for where, pairs in (
        ("build.env", recipe.env),
        ("arch.env", recipe.arch_env),
        (f"variants.{variant_name}.env", variant.env if variant else ()),
    ):
        for name, template in pairs:
            env[name] = _fill(template, values, f"{recipe.path.name}: {where}.{name}")
            keyed_env[name] = _fill(template, key_values, f"{recipe.path.name}: {where}.{name}")

    facts = {
        "variant": (variant_name,),
        "source": (target.source,),
        "arch": tuple(a.split(":")[0] for a in archs),  # gfx90a:xnack+ is a gfx90a
        "gpu_vendor": (target.gpu_vendor,),
    }
    patches = tuple(
        {"file": str(_rel(p.file)), "sha256": p.sha256, "reason": p.reason, "link": p.link}
        for p in recipe.patches
        if _applies(p, facts)
    )
    hipify = tuple(_fill(a, values, f"{recipe.path.name}: build.hipify") for a in recipe.hipify)
    commands = _commands(recipe, values)
    if recipe.backend == "cmake":
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = values["jobs"]
        keyed_env["CMAKE_BUILD_PARALLEL_LEVEL"] = "{jobs}"
    local = f"rocm{rocm_version}." + ".".join(a.split(":")[0] for a in archs)
    host = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "python_tag": f"cp{sys.version_info.major}{sys.version_info.minor}",
        "platform": sys.platform,
        "torch": torch.version or None,
        "torch_hip": torch.hip,
        "torch_kind": torch.kind,
    }
    source_json = {k: v for k, v in asdict(source).items() if v not in ("", ())}
    source_json["submodules"] = list(source.submodules)
    if source.kind == "path":
        source_json["path"] = str(_rel((recipe.path.parent / source.path).resolve()))
    plan = Plan(
        recipe=recipe.path.stem,
        recipe_path=str(_rel(recipe.path)),
        recipe_sha256=recipe.raw_sha256,
        package=recipe.name,
        variant=variant_name,
        source_name=target.source,
        source=source_json,
        archs=archs,
        gpu_vendor=target.gpu_vendor,
        backend=recipe.backend,
        env=env,
        jobs=job_plan.jobs,
        jobs_reason=job_plan.reason,
        mem_per_job_gb=mem,
        disk_gb=disk,
        patches=patches,
        hipify=hipify,
        commands=commands,
        python_requires=recipe.python_requires,
        host_requires=host_requires,
        rocm={
            "version": rocm_version,
            "version_from": rocm_from,
            "root": str(root.path) if root else None,
            "root_kind": root.kind if root else None,
            "root_version": root.version if root else None,
            "compiler": compiler_versions,
        },
        local_version=local,
        host=host,
        validate={"imports": list(recipe.validate_imports), "kernel": recipe.validate_kernel},
        version=recipe.version,
        runtime_env={k: _fill(v, values, f"{recipe.path.name}: variants.{variant_name}."
                              f"runtime_env.{k}") for k, v in (variant.runtime_env if variant
                                                                else ())},
    )
    key_material = plan.to_json()
    for volatile in ("jobs", "jobs_reason", "recipe_path", "cache_key"):
        key_material.pop(volatile)
    key_material["env"] = keyed_env
    key_material["rocm"] = {k: v for k, v in plan.rocm.items() if k != "version_from"}
    key_material["rocmbuild"] = __version__
    if source.kind == "path":  # a local tree is pinned by its content
        key_material["source"]["tree_sha256"] = _tree_digest(recipe.path.parent / source.path)
    blob = json.dumps(key_material, sort_keys=True).encode()
    return replace(plan, cache_key=hashlib.sha256(blob).hexdigest())


def _commands(recipe: Recipe, values: Mapping[str, str]) -> tuple[tuple[str, ...], ...]:
    """The backend's commands. ``python`` is this interpreter; ``{wheel_tmp}`` and
    ``{stage_dir}`` are directories the build stage makes inside the tree."""
    if recipe.backend == "cmake":
        where = f"{recipe.path.name}: build.cmake_args"
        configure = [
            "cmake", "-S", ".", "-B", "_rocmbuild_cmake", "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_HIP_PLATFORM=amd",
            f"-DCMAKE_HIP_ARCHITECTURES={values['archs']}",
            f"-DCMAKE_HIP_COMPILER={_fill('{hip_compiler}', values, where)}",
            f"-DCMAKE_HIP_FLAGS={values.get('hip_flags', '')}",
            "-DCMAKE_INSTALL_PREFIX={stage_dir}",
            *(_fill(a, values, where) for a in recipe.cmake_args),
        ]
        return (
            tuple(configure),
            ("cmake", "--build", "_rocmbuild_cmake"),  # -j from CMAKE_BUILD_PARALLEL_LEVEL
            ("cmake", "--install", "_rocmbuild_cmake"),
        )
    wheel_cmd = ["python", "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir"]
    if recipe.no_build_isolation:
        wheel_cmd.append("--no-build-isolation")
    return (tuple([*wheel_cmd, *recipe.pip_args, "-w", "{wheel_tmp}", "."]),)


def _rel(p: Path) -> Path:
    try:
        return p.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return p


def _tree_digest(root: Path) -> str:
    """The content of a local source tree, as the fetch stage will copy it."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if f.is_file() and not any(fnmatch.fnmatch(part, pat) for part in rel.parts
                                   for pat in SOURCE_TREE_IGNORE):
            h.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _compiler_values(versions: dict[str, str], explicit: str | None) -> dict[str, str]:
    """{hip_compiler} and {hip_flags} from the HIP compiler detection (rocmbuild.compiler)."""
    try:
        found = compiler.detect(explicit)
    except ToolchainError:
        if explicit:  # asked for by name: say what is wrong with it
            raise
        return {}
    versions.update({"path": str(found.path), "version": str(found.version)})
    return {"hip_compiler": str(found.path), "hip_flags": " ".join(found.flags)}
