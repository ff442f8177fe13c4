"""The nested tables of a recipe, one frozen dataclass each: ``Source`` ([source] and its
alternatives), ``Patch`` ([[patches]]), ``Download`` ([[downloads]]), ``Variant``
([variants.<name>]), ``Hipify`` ([hipify]), ``Floor`` ([validate.floor.<arch>]) and ``Option``
([options.<name>]). Each TOML key is a ``Key`` in a field's metadata (``recipe.keys``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core.options import GPU_VENDORS
from rocmbuild.recipe.keys import (
    HEX40,
    HEX64,
    HIPIFY_TOOLS,
    HOST_REQUIREMENTS,
    RECIPE_NAME,
    RECIPE_NAME_MSG,
    RELATIVE,
    RELATIVE_MSG,
    ROCM_COMPONENTS,
    ROCM_RUNTIMES,
    UNIT_COUNTS,
    WHEN_KEYS,
    Key,
    key_of,
    toml,
)


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
                       required="", lines=True)
    when: tuple[tuple[str, tuple[str, ...]], ...] = toml(
        "when", "conditions",
        "Conditions, all of which must hold (empty: always). Keys: variant, source (an "
        f"alternative's name or default), arch, gpu_vendor ({' or '.join(GPU_VENDORS)}), rocm (the "
        "plan's ROCm major.minor), release (a release line's name); each value is a "
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
    subdir: str = toml(
        "subdir", "string",
        "With ``extract``: the variable receives this directory of the extracted tree instead "
        "of its top (a package inside a repository archive); fetch fails naming the download "
        "when the archive has no such directory.", '"python/triton_kernels/triton_kernels"',
        default="", pattern=RELATIVE, pattern_msg=RELATIVE_MSG,
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
    rocm_runtime: str | None = toml(
        "rocm_runtime", "string",
        "Overrides build.rocm_runtime (``none``: a CPU-only variant whose wheel needs no ROCm "
        "and carries no device code).", '"none"', default=None, choices=ROCM_RUNTIMES,
        noun="ROCm runtime", default_text="build.rocm_runtime",
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
    depends: tuple[str, ...] | None = toml(
        "depends", "strings", "Overrides build.depends (``[]``: none).", '["aiter"]',
        default=None, default_text="build.depends", pattern=RECIPE_NAME,
        pattern_msg=RECIPE_NAME_MSG,
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

    def overrides(self, source: Source, alternatives: dict[str, Source]) -> dict[str, Any]:
        """The ``Recipe`` fields this variant replaces (``Recipe.on_variant``), by name: each
        key it sets, in place of the recipe field of the same name (``VARIANT_RENAMED``; its
        rocm_components is taken as it is, without build.rocm_components_since); its submodules
        narrow the git ``source`` and ``alternatives``; its env and runtime_env become
        ``variant_env`` and ``runtime_env``."""
        out = {VARIANT_RENAMED.get(f.name, f.name): getattr(self, f.name)
               for f in dataclasses.fields(self)
               if f.name not in VARIANT_ONLY and getattr(self, f.name) is not None}
        if self.rocm_components is not None:
            out["rocm_components_since"] = ()
        if self.submodules is not None:
            out["source"] = self._narrowed(source)
            out["alternatives"] = {n: self._narrowed(s) for n, s in alternatives.items()}
        return {**out, "variant_env": self.env, "runtime_env": self.runtime_env}

    def _narrowed(self, source: Source) -> Source:
        return (dataclasses.replace(source, submodules=self.submodules)
                if source.kind == "git" and self.submodules is not None else source)

    def key_of(self, field: str) -> str | None:
        """``variants.<name>.<key>`` when this variant sets the ``Recipe`` field ``field``;
        None when it does not."""
        own = {r: v for v, r in VARIANT_RENAMED.items()}.get(field, field)
        if own in VARIANT_ONLY or getattr(self, own, None) is None:
            return None
        return f"variants.{self.name}.{key_of(Variant, own).toml}"


VARIANT_ONLY = ("name", "description", "env", "runtime_env", "submodules")
"""Fields of a variant that ``Recipe.on_variant`` does not put in place of a recipe field: its
name and description, its env (set on top of build.env and arch.env, under its own key), its
runtime_env (the recipe has none) and its submodules (they narrow the git sources)."""
VARIANT_RENAMED = {"upstream_tests": "validate_upstream_tests",
                   "upstream_env": "validate_upstream_env"}
"""Variant fields that override a ``Recipe`` field of another name; every other field outside
``VARIANT_ONLY`` overrides the one of its own name."""


DEFINE = r"^[A-Za-z_][A-Za-z0-9_]*(=[ -~]*)?$(?!\n)"
"""A ``-D`` of the build: a macro name, optionally ``=`` and a printable value."""
DEFINE_MSG = ("must be a macro the build defines, NAME or NAME=VALUE (no -D, no spaces in the "
              "name), got %r")


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
        pattern=RELATIVE, pattern_msg=RELATIVE_MSG,
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
        "Fail the build when compiled code of a translated file still uses a CUDA API "
        "(``cuda*``, ``cu*``, ``CU*``, cuBLAS/cuRAND/... names, ``cuda*`` headers) that the tool "
        "could not map, naming file, line and symbol; uses in ``#if`` blocks the preprocessor "
        "leaves out, and in ``#if`` conditions, are warnings (docs/hipify.md); false: all are "
        "only logged.", "true", default=False,
    )
    defines: tuple[str, ...] = toml(
        "defines", "strings",
        "Macros the build defines (``NAME`` or ``NAME=VALUE``, what it passes as ``-D``): the "
        "preprocessor that decides, for ``strict``, which ``#if`` blocks are compiled sees them.",
        '["USE_FAST_MATH", "BLOCK=256"]', default=(), pattern=DEFINE, pattern_msg=DEFINE_MSG,
    )
    include_dirs: tuple[str, ...] = toml(
        "include_dirs", "strings",
        "Directories (relative to the fetched tree's top) the build searches for headers "
        "(``-I``): the preprocessor reads the project's headers from them (project_dir, the "
        "tree's top and header_include_dirs are searched anyway).", '["common/inc"]',
        default=(), pattern=RELATIVE, pattern_msg=RELATIVE_MSG,
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
    sources: tuple[str, ...] = toml(
        "sources", "strings",
        "The sources that honour it (``default`` or an alternative's name): on another source "
        "the build would ignore the variable, so it is not set and ``--opt`` is refused, naming "
        "the release line and source.", '["pypi"]', default=(),
        default_text="`[]`: every source",
    )
    sources_reason: str = toml(
        "sources_reason", "string", "Why the other sources do not honour it (the refusal's "
        "hint).", '"the fork\'s setup.py never passes OPT_DIM to generate.py"', default="",
    )
    partial: tuple[str, ...] = toml(
        "partial", "strings",
        "Values that build only part of the project (a smoke build of a few kernels): the "
        "wheel's label gets ``partial``, its provenance says why, and publishing refuses it.",
        '["smoke"]', default=(), default_text="`[]`: every value builds the whole project",
    )

    def honoured_by(self, variant: str, source: str) -> bool:
        """Whether a plan of ``variant`` from ``source`` sets this option's variable."""
        return ((not self.variants or variant in self.variants)
                and (not self.sources or source in self.sources))

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

