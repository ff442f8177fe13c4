"""build.cmake_wheel: the cmake backend's two ways from a built tree to a wheel. ``install``
(the default) stages ``cmake --install`` and packs the prefix (package.version required);
``pip-wheel`` runs the project's own packaging after the build (bitsandbytes: setup.py with
BNB_SKIP_CMAKE=1 packs the library CMake wrote into bitsandbytes/)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import RecipeError
from rocmbuild.host.compiler import HipCompiler
from rocmbuild.plan.backend import backend_commands
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.unit.plan.test_render import HOST

BASE = """schema_version = 1
[package]
name = "lib"
{version}
[source]
path = "."
[build]
backend = "cmake"
{wheel}
"""
VALUES = {"archs": "gfx942", "hip_compiler": "/usr/bin/clang++-22", "hip_flags": ""}


def recipe(tmp_path: Path, version: str = "", wheel: str = "") -> Path:
    p = tmp_path / "lib.toml"
    p.write_text(BASE.format(version=version, wheel=wheel))
    return p


def test_install_is_the_default_and_needs_a_version(tmp_path: Path) -> None:
    r = load(recipe(tmp_path, 'version = "1.0"'))
    assert r.cmake_wheel == "install"
    assert [c[:2] for c in backend_commands(r, VALUES)] == [
        ("cmake", "-S"), ("cmake", "--build"), ("cmake", "--install")]
    with pytest.raises(RecipeError) as exc:
        load(recipe(tmp_path))
    assert any("package.version: missing" in p for p in exc.value.problems)


def test_pip_wheel_builds_then_runs_pip_wheel_and_needs_no_version(tmp_path: Path) -> None:
    r = load(recipe(tmp_path, wheel='cmake_wheel = "pip-wheel"'))
    cmds = backend_commands(r, VALUES)
    assert [c[:2] for c in cmds] == [("cmake", "-S"), ("cmake", "--build"), ("python", "-m")]
    assert cmds[-1][-4:] == ("--no-build-isolation", "-w", "{wheel_tmp}", ".")
    with pytest.raises(RecipeError) as exc:
        load(recipe(tmp_path, wheel='cmake_wheel = "wheel"'))
    assert any("build.cmake_wheel" in p for p in exc.value.problems)


def test_the_bitsandbytes_plan(tmp_path: Path) -> None:
    clang = HipCompiler("/usr/bin/clang++-22", "clang", "22.1.8", None, None, ())
    plan = render(load(find_recipe("bitsandbytes")), Target(arch="gfx90a,gfx942,gfx950"),
                  replace(HOST, compiler=clang))
    assert plan.backend == "cmake" and plan.cmake_wheel == "pip-wheel"
    configure, build, wheel = plan.commands
    assert "-DCOMPUTE_BACKEND=hip" in configure
    assert "-DBNB_ROCM_ARCH=gfx90a;gfx942;gfx950" in configure
    assert "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942;gfx950" in configure
    assert wheel[:4] == ("python", "-m", "pip", "wheel")
    assert plan.env["BNB_SKIP_CMAKE"] == "1"
    assert plan.runtime.mode == "host" and not plan.uses_torch  # no torch at build time
    assert plan.to_json()["cmake_wheel"] == "pip-wheel"
    assert {"hipblas", "hipblaslt", "hiprand"} <= set(plan.rocm_components)
