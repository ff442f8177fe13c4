"""``[releases.<name>]``: the release lines of a recipe (docs/releases.md).

A line is one upstream release series with its own source pin and host ranges: flash-attn's ROCm
fork (C++17, torch < 2.14) and Dao-AILab main (C++20, torch >= 2.14), PyTorch 2.9 / 2.13 / 2.14.
Its keys sit at the same places as the recipe's own (``[releases.main.build] host_requires =
[...]``) and fill the ``Recipe`` field of the same name: a key the line sets replaces the
recipe's value as a whole, except ``build.env``, whose variables are added on top (as a
variant's env is). ``Recipe.on_line`` makes that recipe; the variants then apply on top of it
exactly as without lines. Lines are declared newest first; which one a host gets is decided in
one place, ``rocmbuild.plan.planning``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.recipe.keys import (
    COMPONENT_SINCE,
    COMPONENT_SINCE_MSG,
    HOST_REQUIREMENTS,
    RECIPE_NAME,
    RECIPE_NAME_MSG,
    RELATIVE,
    ROCM_COMPONENTS,
    ROCM_VERSION,
    ROCM_VERSION_MSG,
    UNIT_COUNTS,
    toml,
)
from rocmbuild.recipe.tables import Download, Option, Source

RELEASE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""The name in ``[releases.<name>]`` (``2.8-fork``, ``main``, ``"2.13"``)."""

LINE_ONLY = ("name", "about", "offers", "offers_reason")
"""Fields of a line that say something about the line itself; every other field overrides the
``Recipe`` field of the same name."""


@dataclass(frozen=True)
class Release:
    """One release line: what differs from the recipe's top-level keys (None: the recipe's)."""

    name: str
    """The table's name in ``[releases.<name>]`` (forced with ``--release <name>``)."""
    about: str = toml(
        "description", "string",
        "One line: the upstream release series and what it was checked against (``rocmbuild "
        "plan`` prints it with the line).",
        '"Dao-AILab main 0251105a: C++20, torch >= 2.14"', default="",
    )
    offers: tuple[str, ...] | None = toml(
        "variants", "strings",
        "The recipe's variants this line builds (the others are refused with "
        "``variants_reason``).", '["ck"]', default=None, default_text="every variant",
    )
    offers_reason: str = toml(
        "variants_reason", "string", "Why the line builds only ``variants``: the message a "
        "refused ``--variant`` gets.",
        '"main\'s Triton backend is the third_party/aiter submodule, built as its own wheel"',
        default="",
    )
    source: Source | None = toml(
        "source", "table", "The line's source pin: the same keys as [source].", "",
        item=Source, default=None,
    )
    alternatives: dict[str, Source] | None = toml(
        "source.alternatives", "tables",
        "The line's other sources (``{}``: none), replacing source.alternatives.", "",
        item=Source, default=None, item_msg="expected a table with one of git, sdist, path",
    )
    rocm_default: str | None = toml(
        "target.rocm", "string", "Overrides target.rocm.", '"7.14"', default=None,
        default_text="target.rocm", pattern=ROCM_VERSION, pattern_msg=ROCM_VERSION_MSG,
    )
    version: str | None = toml(
        "package.version", "string", "Overrides package.version.", '"2.14.0"', default=None,
        default_text="package.version",
    )
    supported_archs: tuple[str, ...] | None = toml(
        "arch.supported", "strings", "Overrides arch.supported.", '["gfx90a", "gfx942"]',
        default=None, choices=tuple(KNOWN_ARCHS), noun="GPU architecture",
        default_text="arch.supported",
    )
    env: tuple[tuple[str, str], ...] | None = toml(
        "build.env", "env",
        "Variables added to build.env (a line's value wins), e.g. the release's version or its "
        "C++ standard flags.", '{ PYTORCH_BUILD_VERSION = "2.14.0" }', default=None,
        placeholders=True, default_text="build.env",
    )
    mem_per_job_gb: float | None = toml(
        "build.mem_per_job_gb", "number", "Overrides build.mem_per_job_gb.", "5.0",
        default=None, positive=True, default_text="build.mem_per_job_gb",
    )
    disk_gb: float | None = toml(
        "build.disk_gb", "number", "Overrides build.disk_gb.", "60", default=None, positive=True,
        default_text="build.disk_gb",
    )
    link_units_per_arch: int | None = toml(
        "build.link_units_per_arch", "integer", "Overrides build.link_units_per_arch.", "930",
        default=None, positive=True, default_text="build.link_units_per_arch",
    )
    host_requires: tuple[str, ...] | None = toml(
        "build.host_requires", "strings",
        "The line's host ranges (overrides build.host_requires): a host gets the newest line "
        "whose ranges it satisfies.", '["rocm-torch>=2.14", "rocm-sdk>=7.0"]', default=None,
        choices=HOST_REQUIREMENTS, noun="requirement", versioned=True,
        default_text="build.host_requires",
    )
    host_requires_reason: str | None = toml(
        "build.host_requires_reason", "string",
        "Why the line's ranges are what they are (overrides build.host_requires_reason).",
        '"setup.py builds CK with -std=c++20"', default=None,
        default_text="build.host_requires_reason",
    )
    rocm_components: tuple[str, ...] | None = toml(
        "build.rocm_components", "strings", "Overrides build.rocm_components.", '["hipfile"]',
        default=None, choices=ROCM_COMPONENTS, noun="ROCm component",
        default_text="build.rocm_components",
    )
    rocm_components_since: tuple[str, ...] | None = toml(
        "build.rocm_components_since", "strings", "Overrides build.rocm_components_since.",
        '["hipfile>=7.14", "amd_smi>=7.14"]', default=None, pattern=COMPONENT_SINCE,
        pattern_msg=COMPONENT_SINCE_MSG, default_text="build.rocm_components_since",
    )
    python_requires: tuple[str, ...] | None = toml(
        "build.python_requires", "strings", "Overrides build.python_requires.", '["torch"]',
        default=None, default_text="build.python_requires",
    )
    build_requires: tuple[str, ...] | None = toml(
        "build.build_requires", "strings", "Overrides build.build_requires.",
        '["setuptools>=70.1,<80", "wheel"]', default=None, requirement=True,
        default_text="build.build_requires",
    )
    depends: tuple[str, ...] | None = toml(
        "build.depends", "strings", "Overrides build.depends (``[]``: none).", '["aiter"]',
        default=None, default_text="build.depends", pattern=RECIPE_NAME,
        pattern_msg=RECIPE_NAME_MSG,
    )
    build_requirements_file: str | None = toml(
        "build.build_requirements_file", "string",
        'Overrides build.build_requirements_file (``""``: none).', '"requirements-build.txt"',
        default=None, default_text="build.build_requirements_file", pattern=RELATIVE,
        pattern_msg="must be a relative path inside the source tree (no leading / and no ..), "
        "got %r",
    )
    cmake_args: tuple[str, ...] | None = toml(
        "build.cmake_args", "strings", "Overrides build.cmake_args.", '["-DBUILD_TESTING=OFF"]',
        default=None, placeholders=True, default_text="build.cmake_args",
    )
    unit_count: str | None = toml(
        "build.unit_count", "string", "Overrides build.unit_count.", '"ck-fmha"', default=None,
        choices=UNIT_COUNTS, noun="unit count", default_text="build.unit_count",
    )
    default_variant: str | None = toml(
        "build.default_variant", "string", "Overrides build.default_variant.", '"ck"',
        default=None, default_text="build.default_variant",
    )
    bundle_libs: tuple[str, ...] | None = toml(
        "bundle.libs", "strings", "Overrides bundle.libs.", '["libhipfile.so*"]', default=None,
        default_text="bundle.libs",
    )
    bundle_data: tuple[str, ...] | None = toml(
        "bundle.data", "strings", "Overrides bundle.data.", '["lib/rocblas/library/*"]',
        default=None, default_text="bundle.data", pattern=RELATIVE,
        pattern_msg="must be a relative glob inside the ROCm root (no leading / and no ..), "
        "got %r",
    )
    options: dict[str, Option] | None = toml(
        "options", "tables", "The line's [options] (``[releases.<name>.options.<option>]``), "
        "replacing the recipe's.", "", item=Option, default=None,
        item_msg="expected a table ([options.<name>] with env, default, help)",
    )
    downloads: tuple[Download, ...] | None = toml(
        "downloads", "array", "The line's [[downloads]] (``[[releases.<name>.downloads]]``), "
        "replacing the recipe's.", "", item=Download, default=None,
        item_msg="expected a table ([[downloads]] with name, url, sha256, env)",
    )
