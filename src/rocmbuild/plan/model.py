"""The Plan: a recipe rendered for one target on one host. Every stage reads only this value.

Its parts are typed: the source and patches (the recipe model's ``Source`` and ``Patch``, with
paths made absolute), ``RocmTarget`` (the ROCm version for the label and where it came from, the
root and compiler the build uses), ``BuildHost`` (the interpreter and torch the build compiles
against) and ``ValidateSpec``. ``to_json`` is what ``rocmbuild plan --json`` prints and what the
cache key hashes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts import label
from rocmbuild.cache.learned import LearnedMemory
from rocmbuild.core.config import DATA_ROOT, REPO_ROOT
from rocmbuild.recipe.tables import Download, Hipify, Patch, Source


@dataclass(frozen=True)
class CompilerPin:
    """The HIP compiler a plan compiles with."""

    path: str
    version: str


@dataclass(frozen=True)
class RocmTarget:
    version: str
    """ROCm version in the local label, e.g. ``6.2``."""
    version_from: str
    """Where ``version`` came from (--rocm-version, the ROCm torch, the ROCm root, the recipe)."""
    root: Path | None = None
    version_kind: str = "recipe"
    """``rocm_version_from`` in provenance: ``flag`` (--rocm-version), ``torch`` (the ROCm
    torch's HIP), ``rocm-root`` (the ROCm root the build compiles against) or ``recipe``
    (target.rocm: nothing was detected)."""
    root_kind: str | None = None
    """``rocm`` (an SDK) or ``debian`` (distribution headers only)."""
    root_version: str | None = None
    compiler: CompilerPin | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "version_from": self.version_from,
            "version_kind": self.version_kind,
            "root": str(self.root) if self.root else None,
            "root_kind": self.root_kind,
            "root_version": self.root_version,
            "compiler": ({"path": self.compiler.path, "version": self.compiler.version}
                         if self.compiler else {}),
        }


@dataclass(frozen=True)
class BuildHost:
    """The interpreter and torch a build compiles against (they decide the wheel's ABI)."""

    python: str
    python_tag: str
    platform: str
    torch: str | None
    torch_hip: str | None
    torch_kind: str


@dataclass(frozen=True)
class BuildEnvSpec:
    """The build environment a plan asks for (docs/build-env.md): the recipe's requirements, as
    written, with the recipe keys they come from (for error messages). The exact versions are
    only known once the env exists (``rocmbuild.buildtools.buildenv``); the cache key hashes
    these."""

    requires: tuple[str, ...] = ()
    requires_key: str = "build.build_requires"
    requirements_file: str = ""
    """A file inside the source tree (read after fetch; the source pin pins its content)."""
    requirements_file_key: str = "build.build_requirements_file"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requires": list(self.requires)}
        if self.requirements_file:
            out["requirements_file"] = self.requirements_file
        return out


@dataclass(frozen=True)
class ValidateSpec:
    imports: tuple[str, ...] = ()
    kernel: str = ""
    requires: tuple[str, ...] = ()
    """[validate] requires: extra packages for the validation venv."""
    upstream_tests: tuple[str, ...] = ()
    """The package's own test files (the variant's, else [validate]'s)."""
    upstream_env: tuple[tuple[str, str], ...] = ()
    floors: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    """[validate.floor.<arch>]: (arch, ((key, value), ...)), the keys that are set."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"imports": list(self.imports), "kernel": self.kernel}
        if self.requires:
            out["requires"] = list(self.requires)
        if self.upstream_tests:
            out["upstream"] = self.upstream_json()
        if self.floors:
            out["floor"] = self.floor_json()
        return out

    def floor_json(self) -> dict[str, dict[str, float]]:
        """rocmbuild.json's ``validate_floor``."""
        return {arch: dict(kv) for arch, kv in self.floors}

    def upstream_json(self) -> dict[str, Any]:
        """rocmbuild.json's ``validate_upstream``."""
        return {"tests": list(self.upstream_tests), "env": dict(self.upstream_env)}


@dataclass(frozen=True)
class RocmRuntime:
    """build.rocm_runtime and the [bundle] table: where the wheel's ROCm libraries come from."""

    mode: str = "host"
    """``host`` (the host's ROCm X.Y, stated in METADATA), ``bundle`` (copied into the wheel) or
    ``none`` (no device code, no ROCm needed: the wheel is arch-independent)."""
    libs: tuple[str, ...] = ()
    """bundle: shell patterns of the sonames to copy."""
    data: tuple[str, ...] = ()
    """bundle: globs relative to the ROCm root, copied to the same path under the package."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self.mode == "bundle":
            out.update(libs=list(self.libs), data=list(self.data))
        if self.mode == "none":
            out["arch_independent"] = True
        return out

    @property
    def device_code(self) -> bool:
        """Whether the wheel carries device code for its archs (host, bundle) or none (none):
        the label's ROCm and gfx parts, Requires-External and the audit follow it."""
        return self.mode != "none"


@dataclass(frozen=True)
class Plan:
    recipe: str
    recipe_path: Path
    recipe_sha256: str
    package: str
    variant: str
    source_name: str
    source: Source
    archs: tuple[str, ...]
    gpu_vendor: str
    backend: str
    env: dict[str, str]
    jobs: int
    jobs_reason: str
    mem_per_job_gb: float
    disk_gb: float
    patches: tuple[Patch, ...]
    hipify: tuple[str, ...]
    commands: tuple[tuple[str, ...], ...]
    python_requires: tuple[str, ...]
    host_requires: tuple[str, ...]
    rocm: RocmTarget
    host: BuildHost
    validate: ValidateSpec
    version: str = ""
    runtime_env: dict[str, str] = field(default_factory=dict)
    source_dir: str = ""
    """cmake backend: the CMakeLists.txt directory, relative to the fetched tree ("": its top)."""
    cmake_wheel: str = ""
    """cmake backend: "install" (the staging prefix is packaged) or "pip-wheel" (the last
    command, pip wheel, makes it); "" for pip-wheel recipes."""
    runtime: RocmRuntime = field(default_factory=RocmRuntime)
    rocm_components: tuple[str, ...] = ()
    """ROCm components the host must have under its ROCm root (``rocmbuild.host.components``)."""
    host_requires_reason: str = ""
    """Why host_requires' version bounds are what they are (messages; not in the cache key)."""
    hipify_step: Hipify | None = None
    """[hipify] (or build.hipify, as tool = "command"; its command, filled, is ``hipify``)."""
    pass_env: tuple[str, ...] = ()
    """build.pass_env: host variables the build sees besides ``hostenv.PASS_ENV``."""
    label_torch: bool = False
    """target.label_torch: the tag stage puts ``torch<X.Y>.cxx11abi<true|false>`` from the
    build's torch after the ROCm part of ``local_version``."""
    offline: bool = False
    """build.offline: the build's commands run in a network namespace without network."""
    downloads: tuple[Download, ...] = ()
    """The recipe's [[downloads]] whose ``when`` holds, all pinned by sha256."""
    repair: bool = False
    """build.repair (default: on for the cmake backend): auditwheel repair before tag."""
    env_key: dict[str, str] = field(default_factory=dict)
    """``env`` with ``{jobs}`` left unfilled: what the cache key and the wheel's provenance hold
    (MAX_JOBS follows this host's free memory; it does not change the wheel)."""
    build_tag: str = ""
    """The wheel's PEP 427 build tag (``--build-tag``), "" for none; in the cache key when set."""
    build_env: BuildEnvSpec | None = None
    """None: the recipe declares no build requirements; the build runs with this interpreter."""
    link_units_per_arch: int | None = None
    """build.link_units_per_arch: objects per arch on the final link's command line, for the
    preflight's argv-length check (None: not checked). Not in the cache key or the JSON."""
    options: tuple[tuple[str, str], ...] = ()
    """The recipe's [options] that apply to this variant, with their values (the default or
    ``--opt``), by name; each also sets its variable in ``env``."""
    partial: tuple[str, ...] = ()
    """``name=value`` of each option whose value builds only part of the project
    (``[options.<name>] partial``): the wheel is labelled ``partial`` and never published."""
    unit_count: str = ""
    """build.unit_count: how ``plan --units`` counts compile units ("": not counted)."""
    unit_configure: tuple[str, ...] = ()
    """For unit_count "ninja": the cmake backend's configure command (``{stage_dir}`` to fill),
    which ``plan --units`` runs in the fetched tree. Not in the cache key or the JSON (the
    cmake backend's first command is the same)."""
    depends: tuple[Plan, ...] = ()
    """The plans of the recipes in build.depends (the variant's), rendered by the caller for
    the same target (``render.dependency_target``); the pipeline builds them first. Their keys
    are part of this plan's JSON, so of its cache key."""
    release: str = ""
    """The recipe's release line ([releases.<name>]; "": the recipe has none)."""
    release_why: str = ""
    """Why that line: forced by --release, or the newest whose ranges the host satisfies
    (messages; not in the cache key or the provenance)."""
    learned: LearnedMemory | None = None
    """The measured unit memory MAX_JOBS was planned from (``cache.learned.pick``); None: the
    recipe's ``mem_per_job_gb``. Not in the JSON or the cache key (``jobs_reason`` says it)."""
    cache_key: str = ""

    @property
    def job_mem_gb(self) -> float:
        """Memory per compile job as MAX_JOBS was planned: the learned figure when the units
        were measured, else the recipe's ``mem_per_job_gb`` (what a Slurm cell asks for, x
        jobs)."""
        return self.learned.per_job_gb() if self.learned else self.mem_per_job_gb

    @property
    def job_mem_from(self) -> str:
        """Where ``job_mem_gb`` came from: ``learned`` or ``recipe``."""
        return "learned" if self.learned else "recipe"

    @property
    def uses_torch(self) -> bool:
        """``uses_torch`` of this plan: the build stage probes torch only when it holds."""
        return uses_torch(self.host_requires, self.python_requires, self.build_env,
                          self.label_torch)

    def label(self, torch_part: str = "", build_only: bool = False) -> str:
        """The wheel's local label, the one place it is made (``label.local``):
        ``rocm<X.Y>[.<torch part>][.buildonly][.partial].<gfx>...``. The tag stage passes the
        torch part (``label.torch_part``) when the recipe says ``target.label_torch``, and
        ``build_only`` when that torch is a build-only ROCm torch: known only once the build
        imported its torch. ``partial``: an option value that builds part of the project."""
        marks = [*([label.BUILD_ONLY] if build_only else []),
                 *([label.PARTIAL] if self.partial else [])]
        return label.local(self.rocm.version, self.archs, torch_part,
                           device=self.runtime.device_code, marks=marks)

    @property
    def local_version(self) -> str:
        """The label as planned, without a torch part: what ``rocmbuild plan`` shows and the
        cache key hashes (``to_json``)."""
        return self.label()

    @property
    def short_key(self) -> str:
        return self.cache_key[:16]

    @property
    def pin(self) -> str:
        """The source pin (commit, sha256 or path), shortened for messages."""
        return (self.source.commit or self.source.sha256 or str(display(Path(self.source.path)))
                )[:12]

    def source_json(self) -> dict[str, Any]:
        """The source as the plan, the cache key and the provenance show it: its URL without a
        ``user:password@`` (the pin decides the bytes, not the credentials)."""
        from rocmbuild.core.log import redact

        s = self.source
        out: dict[str, Any] = {"kind": s.kind}
        for key in ("url", "commit", "ref", "sha256"):
            if getattr(s, key):
                out[key] = redact(s.url) if key == "url" else getattr(s, key)
        if s.path:
            out["path"] = str(display(Path(s.path)))
        out["submodules"] = list(s.submodules)
        return out

    def patches_json(self) -> list[dict[str, str]]:
        return [{"file": str(display(p.file)), "sha256": p.sha256, "reason": p.reason,
                 "link": p.link} for p in self.patches]

    def hipify_json(self) -> dict[str, Any]:
        """The [hipify] settings ({} for none, or for a plain command: ``hipify`` says it)."""
        step = self.hipify_step
        if step is None:
            return {}
        # the preprocessor's settings only when set: plans and keys of other recipes stay
        pre = {k: list(v) for k, v in (("defines", step.defines),
                                       ("include_dirs", step.include_dirs)) if v}
        if step.tool == "command" and not step.strict and not pre:
            return {}
        if step.tool == "command":
            return {"tool": step.tool, "strict": step.strict, **pre}
        return {"tool": step.tool, "project_dir": step.project_dir,
                "includes": list(step.includes), "ignores": list(step.ignores),
                "header_include_dirs": list(step.header_include_dirs),
                "out_of_place": step.out_of_place, "strict": step.strict, **pre}
    def depends_json(self) -> list[dict[str, str]]:
        """What the plan (and so the cache key) holds of each dependency: its key."""
        return [{"recipe": d.recipe, "variant": d.variant, "package": d.package,
                 "cache_key": d.cache_key} for d in self.depends]

    def downloads_json(self) -> list[dict[str, Any]]:
        """The [[downloads]], their URLs without a ``user:password@`` (as ``source_json``)."""
        from rocmbuild.core.log import redact

        return [{"name": d.name, "url": redact(d.url), "sha256": d.sha256, "extract": d.extract,
                 "env": d.env, **({"subdir": d.subdir} if d.subdir else {})}
                for d in self.downloads]

    def to_json(self) -> dict[str, Any]:
        h = self.host
        return {
            "recipe": self.recipe,
            "recipe_path": str(display(self.recipe_path)),
            "recipe_sha256": self.recipe_sha256,
            **({"release": self.release} if self.release else {}),
            **({"release_why": self.release_why} if self.release_why else {}),
            "package": self.package,
            "variant": self.variant,
            "source_name": self.source_name,
            "source": self.source_json(),
            "archs": list(self.archs),
            "gpu_vendor": self.gpu_vendor,
            "backend": self.backend,
            "env": dict(self.env),
            "jobs": self.jobs,
            "jobs_reason": self.jobs_reason,
            "mem_per_job_gb": self.mem_per_job_gb,
            "disk_gb": self.disk_gb,
            "patches": self.patches_json(),
            "hipify": list(self.hipify),
            "commands": [list(c) for c in self.commands],
            "python_requires": list(self.python_requires),
            "host_requires": list(self.host_requires),
            "host_requires_reason": self.host_requires_reason,
            "rocm_components": list(self.rocm_components),
            "rocm": self.rocm.to_json(),
            "local_version": self.local_version,
            "host": {"python": h.python, "python_tag": h.python_tag, "platform": h.platform,
                     "torch": h.torch, "torch_hip": h.torch_hip, "torch_kind": h.torch_kind},
            "validate": self.validate.to_json(),
            "version": self.version,
            "runtime_env": dict(self.runtime_env),
            **({"source_dir": self.source_dir} if self.source_dir else {}),
            **({"cmake_wheel": self.cmake_wheel} if self.cmake_wheel == "pip-wheel" else {}),
            **({"hipify_step": self.hipify_json()} if self.hipify_json() else {}),
            "pass_env": list(self.pass_env),
            "label_torch": self.label_torch,
            "rocm_runtime": self.runtime.to_json(),
            "offline": self.offline,
            **({"downloads": self.downloads_json()} if self.downloads else {}),
            **({"repair": True} if self.repair else {}),
            **({"build_tag": self.build_tag} if self.build_tag else {}),
            **({"build_env": self.build_env.to_json()} if self.build_env else {}),
            **({"options": dict(self.options)} if self.options else {}),
            **({"unit_count": self.unit_count} if self.unit_count else {}),
            **({"depends": self.depends_json()} if self.depends else {}),
            "cache_key": self.cache_key,
        }

    def inputs_json(self) -> dict[str, Any]:
        """``to_json`` without what follows this host's state or the recipe file's place
        (MAX_JOBS and its reason, the recipe path, messages): what the wheel's provenance
        records, so that two builds of the same inputs write the same bytes."""
        out = self.to_json()
        for volatile in ("jobs", "jobs_reason", "recipe_path", "host_requires_reason"):
            out.pop(volatile)
        out.pop("release_why", None)
        if self.env_key:
            out["env"] = dict(self.env_key)
        return out


TORCH_NAMES = frozenset({"torch", "rocm-torch"})
"""Requirement names that mean torch: ``host_requires`` (``rocm-torch`` is the host check's
name for a ROCm torch), ``python_requires``, ``build_requires``."""


def uses_torch(host_requires: tuple[str, ...], python_requires: tuple[str, ...],
               build_env: BuildEnvSpec | None, label_torch: bool) -> bool:
    """Whether a build uses torch (the build stage then imports it for its version and C++ ABI
    flag, and the plan and provenance record it): ``label_torch``, or torch named in
    host_requires, python_requires or the build env's requirements. A build requirements file
    is read only after fetch, so a plan with one counts as using torch (it may name it).
    ``Plan.uses_torch`` asks this of a plan; ``render`` asks it before planning, so that a
    plan that does not use torch is planned as on a host without torch (docs/build-env.md)."""
    if label_torch or (build_env is not None and build_env.requirements_file):
        return True
    names = (*host_requires, *python_requires, *(build_env.requires if build_env else ()))
    for req in names:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() in TORCH_NAMES:
            return True
    return False


def display(p: Path) -> Path:
    """A path among the shipped data (recipes/, patches/, probes/) or inside this repository,
    relative to it (stable across checkouts and installs); else as is."""
    for root in (DATA_ROOT, REPO_ROOT):
        try:
            return p.resolve().relative_to(root)
        except ValueError:
            continue
    return p
