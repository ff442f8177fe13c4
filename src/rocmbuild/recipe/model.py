"""Recipes as frozen dataclasses. The docstring under each field is the reference documentation
for the matching TOML key (``docs/recipes.md`` is generated from nothing else: read this file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_VERSION = 1

BACKENDS = ("pip-wheel", "cmake")
"""Build backends. ``pip-wheel``: ``pip wheel --no-build-isolation --no-deps`` in the patched tree
(setuptools, scikit-build-core and other PEP 517 backends that drive CMake and ninja).
``cmake``: configure with ``-G Ninja`` (CMAKE_HIP_ARCHITECTURES from --arch, CMAKE_HIP_PLATFORM=amd,
the detected HIP compiler and flags), build with ``-j MAX_JOBS``, install into a staging prefix,
and package that prefix as a ``py3-none-<platform>`` wheel under ``<package name>/`` (for HIP
libraries that are not Python extensions). Needs ``package.version``."""

HOST_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk", "hip-compiler")
"""What ``build.host_requires`` may name. ``rocm-sdk`` may carry a minimum: ``rocm-sdk>=6.0``."""

WHEN_KEYS = ("variant", "source", "arch", "gpu_vendor")
"""Keys of a patch's ``when`` table; each value is a string or a list of strings (any matches)."""

PLACEHOLDERS = (
    "archs",
    "archs_comma",
    "jobs",
    "rocm_path",
    "rocm_version",
    "hip_compiler",
    "hip_flags",
)
"""Placeholders usable in env values and commands: ``{archs}`` is the ';'-joined target list,
``{archs_comma}`` the ','-joined one, ``{jobs}`` MAX_JOBS, ``{rocm_path}`` / ``{rocm_version}`` the
ROCm root found on the host, ``{hip_compiler}`` / ``{hip_flags}`` the detected HIP compiler."""


@dataclass(frozen=True)
class Source:
    kind: str
    """``git``, ``sdist`` or ``path``."""
    url: str = ""
    """git: the repository URL; sdist: the archive URL (https://, http:// or file://)."""
    commit: str = ""
    """git: the full 40-hex commit to check out (a tag or branch is not a pin)."""
    ref: str = ""
    """git: the tag or branch the commit belongs to, for people (informational)."""
    submodules: tuple[str, ...] = ()
    """git: submodule paths to initialise, or ``("*",)`` for all, recursively."""
    sha256: str = ""
    """sdist: the archive's sha256, checked before anything is extracted."""
    path: str = ""
    """path: a local source tree, relative to the recipe file."""

    @property
    def pin(self) -> str:
        return {"git": self.commit, "sdist": self.sha256}.get(self.kind, self.path)


@dataclass(frozen=True)
class Patch:
    file: Path
    """The patch, relative to the recipe file (e.g. ``../patches/flash-attn/0001-x.patch``)."""
    sha256: str
    """Its sha256; a mismatch is a recipe error, so a patch cannot change unnoticed."""
    reason: str
    """Why it exists."""
    when: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Conditions (see WHEN_KEYS); all must hold. Empty: always."""
    link: str = ""
    """The upstream issue or PR it works around."""


@dataclass(frozen=True)
class Variant:
    name: str
    description: str = ""
    env: tuple[tuple[str, str], ...] = ()
    """Environment added on top of build.env and arch.env."""
    mem_per_job_gb: float | None = None
    """Overrides build.mem_per_job_gb."""
    host_requires: tuple[str, ...] | None = None
    """Overrides build.host_requires."""
    disk_gb: float | None = None
    runtime_env: tuple[tuple[str, str], ...] = ()
    """Environment the built wheel needs at run time (e.g. the flash-attn Triton backend is chosen
    by FLASH_ATTENTION_TRITON_AMD_ENABLE at import). Recorded in rocmbuild.json as
    ``runtime_env``; the validator sets it, and users must too."""


@dataclass(frozen=True)
class Recipe:
    path: Path
    name: str
    """package.name: the distribution name."""
    description: str
    source: Source
    alternatives: dict[str, Source]
    """source.alternatives.<name>: other sources, chosen with ``--source <name>``."""
    supported_archs: tuple[str, ...]
    """arch.supported: the allow-list checked against ``--arch``."""
    arch_env: tuple[tuple[str, str], ...]
    """arch.env: how the target list reaches the build, e.g. GPU_ARCHS = "{archs}"."""
    rocm_default: str
    """target.rocm: the ROCm version for the local label when no ROCm torch or ROCm root says."""
    backend: str
    no_build_isolation: bool
    """build.no_build_isolation: pass --no-build-isolation (default true; isolation would pull a
    CUDA torch from PyPI into the build env)."""
    mem_per_job_gb: float
    """build.mem_per_job_gb: peak memory of one compile job, for MAX_JOBS."""
    disk_gb: float
    """build.disk_gb: rough disk needed for source and build tree."""
    env: tuple[tuple[str, str], ...]
    python_requires: tuple[str, ...]
    """build.python_requires: distributions that must be importable in the building Python."""
    host_requires: tuple[str, ...]
    hipify: tuple[str, ...]
    """build.hipify: a command run in the patched tree before the build (``python`` = this
    interpreter), e.g. PyTorch's tools/amd_build/build_amd.py."""
    pip_args: tuple[str, ...]
    default_variant: str
    variants: dict[str, Variant]
    patches: tuple[Patch, ...]
    validate_imports: tuple[str, ...]
    validate_kernel: str
    version: str = ""
    """package.version: the wheel version for the ``cmake`` backend (pip-wheel reads the
    project's own)."""
    cmake_args: tuple[str, ...] = ()
    """build.cmake_args: extra ``-D...`` arguments for the cmake backend's configure step."""
    raw_sha256: str = field(default="")
    """sha256 of the recipe file's bytes (provenance)."""
