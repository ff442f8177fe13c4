"""The Plan: a recipe rendered for one target on one host. Every stage reads only this value.

Its parts are typed: the source and patches (the recipe model's ``Source`` and ``Patch``, with
paths made absolute), ``RocmTarget`` (the ROCm version for the label and where it came from, the
root and compiler the build uses), ``BuildHost`` (the interpreter and torch the build compiles
against) and ``ValidateSpec``. ``to_json`` is what ``rocmbuild plan --json`` prints and what the
cache key hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.config import REPO_ROOT
from rocmbuild.recipe.model import Patch, Source


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
class ValidateSpec:
    imports: tuple[str, ...] = ()
    kernel: str = ""
    requires: tuple[str, ...] = ()
    """[validate] requires: extra packages for the validation venv."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"imports": list(self.imports), "kernel": self.kernel}
        if self.requires:
            out["requires"] = list(self.requires)
        return out


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
    local_version: str
    host: BuildHost
    validate: ValidateSpec
    version: str = ""
    runtime_env: dict[str, str] = field(default_factory=dict)
    source_dir: str = ""
    """cmake backend: the CMakeLists.txt directory, relative to the fetched tree ("": its top)."""
    rocm_components: tuple[str, ...] = ()
    """ROCm components the host must have under its ROCm root (``rocmbuild.components``)."""
    host_requires_reason: str = ""
    """Why host_requires' version bounds are what they are (messages; not in the cache key)."""
    env_key: dict[str, str] = field(default_factory=dict)
    """``env`` with ``{jobs}`` left unfilled: what the cache key and the wheel's provenance hold
    (MAX_JOBS follows this host's free memory; it does not change the wheel)."""
    build_tag: str = ""
    """The wheel's PEP 427 build tag (``--build-tag``), "" for none; in the cache key when set."""
    cache_key: str = ""

    @property
    def short_key(self) -> str:
        return self.cache_key[:16]

    @property
    def pin(self) -> str:
        """The source pin (commit, sha256 or path), shortened for messages."""
        return (self.source.commit or self.source.sha256 or str(display(Path(self.source.path)))
                )[:12]

    def source_json(self) -> dict[str, Any]:
        s = self.source
        out: dict[str, Any] = {"kind": s.kind}
        for key in ("url", "commit", "ref", "sha256"):
            if getattr(s, key):
                out[key] = getattr(s, key)
        if s.path:
            out["path"] = str(display(Path(s.path)))
        out["submodules"] = list(s.submodules)
        return out

    def patches_json(self) -> list[dict[str, str]]:
        return [{"file": str(display(p.file)), "sha256": p.sha256, "reason": p.reason,
                 "link": p.link} for p in self.patches]

    def to_json(self) -> dict[str, Any]:
        h = self.host
        return {
            "recipe": self.recipe,
            "recipe_path": str(display(self.recipe_path)),
            "recipe_sha256": self.recipe_sha256,
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
            **({"build_tag": self.build_tag} if self.build_tag else {}),
            "cache_key": self.cache_key,
        }

    def inputs_json(self) -> dict[str, Any]:
        """``to_json`` without what follows this host's state or the recipe file's place
        (MAX_JOBS and its reason, the recipe path, messages): what the wheel's provenance
        records, so that two builds of the same inputs write the same bytes."""
        out = self.to_json()
        for volatile in ("jobs", "jobs_reason", "recipe_path", "host_requires_reason"):
            out.pop(volatile)
        if self.env_key:
            out["env"] = dict(self.env_key)
        return out


def display(p: Path) -> Path:
    """A path inside this repository, relative to it (stable across checkouts); else as is."""
    try:
        return p.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return p
