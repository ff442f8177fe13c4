"""The recipe schema's building blocks: ``Key`` (one TOML key, as dataclass field metadata),
``toml()`` (a field read from a key), ``keys()`` / ``key_of()`` / ``default_of()`` (what a model
class declares), and the constants the keys' choices and checks name.

The model classes (``recipe.tables``: the nested tables; ``recipe.model``: ``Recipe``) carry a
``Key`` on each field that comes from the TOML file: where it lives in the file, its TOML type, its
default, whether placeholders are allowed, what values it accepts, and its reference text. The
loader's checks (``recipe.check``), ``docs/recipes.md`` and ``schemas/recipe.schema.json`` (both
written by ``python -m rocmbuild.recipe.schema``) are derived from these fields and from nothing
else.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocmbuild.core.components import COMPONENTS

SCHEMA_VERSION = 1

BACKENDS = ("pip-wheel", "cmake")
"""Values of build.backend (documented on ``Recipe.backend``)."""
CMAKE_WHEELS = ("install", "pip-wheel")
"""Values of build.cmake_wheel (documented on ``Recipe.cmake_wheel``)."""

UNIT_COUNTS = ("auto", "ninja", "ck-fmha", "ck-fmha-targets", "none")
"""Values of build.unit_count (documented on ``Recipe.unit_count``)."""

HOST_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk", "hip-compiler")
"""What ``build.host_requires`` may name. ``torch``, ``rocm-torch`` and ``rocm-sdk`` may carry a
PEP 440 version range: ``rocm-sdk>=6.2,<7.1``, ``rocm-torch>=2.2,<2.14``."""

RANGED_REQUIREMENTS = ("torch", "rocm-torch", "rocm-sdk")
"""The requirements that may carry a version range."""


ROCM_COMPONENTS = tuple(COMPONENTS)
"""What ``build.rocm_components`` may name (``rocmbuild.core.components.COMPONENTS``)."""

COMPONENT_SINCE = r"^(" + "|".join(ROCM_COMPONENTS) + r")>=[0-9]+\.[0-9]+$"
"""An item of ``build.rocm_components_since``: a component and the ROCm major.minor from which
the build requires it (``hipfile>=7.14``)."""
COMPONENT_SINCE_MSG = ("must be a ROCm component and the ROCm major.minor it is required from, "
                       "like hipfile>=7.14, got %r")

WHEN_KEYS = ("variant", "source", "arch", "gpu_vendor", "rocm", "release")
"""Keys of a patch's or download's ``when`` table; each value is a string or a list of strings
(any matches). ``rocm`` is the plan's ROCm version (major.minor, as in the local label);
``release`` the release line the plan is on (``[releases.<name>]``)."""


HIPIFY_TOOLS = ("torch", "command", "perl")
"""Values of hipify.tool (documented on ``Hipify.tool``)."""
ROCM_VERSION = r"\d{1,4}(\.\d{1,4}){1,2}\Z"
"""A ROCm release as ``target.rocm`` gives it (``6.2``, ``7.2.1``): checked when the recipe
loads, not when a plan first needs it."""
ROCM_VERSION_MSG = "%r is not a ROCm version like \"6.2\" or \"7.2.1\""

ROCM_RUNTIMES = ("host", "bundle", "none")
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
    lines: bool = False
    """Prose that may span lines: a tab or line break is allowed (other control characters are
    refused in every string, ``untrusted.controls``)."""

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


RECIPE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
RECIPE_NAME_MSG = "must be a recipe name (letters, digits, '.', '_', '-'), got %r"
HEX40 = r"^[0-9a-f]{40}$"
HEX64 = r"^[0-9a-f]{64}$"


RELATIVE = r"^(?!/)(?!.*(^|/)\.\.(/|$))"
"""A relative path inside the source tree (no leading / and no ..)."""
RELATIVE_MSG = "must be a relative path inside the source tree (no leading / and no ..), got %r"
