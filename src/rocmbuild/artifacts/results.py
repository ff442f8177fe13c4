"""Results are values: stages return them, the pipeline and nightly collect them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocmbuild.artifacts.audit import WheelAudit
    from rocmbuild.artifacts.buildfacts import BuildEnv, Bundle, HipifyReport, TorchBuild


class Status(enum.Enum):
    """The one status vocabulary: pipeline stages, validation steps, kernel cases and reports.

    SUCCESS: it ran and passed. WARNING: it ran and passed, with something the user should read
    (a validation step: e.g. a pure-Python wheel built against another torch). FAILED: it ran and
    failed. SKIPPED: it did not run; the reason says why (never counted as a pass). CACHED: a
    stage's work was found in the cache.
    """

    SUCCESS = "success"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"
    CACHED = "cached"

    @property
    def failed(self) -> bool:
        return self is Status.FAILED

    @classmethod
    def parse(cls, text: object) -> Status:
        """Read a status from JSON: our own values, and the kernel gate's (and reports written
        before there was one vocabulary) ``passed``. Anything else is a ValueError."""
        if text == "passed":
            return cls.SUCCESS
        return cls(text)


@dataclass(frozen=True)
class CompileStats:
    """What the compile cache did in one build (docs/compile-cache.md): calls that hit, that
    missed (compiled and stored) and that it could not cache (links, preprocessing, errors)."""

    tool: str
    hits: int
    misses: int
    uncacheable: int = 0

    @property
    def hit_rate(self) -> float | None:
        """hits / (hits + misses), 0..1; None when nothing cacheable was compiled."""
        total = self.hits + self.misses
        return self.hits / total if total else None

    def line(self) -> str:
        """``compile cache: 412/420 hits (98 %)`` (ccache), as printed after the build."""
        total = self.hits + self.misses
        rate = f" ({100 * self.hits / total:.0f} %)" if total else ""
        return f"compile cache: {self.hits}/{total} hits{rate} ({self.tool})"

    def to_json(self) -> dict[str, Any]:
        rate = self.hit_rate
        return {"tool": self.tool, "hits": self.hits, "misses": self.misses,
                "uncacheable": self.uncacheable,
                "hit_rate": round(rate, 4) if rate is not None else None}


@dataclass(frozen=True)
class Artifacts:
    """What the stages hand on: each stage returns the fields it made; the pipeline merges."""

    depends: tuple[DependencyWheel, ...] | None = None
    """The pipeline, before the stages: the wheels of the plan's dependencies (build.depends),
    which env installs and tag records."""
    tree: Path | None = None
    """fetch: the fresh source tree (patched in place by patch, hipify)."""
    hipify: HipifyReport | None = None
    """hipify: the files it changed and the CUDA APIs it left."""
    downloads: tuple[tuple[str, Path], ...] | None = None
    """fetch: the plan's [[downloads]] as (variable, verified file or directory in the cache)."""
    source_date_epoch: int | None = None
    """fetch: the source's own time (the pinned commit's committer time, the sdist's newest
    member), the SOURCE_DATE_EPOCH of the build and of the wheel's timestamps."""
    build_env: BuildEnv | None = None
    """env: the recipe's build environment (None: the build uses this interpreter)."""
    raw_wheel: Path | None = None
    """build: the wheel as the backend made it."""
    build_log: Path | None = None
    torch: TorchBuild | None = None
    """build: the torch the build compiled against."""
    oom_retry: str | None = None
    """build: ``OOM-killed at MAX_JOBS 8 (unit X); retried at 4, finished`` when it was."""
    tree_bytes: int | None = None
    """build: the disk the source and build tree took when the build finished (the next
    build's preflight plans free disk with it)."""
    compile_cache: CompileStats | None = None
    """build: what the compile cache did (None: no cache, or its counters were unreadable)."""
    bundle: Bundle | None = None
    """bundle: ``raw_wheel`` with the ROCm runtime inside (rocm_runtime = "bundle")."""
    wheel: Path | None = None
    """tag: the wheel with the local label and provenance."""
    audit: WheelAudit | None = None
    """audit: the code-object audit of ``wheel``."""
    gate_needs_gpu: str | None = None
    """validate: why the kernel gate could not run here (it had kernels to check, and no GPU:
    ``KernelsSummary.needs_a_gpu()``); None when it ran or had nothing to check. The pipeline
    records it in the cache entry's validation."""

    def merged(self, new: Artifacts) -> Artifacts:
        return replace(self, **{f.name: getattr(new, f.name) for f in fields(new)
                                if getattr(new, f.name) is not None})


@dataclass(frozen=True)
class DependencyWheel:
    """The wheel of a recipe named in build.depends, built or taken from the cache first."""

    recipe: str
    cache_key: str
    name: str
    """The distribution and version, from the wheel's file name."""
    version: str
    wheel: Path
    """The delivered copy (its bytes checked against ``sha256`` where they are installed)."""
    sha256: str

    def to_json(self) -> dict[str, str]:
        """rocmbuild.json's ``depends`` entry (no path: the same inputs, the same bytes)."""
        return {"recipe": self.recipe, "name": self.name, "version": self.version,
                "wheel": self.wheel.name, "sha256": self.sha256, "cache_key": self.cache_key}


@dataclass(frozen=True)
class StageResult:
    status: Status
    duration: float = 0.0
    reason: str = ""
    log_path: Path | None = None
    artifacts: Artifacts = field(default_factory=Artifacts)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "duration_s": round(self.duration, 3),
            "reason": self.reason,
            "log": str(self.log_path) if self.log_path else None,
        }


@dataclass(frozen=True)
class Pin:
    """What upstream had when a nightly run started, resolved once by its controller
    (``render.Target.pin``; re-exported by ``nightly.model``)."""

    kind: str
    """``git`` (a commit of ``ref``) or ``sdist`` (a version on a package index) or
    ``recipe`` (the recipe's own pin, nothing followed)."""
    value: str
    """The commit, the version, or the recipe's pin as it reads."""
    url: str = ""
    """sdist: the file's URL (credentials never kept); git: the repository."""
    sha256: str = ""
    """sdist: the file's sha256 from the index."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "url": self.url, "sha256": self.sha256}
