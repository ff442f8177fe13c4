"""``Recipe.on_variant``: the one fold of a variant's keys onto the recipe (as ``on_line`` folds a
release line's), the variant it remembers, and where each folded value came from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.recipe.load import load
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.search import find_recipe
from rocmbuild.recipe.tables import VARIANT_ONLY, VARIANT_RENAMED, Source, Variant

GIT = Source("git", url="https://example.invalid/x.git", commit="a" * 40,
             submodules=("third_party/ck", "third_party/cutlass"))
SDIST = Source("sdist", url="https://example.invalid/x.tar.gz", sha256="b" * 64)

# A value for every field a variant may override, each unlike the recipe's default
SET = {
    "mem_per_job_gb": 0.5, "host_requires": ("torch",), "host_requires_reason": "why",
    "rocm_components": ("hip",), "disk_gb": 1.0, "link_units_per_arch": 930,
    "rocm_runtime": "none", "label_torch": True, "build_requires": ("wheel",),
    "depends": ("aiter",), "build_requirements_file": "req.txt", "unit_count": "none",
    "upstream_tests": ("tests/t.py",), "upstream_env": (("A", "1"),),
}


def recipe(**variant: object) -> Recipe:
    return Recipe(path=Path("/r/x.toml"), name="x", source=GIT, default_variant="plain",
                  alternatives={"pypi": SDIST}, env=(("B", "1"),),
                  rocm_components_since=("hipfile>=7.14",),
                  variants={"plain": Variant("plain"), "v": Variant("v", **variant)})  # type: ignore[arg-type]


def test_every_key_a_variant_sets_replaces_the_recipes() -> None:
    overriding = {f.name for f in dataclasses.fields(Variant)} - set(VARIANT_ONLY)
    assert set(SET) == overriding  # a new Variant field needs a value here
    folded = recipe(**SET).on_variant("v")
    assert folded.variant == "v"
    for name, value in SET.items():
        field = VARIANT_RENAMED.get(name, name)
        assert getattr(folded, field) == value, field
        assert folded.key_for(field).startswith("variants.v."), field
    assert folded.rocm_components_since == ()  # a variant's component list is taken as it is


def test_a_variant_that_sets_nothing_leaves_the_recipe_as_it_is() -> None:
    r = recipe()
    folded = r.on_variant(None)  # the default variant
    assert folded.variant == "plain"
    assert dataclasses.replace(folded, variant="") == r
    assert folded.key_for("build_requires") == "build.build_requires"
    assert folded.key_for("mem_per_job_gb") == "build.mem_per_job_gb"


def test_env_is_kept_apart_and_submodules_narrow_the_git_sources() -> None:
    folded = recipe(env=(("B", "2"),), runtime_env=(("C", "3"),),
                    submodules=("third_party/ck",)).on_variant("v")
    assert folded.env == (("B", "1"),)  # build.env as it is: the plan puts the variant's on top
    assert folded.variant_env == (("B", "2"),)
    assert folded.runtime_env == (("C", "3"),)
    assert folded.source.submodules == ("third_party/ck",)
    assert folded.alternatives["pypi"] == SDIST  # not a git source: nothing to narrow


def test_a_recipe_on_its_line_then_on_a_variant() -> None:
    fa = load(find_recipe("flash-attn")).on_line("2.8-fork")
    triton = fa.on_variant("triton")
    own = fa.variants["triton"]
    assert triton.release == "2.8-fork" and triton.variant == "triton"
    assert triton.host_requires == own.host_requires == ("torch",)
    assert triton.validate_upstream_tests == own.upstream_tests
    assert triton.source.submodules == ()
    assert fa.on_variant(None).variant == fa.default_variant == "ck"


def test_unknown_names_get_the_flags_error() -> None:
    fa = load(find_recipe("flash-attn"))
    with pytest.raises(UsageError) as exc:
        fa.on_variant("nope")
    assert exc.value.message == "--variant: flash-attn has no variant 'nope'"
    assert exc.value.hint == "variants: ck, triton"
    plain = load(find_recipe("bitsandbytes"))
    with pytest.raises(UsageError) as exc:
        plain.on_variant("ck", "nightly.toml: matrix[0].variants")
    assert exc.value.message == "nightly.toml: matrix[0].variants: bitsandbytes has no variants"
    assert exc.value.hint == "leave matrix[0].variants out"
    assert plain.on_variant("default").variant == plain.on_variant(None).variant == "default"


def test_on_known_variant_leaves_an_unknown_name_to_render() -> None:
    r = recipe(host_requires=("torch",))
    assert r.on_known_variant("nope") is r
    assert r.on_known_variant("v").host_requires == ("torch",)
