"""`plan --units` for CMake projects (build.unit_count "ninja", the cmake backend's default):
the fetched tree is configured for real (cmake, Ninja, the HIP compiler CI installs) and the
object files ninja would compile are counted. Nothing is faked; nothing is compiled."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import REPO, rocmbuild
from tests.fixtures.compile_units import CMAKE_RECIPE, cmake_project

PIP_RECIPE = """schema_version = 1
[package]
name = "plain"
version = "1.0.0"
[source]
path = "{src}"
[arch]
supported = ["gfx942"]
[build]
backend = "pip-wheel"
mem_per_job_gb = 0.5
"""


def test_probe_units_match_its_cmakelists(workdir: dict[str, str]) -> None:
    """The probe's count is the .hip/.cpp sources its CMakeLists compiles (module.cpp,
    attn.hip), read from the CMakeLists itself."""
    cmakelists = (REPO / "probes/hip-attention/CMakeLists.txt").read_text()
    sources = set(re.findall(r"\b[\w/]+\.(?:hip|cpp)\b", cmakelists))
    assert len(sources) == 2, sources
    res = rocmbuild("plan", "hip-attention-probe", "--arch", "gfx942", "--units", "--json",
                    env=workdir)
    assert res.returncode == 0, res.stderr
    units = json.loads(res.stdout)["units"]
    assert units["count"] == len(sources), units
    assert "ninja -t targets all" in units["how"]


def test_cmake_project_of_n_units(tmp_path: Path, workdir: dict[str, str]) -> None:
    """A cmake-backend recipe that says nothing counts with ninja: 5 C++ units + 1 HIP unit
    give 6 (the shared library's link is not counted); unit_count = "none" turns it off."""
    src = cmake_project(tmp_path / "src", 5, hip=True)
    recipe = tmp_path / "units.toml"
    recipe.write_text(CMAKE_RECIPE.format(src=src))
    res = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--units", env=workdir)
    assert res.returncode == 0, res.stderr
    assert "compile units: 6 (ninja, after configure)" in res.stdout, res.stdout
    recipe.write_text(CMAKE_RECIPE.format(src=src) + 'unit_count = "none"\n')
    off = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--units", env=workdir)
    assert off.returncode == 0, off.stderr
    assert 'compile units: not counted (build.unit_count = "none")' in off.stdout, off.stdout


def test_cmake_configure_failure_is_one_error(tmp_path: Path,
                                              workdir: dict[str, str]) -> None:
    """A CMakeLists that does not configure: one error naming the log, no traceback."""
    src = cmake_project(tmp_path / "src", 1)
    (src / "CMakeLists.txt").write_text((src / "CMakeLists.txt").read_text()
                                        + 'message(FATAL_ERROR "no such dependency")\n')
    recipe = tmp_path / "units.toml"
    recipe.write_text(CMAKE_RECIPE.format(src=src))
    res = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--units", env=workdir)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert "configure failed" in res.stderr and "units.log" in res.stderr, res.stderr


def test_pip_wheel_without_counter(tmp_path: Path, workdir: dict[str, str]) -> None:
    """A pip-wheel recipe without build.unit_count is not counted, and nothing is fetched."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='plain')\n")
    recipe = tmp_path / "plain.toml"
    recipe.write_text(PIP_RECIPE.format(src=src))
    res = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--units", "--json", env=workdir)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["units"] == {
        "count": None, "how": "no counter for this backend", "settings": {}}
    text = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--units", env=workdir)
    assert "compile units: not counted (no counter for this backend)" in text.stdout
    assert not (Path(workdir["ROCMBUILD_WORKDIR"]) / "logs").exists()
