"""Recipes as frozen dataclasses: the one source of the recipe schema.

Each field that comes from the TOML file carries a ``Key`` in its metadata: where it lives in the
file, its TOML type, its default, whether placeholders are allowed, what values it accepts, and its
reference text. The loader's checks (``recipe.check``), ``docs/recipes.md`` and
``schemas/recipe.schema.json`` (both written by ``python -m rocmbuild.recipe.schema``) are derived
from these fields and from nothing else.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.arch import KNOWN_ARCHS
from rocmbuild.components import COMPONENTS

SCHEMA_VERSION = 1

BACKENDS = ("pip-wheel", "cmake")
"""Values of build.backend (documented on ``Recipe.backend``)."""

HOST_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk", "hip-compiler")
"""What ``build.host_requires`` may name. ``torch``, ``rocm-torch`` and ``rocm-sdk`` may carry a
PEP 440 version range: ``rocm-sdk>=6.2,<7.1``, ``rocm-torch>=2.2,<2.14``."""

RANGED_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk")
"""The requirements that may carry a version range."""


def split_requirement(text: str) -> tuple[str, str]:
    """``"rocm-sdk>=6.2,<7.1"`` -> ``("rocm-sdk", ">=6.2,<7.1")``; no range: ``(text, "")``."""
    for i, ch in enumerate(text):
        if ch in "<>=!~":
            return text[:i].strip(), text[i:].strip()
    return text.strip(), ""


ROCM_COMPONENTS = tuple(COMPONENTS)
"""What ``build.rocm_components`` may name (``rocmbuild.components.COMPONENTS``)."""

WHEN_KEYS = ("variant", "source", "arch", "gpu_vendor")
"""Keys of a patch's ``when`` table; each value is a string or a list of strings (any matches)."""

GPU_VENDORS = ("amd", "nvidia")

SOURCE_KINDS = ("git", "sdist", "path")
"""A source table names exactly one of these keys; the one present is ``Source.kind``."""

PLACEHOLDERS = (
    "archs",
    "archs_comma",
    "jobs",
    "rocm_path",
    "rocm_version",
    "hip_compiler",
    "hip_flags",
)
PLACEHOLDERS_DOC = (
    "``{archs}`` is the ``;``-joined target list, ``{archs_comma}`` the ``,``-joined one, "
    "``{jobs}`` MAX_JOBS, ``{rocm_path}`` / ``{rocm_version}`` the ROCm root found on the host, "
    "``{hip_compiler}`` / ``{hip_flags}`` the detected HIP compiler and its flags (with "
    "``-fuse-cuid=none``, so device code does not depend on the build directory)."
)
"""What each placeholder (usable in keys whose Key.placeholders is set) stands for."""

KERNEL_CHOICES = ("auto", "none")
"""``validate.kernel`` values besides the kernel gate's adapter names (see ``kernels()``)."""

# Variables rocmbuild knows by name. An env key that is not one of these but is one typo away
# from one is reported (GPU_ARCH -> GPU_ARCHS); other names pass, since recipes may set anything.
KNOWN_ENV = (
    "GPU_ARCHS",
    "MAX_JOBS",
    "BUILD_TARGET",
    "FLASH_ATTENTION_FORCE_BUILD",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE",
    "FLASH_ATTENTION_SKIP_CK_BUILD",
    "FLASH_ATTENTION_FORCE_CXX11_ABI",
    "PYTORCH_ROCM_ARCH",
    "USE_ROCM",
    "USE_CUDA",
    "BUILD_TEST",
    "USE_FLASH_ATTENTION",
    "USE_MEM_EFF_ATTENTION",
    "USE_NCCL",
    "USE_RCCL",
    "USE_KINETO",
    "USE_MPI",
    "USE_DISTRIBUTED",
    "BUILD_DEBUG_INFO",
    "ROCM_PATH",
    "HIP_PATH",
    "ROCM_HOME",
    "HIP_PLATFORM",
    "HIP_CXX",
    "HIP_ARCHS",
    "HIP_FLAGS",
    "CMAKE_BUILD_PARALLEL_LEVEL",
    "CMAKE_ARGS",
    "PYTORCH_BUILD_VERSION",
    "PYTORCH_BUILD_NUMBER",
    "CMAKE_PREFIX_PATH",
)


def kernels() -> tuple[str, ...]:
    """What ``validate.kernel`` accepts: auto, none, or a kernel gate adapter name."""
    # Imported here: the gate module is stdlib-only at import, but it lives in the validate layer.
    from rocmbuild.validate.kernelgate import ADAPTER_NAMES

    return (*KERNEL_CHOICES, *ADAPTER_NAMES)


TYPES = (
    "string",
    "integer",
    "number",
    "boolean",
    "strings",  # a list of strings
    "env",  # a table of string values (environment variables)
    "table",  # a nested dataclass whose keys sit in this table
    "tables",  # a table of named nested dataclasses ([variants.<name>])
    "array",  # an array of tables ([[patches]])
    "conditions",  # a patch's when = { key = "value" or ["values"] }
)


@dataclass(frozen=True)
class Key:
    """One TOML key of a recipe, as dataclass field metadata (``toml(...)`` builds it)."""

    toml: str
    """Dotted location relative to the table the dataclass is read from (``build.env``)."""
    type: str
    """One of TYPES."""
    doc: str
    """Reference text for docs/recipes.md and the JSON schema's description."""
    example: str
    """A TOML value for the docs (``["gfx90a", "gfx942"]``)."""
    required: str | None = None
    """None: optional (the field default applies). Else the key is required and this is the hint
    after "missing"; a key with a ``pattern`` is checked as "" instead."""
    placeholders: bool = False
    """Values may use {placeholders} (PLACEHOLDERS); they are checked."""
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    """Allowed values (of a string, or of each list item); a callable is asked when checking."""
    noun: str = ""
    """What a value is called in 'unknown <noun> ...' messages."""
    versioned: bool = False
    """A choice may carry a version bound (``rocm-sdk>=6.0``)."""
    positive: bool = False
    """A number must be > 0."""
    pattern: str = ""
    """A regular expression a string must match; anchor it with ``^`` (the checker matches from
    the start, the JSON schema searches anywhere), or use ``.`` for "not empty"."""
    pattern_msg: str = ""
    """The problem when it does not, with ``%r`` for the value."""
    kind: str = ""
    """Source keys: the source kind this key belongs to (see SOURCE_KINDS)."""
    item: builtins.type | None = None  # builtins: ``type`` is a field name here
    """The nested dataclass of a table, tables or array key."""
    item_msg: str = ""
    """The problem when an entry of tables/array is not a table."""
    default_text: str = ""
    """The default, for the docs, when it is not a constant."""
    const: int | None = None
    """The format version an integer key must equal (schema_version)."""

    def allowed(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices


def toml(loc: str, type: str, doc: str, example: str, *, default: Any = dataclasses.MISSING,
         factory: Callable[[], Any] | None = None, also: Key | None = None, **kw: Any) -> Any:
    """A dataclass field read from the TOML key ``loc`` (or from ``also``, another location of
    the same value); ``default`` is used when it is absent."""
    meta = {"keys": (Key(loc, type, doc, example, **kw), *([also] if also else []))}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def keys(cls: type) -> list[tuple[dataclasses.Field[Any], Key]]:
    """The TOML keys of a model class with the field each fills, in declaration order."""
    return [(f, k) for f in dataclasses.fields(cls) for k in f.metadata.get("keys", ())]


def key_of(cls: type, name: str) -> Key:
    """The (first) TOML key of field ``name``."""
    return next(k for f, k in keys(cls) if f.name == name)


def default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


HEX40 = r"^[0-9a-f]{40}$"
HEX64 = r"^[0-9a-f]{64}$"


@dataclass(frozen=True)
class Source:
    kind: str
    """``git``, ``sdist`` or ``path``: whichever of those keys the table has (not a TOML key)."""
    url: str = toml(
        "git", "string", "The git repository URL.",
        '"https://github.com/ROCm/flash-attention.git"', kind="git", default="",
        pattern=r".", pattern_msg="expected a repository URL",
        also=Key(
            "sdist.url", "string", "The archive URL (https://, http:// or file://).",
            '"https://files.pythonhosted.org/.../flash_attn-2.8.3.post1.tar.gz"', kind="sdist",
            required="", pattern=r"^(https?|file)://",
            pattern_msg="expected an https://, http:// or file:// URL, got %r",
        ),
    )
    commit: str = toml(
        "commit", "string", "The full 40-hex commit to check out (a tag or branch is not a pin).",
        '"b3ae4966b2567811880db10d9e040a775b99c7d7"', kind="git", default="", required="",
        pattern=HEX40,
        pattern_msg="must be a full 40-hex commit sha, got %r "
        "(a tag or short sha is not a pin: `git rev-parse <tag>^{commit}`)",
    )
    ref: str = toml(
        "ref", "string", "The tag or branch the commit belongs to, for people (informational).",
        '"main"', kind="git", default="",
    )
    submodules: tuple[str, ...] = toml(
        "submodules", "strings",
        'Submodule paths to initialise, or ``["*"]`` for all, recursively.',
        '["csrc/composable_kernel"]', kind="git", default=(),
    )
    sha256: str = toml(
        "sdist.sha256", "string", "The archive's sha256, checked before anything is extracted.",
        '"55d5103ed846da8b56e0797acf4bde07dee4b1c7e8907fcfc6699c203030c348"', kind="sdist",
        default="", required="", pattern=HEX64,
        pattern_msg="must be the archive's 64-hex sha256 (`sha256sum <file>`)",
    )
    path: str = toml(
        "path", "string", "A local source tree, relative to the recipe file.",
        '"../probes/hip-attention"', kind="path", default="",
    )

    @property
    def pin(self) -> str:
        return {"git": self.commit, "sdist": self.sha256}.get(self.kind, self.path)


@dataclass(frozen=True)
class Patch:
    file: Path = toml(
        "file", "string",
        "The patch file, relative to the recipe file.",
        '"../patches/flash-attn/0001-x.patch"', required="",
    )
    sha256: str = toml(
        "sha256", "string",
        "Its sha256; a mismatch is a recipe error, so a patch cannot change unnoticed.",
        '"512ef016aab95c6f73c78e40b8546282e1307bc6e6c0a472bfbecb06ccf2c626"', required="",
    )
    reason: str = toml("reason", "string", "Why it exists.", '"drop AMD-only autotune keys"',
                       required="")
    when: tuple[tuple[str, tuple[str, ...]], ...] = toml(
        "when", "conditions",
        "Conditions, all of which must hold (empty: always). Keys: variant, source (an "
        "alternative's name or default), arch, gpu_vendor (amd or nvidia); each value is a "
        "string or a list of strings, any of which matches.",
        '{ variant = "triton", gpu_vendor = "nvidia" }', default=(), choices=WHEN_KEYS,
        noun="condition",
    )
    link: str = toml("link", "string", "The upstream issue or PR it works around.",
                     '"https://github.com/ROCm/flash-attention/issues/1"', default="")


@dataclass(frozen=True)
class Variant:
    name: str
    """The table's name in ``[variants.<name>]`` (selected with ``--variant <name>``)."""
    description: str = toml("description", "string", "One line for ``rocmbuild recipes``.",
                            '"Triton AMD backend"', default="")
    env: tuple[tuple[str, str], ...] = toml(
        "env", "env", "Environment added on top of build.env and arch.env.",
        '{ FLASH_ATTENTION_TRITON_AMD_ENABLE = "TRUE" }', default=(), placeholders=True,
    )
    mem_per_job_gb: float | None = toml(
        "mem_per_job_gb", "number", "Overrides build.mem_per_job_gb.", "0.5", default=None,
        positive=True, default_text="build.mem_per_job_gb",
    )
    host_requires: tuple[str, ...] | None = toml(
        "host_requires", "strings", "Overrides build.host_requires.", '["torch"]', default=None,
        choices=HOST_REQUIREMENTS, noun="requirement", versioned=True,
        default_text="build.host_requires",
    )
    host_requires_reason: str | None = toml(
        "host_requires_reason", "string", "Overrides build.host_requires_reason.",
        '"pure Python wheel: any torch that imports"', default=None,
        default_text="build.host_requires_reason",
    )
    rocm_components: tuple[str, ...] | None = toml(
        "rocm_components", "strings", "Overrides build.rocm_components (``[]``: none).", "[]",
        default=None, choices=ROCM_COMPONENTS, noun="ROCm component",
        default_text="build.rocm_components",
    )
    disk_gb: float | None = toml(
        "disk_gb", "number", "Overrides build.disk_gb.", "1", default=None, positive=True,
        default_text="build.disk_gb",
    )
    runtime_env: tuple[tuple[str, str], ...] = toml(
        "runtime_env", "env",
        "Environment the built wheel needs at run time (e.g. the flash-attn Triton backend is "
        "chosen by FLASH_ATTENTION_TRITON_AMD_ENABLE at import). Recorded in rocmbuild.json as "
        "``runtime_env``; the validator sets it, and users must too.",
        '{ FLASH_ATTENTION_TRITON_AMD_ENABLE = "TRUE" }', default=(), placeholders=True,
    )
    submodules: tuple[str, ...] | None = toml(
        "submodules", "strings",
        "Narrows the git source's ``submodules`` for this variant: a subset of them (``[]``: "
        "none). A build of this variant then fetches only these, so a mirror without the "
        "others still works.", "[]", default=None, default_text="source.submodules",
    )


TABLES = {
    "package": "What the recipe builds.",
    "target": "Facts about the target platform.",
    "source.sdist": "A source archive (sdist): ``sdist = { url = ..., sha256 = ... }``.",
    "arch": "GPU architectures: which the project supports, and how the list reaches its build.",
    "build": "How the wheel is built.",
    "validate": "What ``rocmbuild validate`` (and ``build --validate``) checks in the built wheel.",
}
"""Reference text of the tables that hold keys of one dataclass (the others are keys above)."""


@dataclass(frozen=True)
class Recipe:
    path: Path
    """The recipe file (not a TOML key)."""
    name: str = toml(
        "package.name", "string", "The distribution name.", '"flash-attn"', required="",
        pattern=r".", pattern_msg='missing (the distribution name, e.g. "flash-attn")',
    )
    source: Source = toml(
        "source", "table",
        "Where the source comes from: exactly one of ``git`` (with ``commit``), ``sdist`` or "
        "``path``.", "", item=Source,
        required="a [source] table with git, sdist or path",
    )
    schema_version: int = toml(
        "schema_version", "integer", "The recipe format version; this rocmbuild reads 1.", "1",
        required=f"add `schema_version = {SCHEMA_VERSION}` at the top", default=SCHEMA_VERSION,
        const=SCHEMA_VERSION,
    )
    description: str = toml("package.description", "string", "One line for ``rocmbuild recipes``.",
                            '"FlashAttention-2 for ROCm"', default="")
    version: str = toml(
        "package.version", "string",
        "The wheel version for the ``cmake`` backend (required there; pip-wheel reads the "
        "project's own).", '"1.0.0"', default="",
    )
    rocm_default: str = toml(
        "target.rocm", "string",
        "The ROCm version for the local label when no ROCm torch or ROCm root says.", '"6.2"',
        default="6.2",
    )
    alternatives: dict[str, Source] = toml(
        "source.alternatives", "tables",
        "Other sources (same keys as [source]), chosen with ``--source <name>``; ``default`` is "
        "reserved for [source].", "", item=Source, factory=dict,
        item_msg="expected a table with one of git, sdist, path",
    )
    supported_archs: tuple[str, ...] = toml(
        "arch.supported", "strings", "The allow-list checked against ``--arch``.",
        '["gfx90a", "gfx942", "gfx950"]', default=(), choices=tuple(KNOWN_ARCHS),
        noun="GPU architecture", default_text="`[]`: any",
    )
    arch_env: tuple[tuple[str, str], ...] = toml(
        "arch.env", "env", 'How the target list reaches the build, e.g. GPU_ARCHS = "{archs}".',
        '{ GPU_ARCHS = "{archs}" }', default=(), placeholders=True,
    )
    backend: str = toml(
        "build.backend", "string",
        "``pip-wheel``: ``pip wheel --no-build-isolation --no-deps`` in the patched tree (any "
        "PEP 517 backend). ``cmake``: configure with ``-G Ninja`` for the target archs and the "
        "detected HIP compiler, build with ``-j MAX_JOBS``, install into a staging prefix and "
        "package it as a ``py3-none-<platform>`` wheel (needs package.version).",
        '"pip-wheel"', default="pip-wheel", choices=BACKENDS, noun="backend",
    )
    no_build_isolation: bool = toml(
        "build.no_build_isolation", "boolean",
        "Pass --no-build-isolation (isolation would pull a CUDA torch from PyPI into the build "
        "env).", "true", default=True,
    )
    mem_per_job_gb: float = toml(
        "build.mem_per_job_gb", "number", "Peak memory of one compile job, for MAX_JOBS.", "5.0",
        default=2.0, positive=True,
    )
    disk_gb: float = toml("build.disk_gb", "number",
                          "Rough disk needed for source and build tree.", "30", default=5.0,
                          positive=True)
    env: tuple[tuple[str, str], ...] = toml(
        "build.env", "env", "Environment for the build (on top of the host's).",
        '{ BUILD_TARGET = "rocm", MAX_JOBS = "{jobs}" }', default=(), placeholders=True,
    )
    python_requires: tuple[str, ...] = toml(
        "build.python_requires", "strings",
        "Distributions that must be importable in the building Python.",
        '["torch", "setuptools", "ninja"]', default=(),
    )
    host_requires: tuple[str, ...] = toml(
        "build.host_requires", "strings",
        "What the host must have: torch, rocm-torch, rocm-sdk, hip-compiler. torch, rocm-torch "
        "and rocm-sdk may carry the PEP 440 version range the recipe was checked against "
        "(``rocm-sdk>=6.2,<7.1``; a torch's local label is ignored). When both rocm-torch and "
        "rocm-sdk are required, the ROCm torch's HIP major.minor must also equal the SDK's.",
        '["rocm-torch>=2.2,<2.14", "rocm-sdk>=6.0,<7.1"]', default=(),
        choices=HOST_REQUIREMENTS, noun="requirement", versioned=True,
    )
    host_requires_reason: str = toml(
        "build.host_requires_reason", "string",
        "Why the bounds in host_requires are what they are (which upstream file or release says "
        "so); shown when a host falls outside them.",
        '"setup.py hard-codes -std=c++17; torch 2.14 headers #error below C++20"', default="",
    )
    rocm_components: tuple[str, ...] = toml(
        "build.rocm_components", "strings",
        "ROCm libraries the build needs, each checked by its CMake config "
        "(``<root>/lib/cmake/<name>/<name>-config.cmake``) or its library "
        "(``<root>/lib/lib<name>.so*``) under the ROCm root before anything is fetched; a "
        "missing one is named with its apt and dnf package. See docs/host-checks.md.",
        '["hip", "rccl", "miopen", "hipblaslt"]', default=(), choices=ROCM_COMPONENTS,
        noun="ROCm component",
    )
    hipify: tuple[str, ...] = toml(
        "build.hipify", "strings",
        "A command run in the patched tree before the build (``python`` = this interpreter), "
        "e.g. PyTorch's tools/amd_build/build_amd.py.",
        '["python", "tools/amd_build/build_amd.py"]', default=(), placeholders=True,
    )
    cmake_args: tuple[str, ...] = toml(
        "build.cmake_args", "strings",
        "Extra arguments appended to the cmake backend's configure command (``cmake -S <tree or "
        "source_dir> -B <build dir> -G Ninja -D... <cmake_args>``), typically ``-D`` cache "
        "entries. rocmbuild owns the source, build and install directories and the generator: "
        "``-S``, ``-B``, ``-G`` and ``-DCMAKE_INSTALL_PREFIX`` are refused (use "
        "``build.source_dir``).", '["-DBUILD_TESTING=OFF"]', default=(), placeholders=True,
    )
    source_dir: str = toml(
        "build.source_dir", "string",
        "cmake backend: the directory holding CMakeLists.txt, relative to the fetched tree "
        "(the rest of the tree stays available to it, e.g. ``../common``).", '"examples/hip"',
        default="", default_text="the tree's top",
        pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$))", pattern_msg="must be a relative path inside the "
        "source tree (no leading / and no ..), got %r",
    )
    pip_args: tuple[str, ...] = toml(
        "build.pip_args", "strings", "Extra arguments for ``pip wheel`` (pip-wheel backend).",
        '["--config-settings=--build-option=--verbose"]', default=(),
    )
    default_variant: str = toml(
        "build.default_variant", "string", "The variant built when ``--variant`` is not given.",
        '"ck"', default="", default_text="the first variant",
    )
    variants: dict[str, Variant] = toml(
        "variants", "tables",
        "Named build variants, chosen with ``--variant <name>``; each adds to or overrides "
        "[build].", "", item=Variant, factory=dict, item_msg="expected a table",
    )
    patches: tuple[Patch, ...] = toml(
        "patches", "array",
        "Patches applied to the source tree in order, each with a checksum, a reason and "
        "optional conditions.", "", item=Patch, default=(),
        item_msg="expected a table ([[patches]] with file, sha256, reason)",
    )
    validate_imports: tuple[str, ...] = toml(
        "validate.imports", "strings", "Modules imported from the installed wheel.",
        '["flash_attn"]', default=(),
    )
    validate_requires: tuple[str, ...] = toml(
        "validate.requires", "strings",
        "Extra requirements (PEP 508) installed into the validation venv, from the configured "
        "index / find-links (pip's own config and ``PIP_*`` variables), e.g. a runtime "
        "dependency the wheel does not declare. ``validate --with`` adds more.", '["triton"]',
        default=(),
    )
    validate_kernel: str = toml(
        "validate.kernel", "string",
        "The attention kernel the GPU gate runs: a kernel gate adapter (``flash-attn``, "
        "``sdpa``: torch's SDPA, ``hipattn``: the HIP probe), ``auto`` (the validator picks "
        "from the wheels it installs) or ``none`` (no kernel gate for this recipe).",
        '"flash-attn"', default="auto", choices=kernels, noun="kernel",
    )
    raw_sha256: str = ""
    """sha256 of the recipe file's bytes (provenance; not a TOML key)."""
