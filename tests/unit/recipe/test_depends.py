"""Recipe dependencies in recipes and plans (pure: load and render, nothing built; the real
builds are tests/integration/test_recipe_depends.py): cycles through other recipes, per-variant
overrides, the dependency's target, its key folded into the dependent's, render refusing plans
without their dependencies, and a dependency found on the recipe path before the sibling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocmbuild.core.errors import RecipeError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan import planning
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe import depends
from rocmbuild.recipe.load import load

HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")


def _recipe(d: Path, name: str, body: str = "") -> Path:
    (d / f"src-{name}").mkdir(parents=True, exist_ok=True)
    (d / f"src-{name}" / "setup.py").write_text(f"# {name}\n")
    p = d / f"{name}.toml"
    p.write_text(f'schema_version = 1\n[package]\nname = "{name}"\n[source]\n'
                 f'path = "src-{name}"\n{body}')
    return p


def test_a_cycle_through_another_recipe_names_the_key_that_closes_it(tmp_path: Path) -> None:
    a = _recipe(tmp_path, "a", '[build]\ndepends = ["b"]\n')
    _recipe(tmp_path, "b", '[build]\ndepends = ["c"]\n[variants.x]\n[variants.y]\n'
            'depends = ["a"]\n')
    _recipe(tmp_path, "c")
    with pytest.raises(RecipeError) as info:
        load(a)
    (line,) = info.value.problems
    assert line.endswith("b.toml: variants.y.depends[0]: a dependency cycle: a -> b -> a"), line


def test_repeats_and_depth(tmp_path: Path) -> None:
    _recipe(tmp_path, "c")
    with pytest.raises(RecipeError, match=r"build.depends\[1\]: 'c' is named twice"):
        load(_recipe(tmp_path, "a", '[build]\ndepends = ["c", "c"]\n'))
    chain = [_recipe(tmp_path, f"n{i}", f'[build]\ndepends = ["n{i + 1}"]\n') for i in range(10)]
    _recipe(tmp_path, "n10")
    with pytest.raises(RecipeError, match="dependencies nested more than 8 levels deep"):
        load(chain[0])
    load(chain[2])  # 8 levels below it: allowed


def test_the_plan_carries_the_dependency_and_its_key(tmp_path: Path) -> None:
    _recipe(tmp_path, "dep", '[arch]\nenv = { ARCHS = "{archs}" }\n[variants.first]\n'
            '[variants.second]\n[options.level]\nenv = "LEVEL"\ndefault = "1"\nhelp = "x"\n')
    top = load(_recipe(tmp_path, "top", '[build]\ndepends = ["dep"]\ndefault_variant = "v"\n'
                       '[variants.v]\n[variants.none]\ndepends = []\n'
                       '[options.level]\nenv = "LEVEL"\ndefault = "2"\nhelp = "x"\n'))
    target = Target(arch="gfx90a,gfx942", variant="v", options=(("level", "3"),),
                    rocm_version="6.4", build_tag="2")
    plan = planning.plan(top, target, HOST)
    (dep,) = plan.depends
    # the same archs and ROCm; its own default variant, options and no build tag
    assert dep.archs == ("gfx90a", "gfx942") and dep.rocm.version == "6.4"
    assert dep.env["ARCHS"] == "gfx90a;gfx942" and dep.env["LEVEL"] == "1"
    assert dep.variant == "first" and dep.build_tag == ""
    assert plan.to_json()["depends"] == [
        {"recipe": "dep", "variant": "first", "package": "dep", "cache_key": dep.cache_key}]
    assert plan.build_env is not None and plan.build_env.requires == ()  # made for the wheel
    # the variant that names none has none, and no build env
    alone = planning.plan(top, Target(arch="gfx942", variant="none"), HOST)
    assert alone.depends == () and alone.build_env is None and "depends" not in alone.to_json()

    # a change in the dependency's source changes its key and so the dependent's
    (tmp_path / "src-dep" / "setup.py").write_text("# changed\n")
    again = planning.plan(top, target, HOST)
    assert again.depends[0].cache_key != dep.cache_key
    assert again.cache_key != plan.cache_key


def test_render_refuses_a_plan_without_its_dependencies(tmp_path: Path) -> None:
    _recipe(tmp_path, "dep")
    top = load(_recipe(tmp_path, "top", '[build]\ndepends = ["dep"]\n'))
    with pytest.raises(RecipeError, match="build.depends: dep rendered as nothing"):
        render(top, Target(arch="gfx942"), HOST)


def test_the_recipe_path_comes_before_the_sibling(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """As for `rocmbuild build <name>`: a --recipes / ROCMBUILD_RECIPE_PATH override of a
    dependency wins over the file beside the dependent."""
    here = tmp_path / "here"
    top = _recipe(here, "top", '[build]\ndepends = ["dep"]\n')
    _recipe(here, "dep")
    assert depends.find("dep", top) == here / "dep.toml"
    mine = tmp_path / "mine"
    _recipe(mine, "dep")
    monkeypatch.setenv("ROCMBUILD_RECIPE_PATH", str(mine))
    assert depends.find("dep", top) == mine / "dep.toml"
    assert planning.plan(load(top), Target(arch="gfx942"), HOST).depends[0].recipe_path == \
        mine / "dep.toml"


def test_the_shipped_aiter_recipe() -> None:
    """recipes/aiter.toml: a release tag newer than flash-attention main's third_party/aiter
    gitlink, Triton only, and the wheel's version is the tag's: setuptools_scm is told it by
    name (the fetched tree has no .git, and its fallback 0.1.0 loses to PyPI's stale
    pre-releases)."""
    aiter = load(Path(__file__).parents[3] / "recipes" / "aiter.toml")
    assert aiter.source.commit == "de07f3885ee5f2030ba72b6cc5940d674fd457cf"
    plan = render(aiter, Target(arch="gfx942"), HOST)
    version = plan.env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_AMD_AITER"]
    assert aiter.source.ref == f"v{version}" and version != "0.1.0"
    assert re.sub(r"[^A-Z0-9]+", "_", aiter.name.upper()) == "AMD_AITER"
    assert plan.env["AITER_TRITON_ONLY"] == plan.env["AITER_USE_SYSTEM_TRITON"] == "1"
    assert plan.runtime_env == {"AITER_TRITON_ONLY": "1"} and plan.offline


def test_a_dependency_wheel_that_changed_is_not_installed(tmp_path: Path) -> None:
    """The env stage installs a dependency's wheel only with the sha256 it was built with."""
    from rocmbuild.artifacts.results import DependencyWheel
    from rocmbuild.buildtools import buildenv
    from rocmbuild.core.errors import BuildError
    from rocmbuild.plan.model import BuildEnvSpec

    wheel = tmp_path / "toyaiter-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not the wheel that was built")
    w = DependencyWheel("toyaiter", "k" * 64, "toyaiter", "1.0", wheel, "0" * 64)
    with pytest.raises(BuildError, match=r"^top.toml: build.depends: .* is not the toyaiter "
                       "wheel built for this build"):
        buildenv.ensure(BuildEnvSpec(), tmp_path, tmp_path / "envs", "top", "top.toml", (),
                        tmp_path / "env.log", (w,))
    assert not (tmp_path / "envs").exists()
