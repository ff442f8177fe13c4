"""The Plan: a recipe rendered for one target on one host. Every stage reads only this value.

Its parts are typed: the source and patches (the recipe model's ``Source`` and ``Patch``, with
paths made absolute), ``RocmTarget`` (the ROCm version for the label and where it came from, the
root and compiler the build uses), ``BuildHost`` (the interpreter and torch the build compiles
against) and ``ValidateSpec``.

Each Plan field (and each ``RocmTarget`` field) says once, with ``part`` or ``internal``, whether
it is in the JSON ``rocmbuild plan --json`` prints (``Plan.to_json``), in the wheel's provenance
(``Plan.inputs_json``, rocmbuild.json's ``plan``) and in the cache key (``in_key`` of the
provenance, hashed by ``plan.key``); ``record`` and ``in_key`` derive those from the fields.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts import label
from rocmbuild.cache.learned import LearnedMemory
from rocmbuild.core.config import DATA_ROOT, REPO_ROOT
from rocmbuild.recipe.tables import Download, Hipify, Patch, Source


@dataclass(frozen=True)
class Part:
    """Where a field of the plan (or of its ``RocmTarget``) goes, declared on the field with
    ``part`` or ``internal``: ``record`` derives the JSON and the provenance from it, ``in_key``
    the cache key's material. The key holds nothing the provenance does not (``verify``
    recomputes a wheel's key from its provenance), and the provenance nothing the JSON does
    not."""

    json: bool = True
    """In ``rocmbuild plan --json`` (``Plan.to_json``)."""
    provenance: bool = True
    """In the wheel's provenance, rocmbuild.json's ``plan`` (``Plan.inputs_json``)."""
    key: bool = True
    """In the cache key (``plan.key``)."""
    name: str = ""
    """Its name in the JSON ("": the field's)."""
    optional: bool = False
    """Left out while its value is empty (the keys of plans that never set it stay as they
    were)."""
    show: Callable[[Any], Any] | None = None
    """Its JSON value, from the owner (None: the field's value, tuples as lists)."""
    recorded: Callable[[Any], Any] | None = None
    """Its value in the provenance and the key, where it differs from the JSON's."""
    nested: type | None = None
    """A dataclass whose own fields say where they go (``RocmTarget``)."""
    then: tuple[str, ...] = ()
    """Properties of the owner recorded right after it, under their own names, where it is."""

    def __post_init__(self) -> None:
        if (self.key and not self.provenance) or (self.provenance and not self.json):
            raise ValueError("a Part in the key must be in the provenance, one in the "
                             "provenance in the JSON")


def part(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None,
         **where: Any) -> Any:
    """A field with its ``Part`` (``where``: the Part's settings; by default in the JSON, the
    provenance and the key)."""
    meta = {"part": Part(**where)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def internal(default: Any = dataclasses.MISSING, *,
             factory: Callable[[], Any] | None = None) -> Any:
    """A field no record holds: not in the JSON, the provenance or the key."""
    return part(default, factory=factory, json=False, provenance=False, key=False)


def record(obj: Any, view: str = "json") -> dict[str, Any]:
    """The entries of ``obj`` (a Plan, a RocmTarget) that ``view`` holds, ``json`` or
    ``provenance``, in field order, as its fields' ``Part`` say."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        p: Part = f.metadata["part"]
        if not getattr(p, view):
            continue
        if p.nested is not None:
            value = record(getattr(obj, f.name), view)
        elif view == "provenance" and p.recorded is not None:
            value = p.recorded(obj)
        else:
            value = p.show(obj) if p.show is not None else _plain(getattr(obj, f.name))
        if value or not p.optional:
            out[p.name or f.name] = value
        out.update((name, getattr(obj, name)) for name in p.then)
    return out


def _plain(value: Any) -> Any:
    """``value`` as JSON data: tuples as lists, dicts copied."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return dict(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class CompilerPin:
    """The HIP compiler a plan compiles with."""

    path: str
    version: str


@dataclass(frozen=True, kw_only=True)
class RocmTarget:
    version: str = part()
    """ROCm version in the local label, e.g. ``6.2``."""
    version_from: str = part(key=False)
    """Where ``version`` came from (--rocm-version, the ROCm torch, the ROCm root, the recipe);
    how it was found decides nothing about the wheel: not in the cache key."""
    version_kind: str = part("recipe", key=False)
    """``rocm_version_from`` in provenance: ``flag`` (--rocm-version), ``torch`` (the ROCm
    torch's HIP), ``rocm-root`` (the ROCm root the build compiles against) or ``recipe``
    (target.rocm: nothing was detected). Not in the cache key."""
    root: Path | None = part(None, show=lambda r: str(r.root) if r.root else None)
    root_kind: str | None = part(None)
    """``rocm`` (an SDK) or ``debian`` (distribution headers only)."""
    root_version: str | None = part(None)
    compiler: CompilerPin | None = part(
        None, show=lambda r: dataclasses.asdict(r.compiler) if r.compiler else {})

    def to_json(self) -> dict[str, Any]:
        return record(self)


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


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The fields in the order ``rocmbuild plan --json`` shows them; each says with ``part``
    whether it is in the JSON, the wheel's provenance and the cache key (``internal``: none)."""

    recipe: str = part()
    recipe_path: Path = part(show=lambda p: str(display(p.recipe_path)), key=False,
                             provenance=False)
    """Where the recipe file lies (not in the key or the provenance: the same recipe anywhere)."""
    recipe_sha256: str = part()
    release: str = part("", optional=True)
    """The recipe's release line ([releases.<name>]; "": the recipe has none)."""
    release_why: str = part("", optional=True, key=False, provenance=False)
    """Why that line: forced by --release, or the newest whose ranges the host satisfies
    (messages; not in the cache key or the provenance)."""
    package: str = part()
    variant: str = part()
    source_name: str = part()
    source: Source = part(show=lambda p: p.source_json())
    archs: tuple[str, ...] = part()
    gpu_vendor: str = part()
    backend: str = part()
    env: dict[str, str] = part(recorded=lambda p: dict(p.env_key or p.env))
    """The build's env; the provenance and the cache key hold ``env_key``."""
    env_key: dict[str, str] = internal(factory=dict)
    """``env`` with ``{jobs}`` left unfilled: what the cache key and the wheel's provenance hold
    (MAX_JOBS follows this host's free memory; it does not change the wheel)."""
    jobs: int = part(key=False, provenance=False)
    jobs_reason: str = part(key=False, provenance=False)
    """MAX_JOBS and why: this host's state, not the wheel's (not in the key or the provenance)."""
    mem_per_job_gb: float = part()
    disk_gb: float = part()
    link_units_per_arch: int | None = internal(None)
    """build.link_units_per_arch: objects per arch on the final link's command line, for the
    preflight's argv-length check (None: not checked). Not in the cache key or the JSON."""
    patches: tuple[Patch, ...] = part(show=lambda p: p.patches_json())
    hipify: tuple[str, ...] = part()
    commands: tuple[tuple[str, ...], ...] = part()
    python_requires: tuple[str, ...] = part()
    host_requires: tuple[str, ...] = part()
    host_requires_reason: str = part("", key=False, provenance=False)
    """Why host_requires' version bounds are what they are (messages; not in the cache key)."""
    rocm_components: tuple[str, ...] = part(())
    """ROCm components the host must have under its ROCm root (``rocmbuild.host.components``)."""
    rocm: RocmTarget = part(nested=RocmTarget, then=("local_version",))
    """The ROCm target (its own fields say what the key holds), then the label as planned."""
    host: BuildHost = part(show=lambda p: dataclasses.asdict(p.host))
    validate: ValidateSpec = part(show=lambda p: p.validate.to_json())
    version: str = part("")
    runtime_env: dict[str, str] = part(factory=dict)
    source_dir: str = part("", optional=True)
    """cmake backend: the CMakeLists.txt directory, relative to the fetched tree ("": its top)."""
    cmake_wheel: str = part("", optional=True, show=lambda p: p.cmake_wheel
                            if p.cmake_wheel == "pip-wheel" else "")
    """cmake backend: "install" (the staging prefix is packaged) or "pip-wheel" (the last
    command, pip wheel, makes it); "" for pip-wheel recipes. Shown only when "pip-wheel"."""
    hipify_step: Hipify | None = part(None, optional=True, show=lambda p: p.hipify_json())
    """[hipify] (or build.hipify, as tool = "command"; its command, filled, is ``hipify``)."""
    pass_env: tuple[str, ...] = part(())
    """build.pass_env: host variables the build sees besides ``hostenv.PASS_ENV``."""
    label_torch: bool = part(False)
    """target.label_torch: the tag stage puts ``torch<X.Y>.cxx11abi<true|false>`` from the
    build's torch after the ROCm part of ``local_version``."""
    runtime: RocmRuntime = part(factory=RocmRuntime, name="rocm_runtime",
                                show=lambda p: p.runtime.to_json())
    offline: bool = part(False, key=False)
    """build.offline: the build's commands run in a network namespace without network (where
    the build ran decides nothing about the wheel's bytes: not in the cache key)."""
    downloads: tuple[Download, ...] = part((), optional=True, show=lambda p: p.downloads_json())
    """The recipe's [[downloads]] whose ``when`` holds, all pinned by sha256."""
    repair: bool = part(False, optional=True)
    """build.repair (default: on for the cmake backend): auditwheel repair before tag."""
    build_tag: str = part("", optional=True)
    """The wheel's PEP 427 build tag (``--build-tag``), "" for none; in the cache key when set."""
    build_env: BuildEnvSpec | None = part(None, optional=True, show=lambda p: p.build_env
                                          and p.build_env.to_json())
    """None: the recipe declares no build requirements; the build runs with this interpreter."""
    options: tuple[tuple[str, str], ...] = part((), optional=True, show=lambda p: dict(p.options))
    """The recipe's [options] that apply to this variant, with their values (the default or
    ``--opt``), by name; each also sets its variable in ``env``."""
    partial: tuple[str, ...] = internal(())
    """``name=value`` of each option whose value builds only part of the project
    (``[options.<name>] partial``): the wheel is labelled ``partial`` and never published
    (recorded through ``local_version``)."""
    unit_count: str = part("", optional=True, key=False)
    """build.unit_count: how ``plan --units`` counts compile units ("": not counted; how they
    are counted decides nothing about the wheel: not in the cache key)."""
    unit_configure: tuple[str, ...] = internal(())
    """For unit_count "ninja": the cmake backend's configure command (``{stage_dir}`` to fill),
    which ``plan --units`` runs in the fetched tree. Not in the cache key or the JSON (the
    cmake backend's first command is the same)."""
    depends: tuple[Plan, ...] = part((), optional=True, show=lambda p: p.depends_json())
    """The plans of the recipes in build.depends (the variant's), rendered by the caller for
    the same target (``render.dependency_target``); the pipeline builds them first. Their keys
    are part of this plan's JSON, so of its cache key."""
    learned: LearnedMemory | None = internal(None)
    """The measured unit memory MAX_JOBS was planned from (``cache.learned.pick``); None: the
    recipe's ``mem_per_job_gb``. Not in the JSON or the cache key (``jobs_reason`` says it)."""
    cache_key: str = part("", key=False)
    """sha256 of the plan's key entries (``plan.key``); recorded in the provenance."""

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
        """What ``rocmbuild plan --json`` prints: the fields whose ``Part`` says JSON."""
        return record(self)

    def inputs_json(self) -> dict[str, Any]:
        """What the wheel's provenance records of the plan (rocmbuild.json's ``plan``): the
        JSON without what follows this host's state or the recipe file's place (MAX_JOBS and
        its reason, the recipe path, messages), the env with ``{jobs}`` unfilled, so that two
        builds of the same inputs write the same bytes. The cache key hashes ``in_key`` of it."""
        return record(self, "provenance")


def in_key(recorded: dict[str, Any], cls: type = Plan) -> dict[str, Any]:
    """``recorded`` (``Plan.inputs_json``, or a wheel's recorded plan) without the entries that
    the fields of ``cls`` keep out of the cache key."""
    out = dict(recorded)
    for f in dataclasses.fields(cls):
        p: Part = f.metadata["part"]
        if not p.json:
            continue
        if not p.key:
            out.pop(p.name or f.name, None)
        elif p.nested is not None and isinstance(out.get(p.name or f.name), dict):
            out[p.name or f.name] = in_key(out[p.name or f.name], p.nested)
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
