"""verify's judgement of a wheel's provenance, on real plans of the shipped recipes (rendered for
a fixed host, as tests/unit/plan/test_render.py does; no build): a provenance edited after the
build is told from a host with another toolchain and from a recipe that pins something else."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rocmbuild import __version__
from rocmbuild.core.errors import RecipeError, ToolchainError, UsageError
from rocmbuild.pipeline.verify import check_inputs, forged, provenance
from rocmbuild.plan.key import key_of_inputs
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.unit.plan.test_render import HOST


def _plan(name: str = "flash-attn", **target: Any) -> Plan:
    recipe = load(find_recipe(name))
    if recipe.releases:
        recipe = recipe.on_line(list(recipe.releases)[-1])
    return render(recipe, Target(arch="gfx942", **target), HOST)


def _provenance(plan: Plan) -> dict[str, Any]:
    """The keys the tag stage records that verify reads (stages/tag.provenance)."""
    return {"rocmbuild_version": __version__, "recipe": plan.recipe,
            "recipe_sha256": plan.recipe_sha256, "package": plan.package,
            "variant": plan.variant, "archs": list(plan.archs), "build_tag": plan.build_tag or None,
            "cache_key": plan.cache_key, "source": plan.source_json(), "plan": plan.inputs_json()}


@pytest.mark.parametrize(("name", "target"), [
    ("flash-attn", {}), ("flash-attn", {"variant": "triton"}),
    ("flash-attn", {"variant": "triton", "build_tag": "3"}), ("aiter", {}), ("pytorch", {}),
    ("deepspeed", {"variant": "cpu-ops"}),  # rocm_runtime = "none": archs []
])
def test_a_recorded_plan_hashes_to_its_own_cache_key(name: str, target: dict[str, str]) -> None:
    plan = _plan(name, **target)
    assert key_of_inputs(plan.inputs_json()) == plan.cache_key
    assert forged(_provenance(plan), __version__) is None


def test_a_path_source_is_keyed_by_its_tree_and_not_rehashed(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "setup.py").write_text("")
    (tmp_path / "r.toml").write_text('schema_version = 1\n[package]\nname = "demo"\n'
                                     '[source]\npath = "tree"\n')
    plan = render(load(tmp_path / "r.toml"), Target(arch="gfx942"), HOST)
    assert plan.source.kind == "path"
    assert key_of_inputs(plan.inputs_json()) is None
    assert forged(_provenance(plan), __version__) is None


@pytest.mark.parametrize(("where", "value", "said"), [
    (("recipe_sha256",), "ab" * 32, "recipe_sha256 is 'abab"),
    (("plan", "recipe_sha256"), "ab" * 32, "recipe_sha256 is '"),
    (("plan", "source", "commit"), "f" * 40, "source is {"),
    (("cache_key",), "ab" * 32, "cache_key is 'abab"),
    (("archs",), ["gfx950"], "archs is ['gfx950']"),
    (("build_tag",), "7", "build_tag is '7', its plan.build_tag None"),
    (("plan", "env", "LD_PRELOAD"), "/tmp/x.so", "its plan hashes to cache key"),
    (("plan", "version"), "9.9", "its plan hashes to cache key"),
])
def test_an_edited_provenance_is_forged(where: tuple[str, ...], value: object, said: str) -> None:
    prov = _provenance(_plan())
    d = prov
    for k in where[:-1]:
        d = d[k]
    d[where[-1]] = value
    why = forged(prov, __version__)
    assert why is not None and said in why, why


def test_edits_made_twice_alike_are_caught_by_the_key() -> None:
    prov = _provenance(_plan())
    for d in (prov, prov["plan"]):
        d["recipe_sha256"] = "ab" * 32
    assert "its plan hashes to cache key" in (forged(prov, __version__) or "")
    prov = _provenance(_plan())
    prov["cache_key"] = prov["plan"]["cache_key"] = "ab" * 32
    assert "its plan hashes to cache key" in (forged(prov, __version__) or "")


def test_another_rocmbuild_version_is_not_called_forged() -> None:
    """Another version may key otherwise: check_inputs names the version instead."""
    prov = _provenance(_plan())
    prov["rocmbuild_version"] = "0.0.1"
    assert forged(prov, __version__) is None
    with pytest.raises(ToolchainError, match="built by rocmbuild 0.0.1"):
        check_inputs(_plan(), prov, __version__)


def test_a_damaged_plan_without_the_keys_is_left_to_the_later_checks() -> None:
    prov = {**_provenance(_plan()), "plan": {}}
    assert forged(prov, __version__) is None


def _consistent(plan: Plan, edit: Any) -> dict[str, Any]:
    """The provenance of ``plan`` after ``edit(plan_json)``, made self-consistent again (the
    cache keys recomputed) as a careful forger, or a nightly's followed upstream, would."""
    prov = _provenance(plan)
    inner = copy.deepcopy(prov["plan"])
    edit(inner)
    key = key_of_inputs(inner)
    assert key is not None
    inner["cache_key"] = prov["cache_key"] = key
    prov["plan"], prov["source"] = inner, inner["source"]
    assert forged(prov, __version__) is None
    return prov


def test_a_pin_the_recipe_does_not_have_is_a_recipe_error() -> None:
    plan = _plan()
    prov = _consistent(plan, lambda p: p["source"].update(commit="f" * 40))
    with pytest.raises(RecipeError, match=r"does not pin what the wheel records: source\.commit"):
        check_inputs(plan, prov, __version__)


def test_a_host_difference_is_a_toolchain_error_naming_it_not_the_key() -> None:
    plan = _plan()
    prov = _consistent(plan, lambda p: p["host"].update(torch="2.12.0"))
    with pytest.raises(ToolchainError) as err:
        check_inputs(plan, prov, __version__)
    assert "host.torch: '2.13.0+cpu' here, '2.12.0' in the wheel" in err.value.message
    assert "cache_key" not in err.value.message


def test_the_same_inputs_pass() -> None:
    plan = _plan()
    check_inputs(plan, _provenance(plan), __version__)


def _wheel_with(tmp_path: Path, prov: dict[str, Any]) -> Path:
    import json
    import zipfile

    path = tmp_path / "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        info = "deepspeed-0.19.8.dist-info"
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: deepspeed\n"
                    "Version: 0.19.8\n\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n")
        zf.writestr(f"{info}/rocmbuild.json", json.dumps(prov))
        zf.writestr(f"{info}/RECORD", "")
    return path


def test_empty_archs_only_for_a_wheel_without_device_code(tmp_path: Path) -> None:
    """A rocm_runtime = "none" wheel records no archs (it is the same for every --arch); any
    other wheel with none is damaged."""
    prov = _provenance(_plan("deepspeed", variant="cpu-ops"))
    assert prov["archs"] == []
    ok = dict(prov, rocm_runtime={"mode": "none", "arch_independent": True})
    assert provenance(_wheel_with(tmp_path, ok))[1]["archs"] == []
    with pytest.raises(UsageError, match="archs: must be a list of gfx targets "
                       r"\(empty only with rocm_runtime none\)"):
        provenance(_wheel_with(tmp_path, dict(prov, rocm_runtime={"mode": "host"})))
