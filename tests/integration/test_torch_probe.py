"""The build stage imports torch (for its version and C++ ABI flag) only for a plan that uses
torch (``plan.model.uses_torch``). Two real builds through the CLI on this machine, which has a
CPU torch: a cmake build of one C++ unit (real cmake, ninja, c++) that names no torch, and a
``pip wheel`` build of a small setup.py project whose recipe names torch in python_requires.

What sees the probe: a ``sitecustomize`` on PYTHONPATH (which every Python child of the build
inherits: the allow-list passes PYTHONPATH) appends the process id to a marker file whenever a
process imports torch. The pip-wheel build shows that it sees the probe; the cmake build must
leave it empty, write no torch.log and record no torch (nothing here is faked)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild

HOOK = """import os, sys
class _SeeTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            with open({marker!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
        return None
sys.meta_path.insert(0, _SeeTorch())
"""

CMAKE = """schema_version = 1
[package]
name = "notorch"
version = "1.0.0"
[source]
path = "src"
[build]
backend = "cmake"
mem_per_job_gb = 1
python_requires = ["cmake", "ninja"]
"""

PIP = """schema_version = 1
[package]
name = "withtorch"
[source]
path = "src"
[build]
mem_per_job_gb = 1
python_requires = ["torch", "setuptools", "wheel"]
"""


def _build(tmp_path: Path, recipe_text: str, files: dict[str, str]) -> tuple[dict, Path, str]:
    """Build the recipe in a fresh workspace with the torch-import hook on PYTHONPATH: the
    wheel's provenance, the build's log dir and what the hook saw."""
    src = tmp_path / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    recipe = tmp_path / "r.toml"
    recipe.write_text(recipe_text)
    marker = tmp_path / "torch-imports.txt"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.format(marker=str(marker)))
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "PYTHONPATH": path,
           "ROCMBUILD_PROGRESS_SECONDS": "3600"}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--compile-cache", "none",
                    env=env)
    assert res.returncode == 0, res.stderr
    (wheel,) = (tmp_path / "w/wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (member,) = (n for n in zf.namelist() if n.endswith(".dist-info/rocmbuild.json"))
        prov = json.loads(zf.read(member))
    (logs,) = (p for p in (tmp_path / "w/logs").glob("*/*") if p.is_dir()
               and p.name[0] != ".")
    return prov, logs, marker.read_text() if marker.exists() else ""


def test_cmake_build_without_torch_does_not_probe_it(tmp_path: Path) -> None:
    host_torch = importlib.metadata.version("torch")  # this machine has one: not vacuous
    prov, logs, seen = _build(tmp_path, CMAKE, {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(notorch CXX)\n"
                          "add_library(nt SHARED a.cpp)\n"
                          "install(TARGETS nt LIBRARY DESTINATION lib)\n",
        "a.cpp": "int f() { return 1; }\n"})
    assert (logs / "build.log").is_file()
    assert not (logs / "torch.log").exists()
    assert seen == "", seen  # no process of the build imported torch
    # recorded as on a host without torch, though this one has torch host_torch
    assert prov["torch"] == {"version": None, "hip": None, "cuda": None, "cxx11_abi": None}
    assert prov["plan"]["host"]["torch"] is None, host_torch
    assert prov["plan"]["host"]["torch_kind"] == "none"


def test_pip_wheel_build_with_torch_probes_it(tmp_path: Path) -> None:
    prov, logs, seen = _build(tmp_path, PIP, {
        "setup.py": "from setuptools import setup\nsetup(name='withtorch', version='1.0', "
                    "py_modules=['withtorch'])\n",
        "withtorch.py": ""})
    assert (logs / "torch.log").is_file()
    assert len(seen.split()) == 1, seen  # the hook saw the probe's child, and only it
    version = importlib.metadata.version("torch")
    assert prov["torch"]["version"] == version and prov["torch"]["cxx11_abi"] in (True, False)
    assert prov["plan"]["host"]["torch"] == version
