"""The recipe as one frozen dataclass, ``Recipe``: the one source of the recipe schema, with the
nested tables of ``recipe.tables`` and the keys of ``recipe.keys``.

Each field that comes from the TOML file carries a ``Key`` in its metadata (``recipe.keys``). The
loader's checks (``recipe.check``), ``docs/recipes.md`` and ``schemas/recipe.schema.json`` (both
written by ``python -m rocmbuild.recipe.schema``) are derived from these fields and from nothing
else. ``TABLES`` holds the reference text of the tables that hold keys of one dataclass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core.errors import UsageError
from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.core.hostenv import NAME as ENV_NAME
from rocmbuild.recipe.check import suggest
from rocmbuild.recipe.keys import (
    BACKENDS,
    CMAKE_WHEELS,
    COMPONENT_SINCE,
    COMPONENT_SINCE_MSG,
    HOST_REQUIREMENTS,
    RECIPE_NAME,
    RECIPE_NAME_MSG,
    ROCM_COMPONENTS,
    ROCM_FROM,
    ROCM_LIBS,
    ROCM_RUNTIMES,
    ROCM_VERSION,
    ROCM_VERSION_MSG,
    SCHEMA_VERSION,
    UNIT_COUNTS,
    kernels,
    key_of,
    toml,
)
from rocmbuild.recipe.releases import LINE_ONLY, Release
from rocmbuild.recipe.tables import Download, Floor, Hipify, Option, Patch, Source, Variant

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
        default="6.2", pattern=ROCM_VERSION, pattern_msg=ROCM_VERSION_MSG,
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
    depends: tuple[str, ...] = toml(
        "build.depends", "strings",
        "Recipes (by name, found like ``rocmbuild build <name>``, then beside this file) "
        "whose wheels this build needs in its build environment. Each is built first (or "
        "taken from the cache) with its default variant and source for the same archs and "
        "ROCm, then installed from its wheel file into this recipe's build environment (made "
        "even without build_requires). Its cache key is part of this recipe's; its name, "
        "version and sha256 go into rocmbuild.json (docs/build-env.md).",
        '["aiter"]', default=(), pattern=RECIPE_NAME, pattern_msg=RECIPE_NAME_MSG,
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
    rocm_components_since: tuple[str, ...] = toml(
        "build.rocm_components_since", "strings",
        "ROCm components the build requires only from a ROCm release on (``name>=X.Y``, the "
        "plan's ROCm major.minor compared), checked as ``rocm_components`` are: PyTorch's "
        "LoadHIP.cmake requires hipfile and amd_smi from ROCm 7.14 on, not below.",
        '["hipfile>=7.14", "amd_smi>=7.14"]', default=(), pattern=COMPONENT_SINCE,
        pattern_msg=COMPONENT_SINCE_MSG,
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
    cmake_wheel: str = toml(
        "build.cmake_wheel", "string",
        "cmake backend: how the built tree becomes a wheel. ``install``: ``cmake --install`` "
        "into a staging prefix, packaged as a ``py3-none-<platform>`` wheel (needs "
        "package.version). ``pip-wheel``: no install step; after the build, the pip-wheel "
        "backend's command (``pip wheel --no-build-isolation --no-deps``, build.pip_args) runs "
        "in the tree, for projects whose CMake writes the library into their Python package "
        "and whose own setup packages it (bitsandbytes: ``BNB_SKIP_CMAKE=1``).",
        '"pip-wheel"', default="install", choices=CMAKE_WHEELS, noun="cmake wheel",
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
        "``$ORIGIN/...`` with patchelf, like upstream's PyTorch ROCm wheels. ``none``: the "
        "wheel carries no device code and needs no ROCm (CPU-only ops): its local version has "
        "no ``rocmX.Y`` or gfx part, its METADATA no ``Requires-External``, the audit fails "
        "on any ELF file with device code, HIP host code or a link to libamdhip64, and "
        "``--arch`` is checked but does not enter the plan (arch.env is not set; the wheel is "
        "the same for every arch, and ``--arch native`` needs no GPU).",
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
        "setup.py's fwd, fwd_appendkv, fwd_splitkv, bwd) at receipt 2, with ``--optdim`` "
        "``OPT_DIM`` when the plan sets it (an option this source honours), the names matching "
        "``CK_FMHA_UNITS`` when set; no compiler runs. ``ck-fmha-targets``: the same, each call "
        "also given ``--targets`` with the plan's gfx names, comma-joined (Dao-AILab main's "
        "setup.py: the count depends on the arch set). "
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
    releases: dict[str, Release] = toml(
        "releases", "tables",
        "Release lines (``[releases.<name>]``), declared newest first: each with its own "
        "source pin, host ranges and build keys, which replace the top-level ones (build.env "
        "adds to it). ``plan``, ``doctor`` and ``build`` take the newest line whose host ranges "
        "this host satisfies; ``--release <name>`` forces one (docs/releases.md). Without "
        "[releases] the top-level keys are the one line.", "", item=Release, factory=dict,
        item_msg="expected a table ([releases.<name>] with the keys that differ)",
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
    release: str = ""
    """The release line this recipe is on ("": none; ``on_line`` sets it; not a TOML key)."""
    variant: str = ""
    """The variant this recipe is on ("": none yet; ``on_variant`` sets it; not a TOML key)."""
    variant_env: tuple[tuple[str, str], ...] = ()
    """That variant's env, set on top of build.env and arch.env (not a TOML key)."""
    runtime_env: tuple[tuple[str, str], ...] = ()
    """That variant's runtime_env: what its wheel needs at run time (not a TOML key)."""

    def on_line(self, name: str, variant: str | None = None) -> Recipe:
        """This recipe as release line ``name`` builds it: each key the line sets replaces the
        recipe's, except ``build.env``, whose variables go on top (the line's win). Variants
        then apply on top of the result as they do without lines; ``variant`` (None: the
        default) must be one the line builds."""
        line = self.releases.get(name)
        if line is None:
            raise UsageError(
                f"--release: {self.path.stem} has no release line {name!r}"
                + suggest(name, self.releases, 0.5) if self.releases else
                f"--release: {self.path.stem} has no release lines",
                hint=f"lines (newest first): {', '.join(self.releases)}" if self.releases
                else "leave --release out")
        values = {f.name: getattr(line, f.name) for f in dataclasses.fields(line)
                  if f.name not in LINE_ONLY and getattr(line, f.name) is not None}
        if "env" in values:
            values["env"] = tuple({**dict(self.env), **dict(values["env"])}.items())
        out = dataclasses.replace(self, release=name, **values)
        wanted = variant or out.default_variant
        if line.offers is not None and wanted not in line.offers:
            raise UsageError(f"--variant: {self.path.stem} line {name} does not build variant "
                             f"{wanted!r}" + (f": {line.offers_reason}" if line.offers_reason
                                              else ""),
                             hint=f"variants of line {name}: {', '.join(line.offers)}")
        return out

    def on_variant(self, name: str | None, flag: str = "--variant") -> Recipe:
        """This recipe as variant ``name`` (None: the default) builds it, remembering which
        (``variant``): each key the variant sets replaces the recipe's (``Variant.overrides``;
        ``key_for`` says which key a value came from). ``flag`` names where ``name`` came from
        in errors (``--variant``, or a nightly.toml key). A recipe with release lines is put
        ``on_line`` first."""
        if name and self.variants and name not in self.variants:
            raise UsageError(f"{flag}: {self.path.stem} has no variant {name!r}",
                             hint=f"variants: {', '.join(self.variants)}")
        if not self.variants and name not in (None, "default"):
            raise UsageError(f"{flag}: {self.path.stem} has no variants",
                             hint=f"leave {flag.split(': ')[-1]} out")
        v = self.variants.get(name or self.default_variant)
        return dataclasses.replace(self, variant=name or self.default_variant,
                                   **(v.overrides(self.source, self.alternatives) if v else {}))

    def on_known_variant(self, name: str | None) -> Recipe:
        """``on_variant`` for what is asked before the name is checked (host detection, the
        dependencies to load): an unknown name gives the recipe as it is (render refuses it)."""
        return self.on_variant(name) if (name or self.default_variant) in self.variants else self

    def key_for(self, field: str) -> str:
        """The TOML key this recipe's value of ``field`` comes from: ``variants.<name>.<key>``
        when the variant it is on sets it, else the recipe's own (``build.build_requires``)."""
        v = self.variants.get(self.variant)
        return (v.key_of(field) if v else None) or key_of(Recipe, field).toml
