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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.core.hostenv import NAME as ENV_NAME
from rocmbuild.host.components import COMPONENTS

SCHEMA_VERSION = 1

BACKENDS = ("pip-wheel", "cmake")
"""Values of build.backend (documented on ``Recipe.backend``)."""

UNIT_COUNTS = ("auto", "ninja", "ck-fmha", "none")
"""Values of build.unit_count (documented on ``Recipe.unit_count``)."""

HOST_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk", "hip-compiler")
"""What ``build.host_requires`` may name. ``torch``, ``rocm-torch`` and ``rocm-sdk`` may carry a
PEP 440 version range: ``rocm-sdk>=6.2,<7.1``, ``rocm-torch>=2.2,<2.14``."""

RANGED_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk")
"""The requirements that may carry a version range."""


ROCM_COMPONENTS = tuple(COMPONENTS)
"""What ``build.rocm_components`` may name (``rocmbuild.host.components.COMPONENTS``)."""

WHEN_KEYS = ("variant", "source", "arch", "gpu_vendor", "rocm")
"""Keys of a patch's or download's ``when`` table; each value is a string or a list of strings
(any matches). ``rocm`` is the plan's ROCm version (major.minor, as in the local label)."""

GPU_VENDORS = ("amd", "nvidia")

HIPIFY_TOOLS = ("torch", "command", "perl")
"""Values of hipify.tool (documented on ``Hipify.tool``)."""
ROCM_RUNTIMES = ("host", "bundle")
"""Values of build.rocm_runtime (documented on ``Recipe.rocm_runtime``)."""

ROCM_LIBS = (
    "libamdhip64.so*", "libhsa-runtime64.so*", "libhsakmt.so*", "libamd_comgr.so*", "libhiprtc.so*",
    "librocprofiler-register.so*", "librocm-core.so*", "libroctracer64.so*", "libroctx64.so*",
    "librocm_smi64.so*",
)
"""bundle.libs when a recipe bundles and names none: the HIP runtime and what it loads (the
ROCm part of upstream PyTorch's list in .ci/manywheel/build_rocm.sh; the math libraries are the
recipe's to name)."""

SOURCE_KINDS = ("git", "sdist", "path")
"""A source table names exactly one of these keys; the one present is ``Source.kind``."""

PLACEHOLDERS = (
    "archs",
    "archs_comma",
    "arch_names",
    "arch_names_comma",
    "jobs",
    "rocm_path",
    "rocm_version",
    "hip_compiler",
    "hip_flags",
)
PLACEHOLDERS_DOC = (
    "``{archs}`` is the ``;``-joined target list as given (with target features: "
    "``gfx942:sramecc+:xnack-``), ``{archs_comma}`` the ``,``-joined one; ``{arch_names}`` / "
    "``{arch_names_comma}`` the same with plain gfx names (``gfx942``), repeats dropped, for "
    "builds whose allow-list knows no features (the audit still checks the features given), "
    "``{jobs}`` MAX_JOBS, ``{rocm_path}`` / ``{rocm_version}`` the ROCm root found on the host, "
    "``{hip_compiler}`` / ``{hip_flags}`` the detected HIP compiler and its flags."
)
"""What each placeholder (usable in keys whose Key.placeholders is set) stands for."""

ROCM_FROM = ("auto", "sdk")
"""Values of target.rocm_from (documented on ``Recipe.rocm_from``)."""

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
    from rocmbuild.programs.kernelgate import ADAPTER_NAMES

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
    requirement: bool = False
    """Each item of a strings key is a PEP 508 requirement from an index (a name, optional
    extras, version specifiers and markers; no URL)."""

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
        "alternative's name or default), arch, gpu_vendor (amd or nvidia), rocm (the plan's ROCm "
        "major.minor); each value is a "
        "string or a list of strings, any of which matches.",
        '{ variant = "triton", gpu_vendor = "nvidia" }', default=(), choices=WHEN_KEYS,
        noun="condition",
    )
    link: str = toml("link", "string", "The upstream issue or PR it works around.",
                     '"https://github.com/ROCm/flash-attention/issues/1"', default="")


@dataclass(frozen=True)
class Download:
    name: str = toml(
        "name", "string", "A name for messages, the plan and the provenance.", '"aotriton"',
        default="", required="", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        pattern_msg="must be a name of letters, digits, '.', '_' or '-', got %r",
    )
    url: str = toml(
        "url", "string", "Where fetch downloads it (https://, http:// or file://).",
        '"https://github.com/ROCm/aotriton/releases/download/0.11b/aotriton-0.11b-....tar.gz"',
        default="", required="", pattern=r"^(https?|file)://",
        pattern_msg="expected an https://, http:// or file:// URL, got %r",
    )
    sha256: str = toml(
        "sha256", "string",
        "Its sha256, checked before it is used; the download is cached under it. A recipe may "
        "leave it out until it is known, but a plan that needs the download is "
        "then refused.", '"c7f319dd7448cbbbab81889dd8a37d47dbc25ebcbd89760f09e6a0904e556393"',
        default="", pattern=r"^([0-9a-f]{64})?$",
        pattern_msg="must be the file's 64-hex sha256 (`sha256sum <file>`), got %r",
    )
    extract: bool = toml(
        "extract", "boolean",
        "Extract the archive (tar or zip, its single top directory stripped) and hand over "
        "the directory; else the file itself.", "true", default=False,
    )
    env: str = toml(
        "env", "string",
        "The build variable that receives the path. Downloads naming the same variable are "
        "extracted into one directory, in recipe order (a runtime and its kernel images).",
        '"AOTRITON_INSTALLED_PREFIX"', default="", required="", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        pattern_msg="must name the variable that receives the path (e.g. "
        "AOTRITON_INSTALLED_PREFIX), got %r",
    )
    when: tuple[tuple[str, tuple[str, ...]], ...] = toml(
        "when", "conditions",
        "Conditions, all of which must hold (empty: always), as for patches.",
        '{ arch = "gfx942" }', default=(), choices=WHEN_KEYS, noun="condition",
    )


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
    link_units_per_arch: int | None = toml(
        "link_units_per_arch", "integer", "Overrides build.link_units_per_arch.", "930",
        default=None, positive=True, default_text="build.link_units_per_arch",
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
    label_torch: bool | None = toml(
        "label_torch", "boolean", "Overrides target.label_torch (a pure-Python variant is not "
        "bound to one torch's ABI).", "false", default=None, default_text="target.label_torch",
    )
    build_requires: tuple[str, ...] | None = toml(
        "build_requires", "strings", "Overrides build.build_requires.",
        '["setuptools>=70.1,<80", "wheel"]', default=None, requirement=True,
        default_text="build.build_requires",
    )
    build_requirements_file: str | None = toml(
        "build_requirements_file", "string",
        'Overrides build.build_requirements_file (``""``: none).',
        '"requirements-build.txt"', default=None, default_text="build.build_requirements_file",
        pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$))", pattern_msg="must be a relative path inside "
        "the source tree (no leading / and no ..), got %r",
    )

    unit_count: str | None = toml(
        "unit_count", "string", "Overrides build.unit_count (``none``: not counted).", '"none"',
        default=None, choices=UNIT_COUNTS, noun="unit count",
        default_text="build.unit_count",
    )
    upstream_tests: tuple[str, ...] | None = toml(
        "upstream_tests", "strings", "Overrides validate.upstream_tests for this variant.",
        '["tests/test_flash_attn_triton_amd.py"]', default=None,
        default_text="validate.upstream_tests",
    )
    upstream_env: tuple[tuple[str, str], ...] | None = toml(
        "upstream_env", "env", "Overrides validate.upstream_env for this variant.",
        '{ FLASH_ATTENTION_TRITON_AMD_ENABLE = "TRUE" }', default=None,
        default_text="validate.upstream_env",
    )


_RELATIVE = r"^(?!/)(?!.*(^|/)\.\.(/|$))"
_RELATIVE_MSG = "must be a relative path inside the source tree (no leading / and no ..), got %r"


@dataclass(frozen=True)
class Hipify:
    """The [hipify] table: translate CUDA sources to HIP before the build (docs/hipify.md)."""

    tool: str = toml(
        "tool", "string",
        "``torch``: ``torch.utils.hipify`` from the torch in the build's Python (the build "
        "environment's when the recipe has one), run in a child process. ``perl``: "
        "``hipify-perl`` from PATH, the ROCm root's bin or toolchain.json "
        "(Debian 12 has none; in place only, CMakeLists.txt untouched). ``command``: run "
        "``command`` (what ``build.hipify`` does).",
        '"torch"', default="torch", choices=HIPIFY_TOOLS, noun="hipify tool",
    )
    command: tuple[str, ...] = toml(
        "command", "strings",
        "tool = \"command\": the command run in the patched tree (``python`` = the build "
        "environment's, else this interpreter), e.g. PyTorch's tools/amd_build/build_amd.py.",
        '["python", "tools/amd_build/build_amd.py"]', default=(), placeholders=True,
    )
    project_dir: str = toml(
        "project_dir", "string",
        "The directory translated, relative to the fetched tree; globs and the changed-file "
        "list are relative to it.", '"csrc"', default="", default_text="the tree's top",
        pattern=_RELATIVE, pattern_msg=_RELATIVE_MSG,
    )
    includes: tuple[str, ...] = toml(
        "includes", "strings",
        "Globs (fnmatch, relative to project_dir, ``*`` crosses ``/``) of the files translated; "
        "of those, only C/C++/CUDA sources and headers (.cu .cuh .c .cc .cpp .h .hpp .in) and, "
        "in place, CMakeLists.txt.", '["src/*", "CMakeLists.txt"]', default=("*",),
    )
    ignores: tuple[str, ...] = toml(
        "ignores", "strings", "Globs of files left alone (they win over includes).",
        '["third_party/*"]', default=(),
    )
    header_include_dirs: tuple[str, ...] = toml(
        "header_include_dirs", "strings",
        "Directories (relative to project_dir) whose headers are translated too and searched "
        "when rewriting ``#include`` lines to the translated headers (tool = \"torch\", out of "
        "place).", '["include"]', default=(),
    )
    out_of_place: bool = toml(
        "out_of_place", "boolean",
        "false: each file is rewritten in place (tool = \"torch\" also renames ``.cu`` files "
        "``.hip``, the names its CMakeLists.txt rewrite gives them); true: translated copies "
        "beside the originals, as torch's cpp_extension names them (``k.cu`` -> ``k.hip``, "
        "``a.cpp`` -> ``a_hip.cpp``, ``h.cuh`` -> ``h_hip.cuh``), originals untouched.",
        "true", default=False,
    )
    strict: bool = toml(
        "strict", "boolean",
        "Fail the build when a translated file still uses a CUDA API (``cuda*``, ``cu*``, "
        "``CU*``, cuBLAS/cuRAND/... names, ``cuda*`` headers) that the tool could not map, "
        "naming file, line and symbol; false: they are only logged.", "true", default=False,
    )

@dataclass(frozen=True)
class Floor:
    name: str
    """The gfx arch (or sm_XY) in ``[validate.floor.<arch>]``."""
    fwd_tflops: float | None = toml(
        "fwd_tflops", "number", "Forward TFLOP/s every throughput shape must reach on this arch.",
        "150", default=None, positive=True,
    )
    bwd_tflops: float | None = toml(
        "bwd_tflops", "number", "Backward TFLOP/s every throughput shape must reach.", "60",
        default=None, positive=True,
    )
    sdpa_fraction: float | None = toml(
        "sdpa_fraction", "number", "Each shape and direction must reach this fraction of torch "
        "SDPA's TFLOP/s on the same device in the same run.", "0.5", default=None, positive=True,
    )


OPTION_NAME = r"^[a-z][a-z0-9_]*$"
"""The name in ``[options.<name>]``."""


@dataclass(frozen=True)
class Option:
    """``[options.<name>]``: a typed, documented setting of the build that reaches it as one
    environment variable, set with ``--opt <recipe>.<name>=<value>`` (docs/options.md)."""

    name: str
    """The table's name in ``[options.<name>]`` (lower case, digits and ``_``)."""
    env: str = toml(
        "env", "string", "The build variable that receives the value.", '"OPT_DIM"',
        default="", required="", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        pattern_msg="must name an environment variable (e.g. OPT_DIM), got %r",
    )
    default: str = toml(
        "default", "string", "The value when ``--opt`` does not set it (checked like one).",
        '"32,64,128,256"', default="", required="",
    )
    help: str = toml(
        "help", "string", "What it does, in one line (the hint of a usage error about it).",
        '"head dimensions whose kernels are compiled (setup.py: OPT_DIM)"', default="",
        required="", pattern=r".", pattern_msg="missing (one line saying what the option does)",
    )
    choices: tuple[str, ...] = toml(
        "choices", "strings",
        "The values allowed; a value is a ``,``-separated list of them (``128`` or "
        "``64,128``, no repeats).", '["32", "64", "128", "256"]', default=(),
        default_text="`[]`: any value matching `pattern`",
    )
    pattern: str = toml(
        "pattern", "string", "A regular expression the whole value must match.",
        '"^[A-Za-z0-9_*?]+$"', default="",
    )
    variants: tuple[str, ...] = toml(
        "variants", "strings",
        "The variants it applies to; another variant neither sets its variable nor accepts it "
        "in ``--opt``.", '["ck"]', default=(), default_text="`[]`: every variant",
    )

    def problem(self, value: str) -> str | None:
        """Why ``value`` is not allowed (None: it is)."""
        if self.choices:
            items = value.split(",")
            bad = [i for i in items if i not in self.choices]
            if bad or len(set(items)) != len(items) or not value:
                return (f"{value!r} is not a ,-separated list of {', '.join(self.choices)}"
                        + (" (repeated)" if not bad and value else ""))
        if self.pattern and not re.fullmatch(self.pattern, value):
            return f"{value!r} does not match {self.pattern!r}"
        return None


TABLES = {
    "package": "What the recipe builds.",
    "target": "Facts about the target platform.",
    "source.sdist": "A source archive (sdist): ``sdist = { url = ..., sha256 = ... }``.",
    "arch": "GPU architectures: which the project supports, and how the list reaches its build.",
    "build": "How the wheel is built.",
    "validate": "What ``rocmbuild validate`` (and ``build --validate``) checks in the built wheel.",
    "bundle": "What the ``bundle`` stage copies into the wheel when ``build.rocm_runtime = "
    "\"bundle\"`` (see docs/bundling.md).",
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
    rocm_from: str = toml(
        "target.rocm_from", "string",
        "Where the label's ROCm version comes from. ``auto``: the ROCm torch's HIP version, "
        "else the ROCm root, else target.rocm (right for extensions, which link the torch they "
        "build against). ``sdk``: the ROCm root the build compiles against, else target.rocm; "
        "the torch in the building interpreter is ignored (right for PyTorch itself, which is "
        "built against the SDK). ``--rocm-version`` overrides both.", '"sdk"', default="auto",
        choices=ROCM_FROM, noun="rocm_from value",
    )
    label_torch: bool = toml(
        "target.label_torch", "boolean",
        "Put the torch the build compiled against into the local label, for extensions that "
        "are ABI-bound to one torch: ``+rocm6.2.torch2.9.cxx11abitrue.gfx942`` (torch's "
        "major.minor and its C++ ABI flag as the build's torch reports them; lower case, since "
        "PEP 440 local labels are). The build fails when the torch or its ABI is unknown.",
        "true", default=False,
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
                          "Rough disk needed for source and build tree: the preflight's need "
                          "until a build of this recipe and variant has measured its tree "
                          "(docs/long-builds.md).", "30", default=5.0,
                          positive=True)
    link_units_per_arch: int | None = toml(
        "build.link_units_per_arch", "integer",
        "Object files per GPU arch that the final link names on one command line (generated "
        "kernels such as the flash-attn CK variant's). The preflight estimates that command's "
        "length (objects x archs x path length) and refuses a build whose link would exceed "
        "the host's ARG_MAX before hours of compiling (docs/long-builds.md). Unset: no check.",
        "930", default=None, positive=True,
    )
    env: tuple[tuple[str, str], ...] = toml(
        "build.env", "env", "Environment for the build (on top of the host's).",
        '{ BUILD_TARGET = "rocm", MAX_JOBS = "{jobs}" }', default=(), placeholders=True,
    )
    pass_env: tuple[str, ...] = toml(
        "build.pass_env", "strings",
        "Host variables the build sees besides rocmbuild's allow-list (PATH, HOME, the locale, "
        "ROCm/HIP paths, proxies, pip's index settings, compiler caches: ``hostenv.PASS_ENV``, "
        "listed in docs/recipes.md). A name, or a pattern with one ``*`` (``MY_*``). Every "
        "other host variable is withheld from the build.", '["MY_VENDOR_FLAGS"]', default=(),
        pattern=ENV_NAME.pattern,
        pattern_msg="expected an environment variable name, optionally with one * "
        "(e.g. MY_VAR or MY_*), got %r",
    )
    python_requires: tuple[str, ...] = toml(
        "build.python_requires", "strings",
        "Distributions that must be importable in the building Python: this interpreter, or "
        "the build environment when the recipe declares build requirements (checked there "
        "after it is made).", '["torch", "setuptools", "ninja"]', default=(),
    )
    build_requires: tuple[str, ...] = toml(
        "build.build_requires", "strings",
        "Build requirements (PEP 508, pinned or bounded) installed from the configured index "
        "into the recipe's own build environment: a venv of this Python that sees the host's "
        "torch and what torch requires, and nothing else from the host (docs/build-env.md). "
        "The build's ``python`` and ``PATH`` are that venv's; the exact versions installed go "
        "into rocmbuild.json. With neither this nor build.build_requirements_file the build "
        "runs with this interpreter as it is.",
        '["setuptools>=70.1,<80", "wheel", "ninja"]', default=(), requirement=True,
    )
    build_requirements_file: str = toml(
        "build.build_requirements_file", "string",
        "A requirements file inside the source tree (e.g. PyTorch's requirements-build.txt) "
        "whose requirements go into the build environment too (requirement lines and comments "
        "only; no pip options).", '"requirements-build.txt"', default="",
        pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$))", pattern_msg="must be a relative path inside "
        "the source tree (no leading / and no ..), got %r",
    )
    host_requires: tuple[str, ...] = toml(
        "build.host_requires", "strings",
        "What the host must have: torch, rocm-torch, rocm-sdk, hip-compiler. torch, rocm-torch "
        "and rocm-sdk may carry the PEP 440 version range the recipe was checked against "
        "(``rocm-sdk>=6.2,<7.1``; a torch's local label is ignored). When both rocm-torch and "
        "rocm-sdk are required, torch's ROCm major.minor (else its HIP's) must equal the SDK's.",
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
        "A command run in the patched tree before the build (``python`` = the build "
        "environment's, else this interpreter), "
        "e.g. PyTorch's tools/amd_build/build_amd.py.",
        '["python", "tools/amd_build/build_amd.py"]', default=(), placeholders=True,
    )
    hipify_step: Hipify | None = toml(
        "hipify", "table",
        "A declarative hipify step (see docs/hipify.md); ``build.hipify`` is the same as "
        "``tool = \"command\"`` with its ``command``.", "", item=Hipify, default=None,
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
    rocm_runtime: str = toml(
        "build.rocm_runtime", "string",
        "Where the wheel's ROCm libraries come from at run time. ``host``: the wheel links the "
        "host's ROCm; its METADATA says ``Requires-External: rocm (>=X.Y,<X.Y+1)`` (native "
        "wheels) and publish lists it only in the ``rocmX.Y`` view. ``bundle``: the ``bundle`` "
        "stage copies the ROCm libraries the wheel's ELF files need (transitively, as chosen "
        "by bundle.libs) and bundle.data into ``<package>/`` and sets their RPATH to "
        "``$ORIGIN/...`` with patchelf, like upstream's PyTorch ROCm wheels.",
        '"bundle"', default="host", choices=ROCM_RUNTIMES, noun="ROCm runtime",
    )
    bundle_libs: tuple[str, ...] = toml(
        "bundle.libs", "strings",
        "Shell patterns of the library names (DT_NEEDED sonames) to bundle; a needed library "
        "that matches none stays on the host. glibc, libstdc++, libgcc_s and the dynamic "
        "loader are never bundled.", '["libamdhip64.so*", "libhsa-runtime64.so*"]',
        default=(), default_text="the HIP runtime and its ROCm dependencies: "
        + ", ".join(f"``{p}``" for p in ROCM_LIBS),
    )
    bundle_data: tuple[str, ...] = toml(
        "bundle.data", "strings",
        "Data files to bundle: glob patterns relative to the ROCm root (``**`` spans "
        "directories), copied to the same relative path under the package "
        "(``lib/rocblas/library/*`` -> ``torch/lib/rocblas/library/``). A file whose name "
        "names a gfx target other than the build's is left out.",
        '["lib/rocblas/library/*", "share/miopen/db/*"]', default=(),
        pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$))", pattern_msg="must be a relative glob inside the "
        "ROCm root (no leading / and no ..), got %r",
    )
    repair: bool | None = toml(
        "build.repair", "boolean",
        "Run ``auditwheel repair`` on the built wheel (the repair stage, before tag) so that it "
        "gets a ``manylinux_2_<glibc>`` platform tag, excluding ROCm's runtime libraries "
        "(``libamdhip64.so*`` and the rest) and torch's: they come from the host's ROCm and "
        "torch, never from the wheel. When auditwheel cannot repair it, the wheel keeps "
        "``linux_x86_64`` and one warning says why. See docs/repair.md.", "false",
        default=None, default_text="`true` for the cmake backend, `false` for pip-wheel",
    )
    pip_args: tuple[str, ...] = toml(
        "build.pip_args", "strings", "Extra arguments for ``pip wheel`` (pip-wheel backend).",
        '["--config-settings=--build-option=--verbose"]', default=(),
    )
    default_variant: str = toml(
        "build.default_variant", "string", "The variant built when ``--variant`` is not given.",
        '"ck"', default="", default_text="the first variant",
    )
    options: dict[str, Option] = toml(
        "options", "tables",
        "Typed build options (``[options.<name>]``), each mapped to one build variable and set "
        "with ``--opt <recipe>.<name>=<value>`` (repeatable) or a nightly cell; the values go "
        "into the plan's env, the cache key and the wheel's provenance (docs/options.md).", "",
        item=Option, factory=dict,
        item_msg="expected a table ([options.<name>] with env, default, help)",
    )
    unit_count: str = toml(
        "build.unit_count", "string",
        "How ``rocmbuild plan --units`` counts the build's compile units after fetching the "
        "source. ``ck-fmha``: Composable Kernel's fmha ``generate.py --list_blobs`` (found in the "
        "tree or in a download), for the directions in ``CK_FMHA_DIRECTIONS`` (default "
        "setup.py's fwd, fwd_appendkv, fwd_splitkv, bwd) at receipt 2 with the head dims in "
        "``OPT_DIM``, the names matching ``CK_FMHA_UNITS`` when set; no compiler runs. "
        "``ninja``: configure the tree's CMake project (``build.source_dir``) in a temporary "
        "build directory with the cmake backend's configure command (generator Ninja, the HIP "
        "compiler, archs and ``build.cmake_args``, the plan's env), then count the object "
        "files ``ninja -t targets all`` lists (compile edges; links and custom commands are "
        "not counted); also for pip-wheel recipes whose tree is a CMake project. ``auto``: "
        "``ninja`` for the cmake backend, not counted for pip-wheel. ``none``: not counted.",
        '"ck-fmha"', default="auto", choices=UNIT_COUNTS,
        noun="unit count",
    )
    variants: dict[str, Variant] = toml(
        "variants", "tables",
        "Named build variants, chosen with ``--variant <name>``; each adds to or overrides "
        "[build].", "", item=Variant, factory=dict, item_msg="expected a table",
    )
    offline: bool = toml(
        "build.offline", "boolean",
        "Run the build's commands without network: in a new network namespace "
        "(``unshare --net`` as root, ``unshare --net --map-root-user`` otherwise). Everything "
        "the build needs comes from fetch (the source, its submodules, [[downloads]]); a build "
        "that still tries to download fails naming the host. Where no namespace can be made, "
        "the build runs with network after a warning (``ROCMBUILD_OFFLINE=require`` makes "
        "that an error).", "true", default=True,
    )
    downloads: tuple[Download, ...] = toml(
        "downloads", "array",
        "Extra files the build needs (prebuilt libraries such as AOTriton), fetched and "
        "verified by fetch, cached by sha256 and handed to the build through a variable.", "",
        item=Download, default=(),
        item_msg="expected a table ([[downloads]] with name, url, sha256, env)",
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
    validate_upstream_tests: tuple[str, ...] = toml(
        "validate.upstream_tests", "strings",
        "The package's own test files (paths relative to the source tree's top) that "
        "``rocmbuild validate`` runs on a GPU: copied from the cached source tree, a seeded "
        "sample of ``--upstream-tests N`` cases per test function, run with pytest in the "
        "validation venv under a time cap; a failing case fails the wheel. Recorded in "
        "rocmbuild.json as ``validate_upstream``.", '["tests/test_flash_attn_ck.py"]',
        default=(),
    )
    validate_upstream_env: tuple[tuple[str, str], ...] = toml(
        "validate.upstream_env", "env", "Environment the upstream tests need (on top of the "
        "variant's runtime_env).", '{ PYTORCH_NO_CUDA_MEMORY_CACHING = "1" }', default=(),
    )
    validate_floor: dict[str, Floor] = toml(
        "validate.floor", "tables",
        "Absolute throughput floors per arch (``[validate.floor.gfx942]``), checked by the kernel "
        "gate on every run on that arch, also the first one on a new machine (before the "
        "workspace's baseline store has figures). Recorded in rocmbuild.json as "
        "``validate_floor``.", "", item=Floor, factory=dict, item_msg="expected a table "
        "([validate.floor.<arch>] with fwd_tflops, bwd_tflops, sdpa_fraction)",
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
