"""Compiled code that does not depend on the workspace's path, for real (docs/reproducible.md):
a plain setuptools C++ extension (real pip, real g++, no compile cache) whose code embeds
``__FILE__`` of a source and a header named by absolute paths (as flash-attn's setup.py names
its csrc/), with debug info (Python's -g), built by the pip-wheel backend in two workspaces:
the wheels are byte for byte the same, and the .so names neither workspace. Before the build
stage added ``-ffile-prefix-map=<tree>=.`` (launchers/cuid.py in the CC/CXX scripts) the .so
held each workspace's tree path and the wheels differed. A torch cpp_extension (ninja, absolute
paths; torch is the host's, no ROCm needed for a C++ unit) is built once: its .so names no
workspace either (two builds would add ~9 s to CI for the same assertion). The cmake backend
(C++ and a HIP unit) is in tests/integration/hip/test_prefix_map_cmake.py."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.conftest import rocmbuild
from tests.fixtures.compile_units import EXT_RECIPE, torch_extension

SETUP = """import os
from setuptools import Extension, setup
here = os.path.dirname(os.path.abspath(__file__))
setup(name="where", version="1.0", ext_modules=[Extension(
    "where", [os.path.join(here, "csrc", "where.cpp")],
    include_dirs=[os.path.join(here, "csrc", "include")], language="c++")])
"""
HEADER = "#pragma once\nstatic const char* header_file() { return __FILE__; }\n"
SOURCE = """#include <Python.h>
#include "where.h"
static PyObject* files(PyObject*, PyObject*) {
  return Py_BuildValue("(ss)", __FILE__, header_file());
}
static PyMethodDef methods[] = {{"files", files, METH_NOARGS, ""}, {nullptr}};
static PyModuleDef mod = {PyModuleDef_HEAD_INIT, "where", "", -1, methods};
PyMODINIT_FUNC PyInit_where() { return PyModule_Create(&mod); }
"""
RECIPE = """schema_version = 1
[package]
name = "where"
version = "1.0"
[source]
path = "{src}"
[arch]
supported = ["gfx942"]
[build]
backend = "pip-wheel"
mem_per_job_gb = 0.5
python_requires = ["setuptools", "wheel"]
"""


def project(src: Path) -> Path:
    (src / "csrc/include").mkdir(parents=True)
    (src / "setup.py").write_text(SETUP)
    (src / "csrc/include/where.h").write_text(HEADER)
    (src / "csrc/where.cpp").write_text(SOURCE)
    return src


def build(recipe: Path, workdir: Path) -> Path:  # one cold build, no compile cache
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--compile-cache", "none",
                    env={"ROCMBUILD_WORKDIR": str(workdir)})
    assert res.returncode == 0, res.stderr
    (wheel,) = (workdir / "wheels").glob("*.whl")
    return wheel


def shared_objects(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.endswith(".so")}


def test_setuptools_extension_is_the_same_in_two_workspaces(tmp_path: Path) -> None:
    recipe = tmp_path / "where.toml"
    recipe.write_text(RECIPE.format(src=project(tmp_path / "src")))
    one, two = tmp_path / "one", tmp_path / "second-workspace"
    a, b = build(recipe, one), build(recipe, two)
    (so,) = shared_objects(a).values()
    # the tree is <workdir>/src/where/<key>/: mapped to "." in __FILE__ and the debug info
    assert b"./csrc/where.cpp" in so and b"./csrc/include/where.h" in so
    assert str(one).encode() not in so and b"/src/where/" not in so
    assert shared_objects(b) == shared_objects(a)
    assert a.read_bytes() == b.read_bytes()


def test_torch_cpp_extension_names_no_workspace(tmp_path: Path) -> None:
    """torch's ninja file compiles ``$in`` by its absolute path: ``__FILE__`` (every
    TORCH_CHECK) held the tree's path until the CXX script mapped it."""
    src = torch_extension(tmp_path / "src", 1)
    module = src / "csrc/module.cpp"
    module.write_text(module.read_text()
                      + 'extern "C" const char* where() { return __FILE__; }\n')
    recipe = tmp_path / "ccext.toml"
    recipe.write_text(EXT_RECIPE.format(src=src))
    workdir = tmp_path / "one"
    (so,) = shared_objects(build(recipe, workdir)).values()
    assert b"./csrc/module.cpp" in so
    assert str(workdir).encode() not in so and b"/src/ccext/" not in so
