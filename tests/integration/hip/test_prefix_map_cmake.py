"""The cmake backend's compiles map the tree to ".", for real: a CMake project of one C++ unit
(g++) and one HIP unit (the real HIP clang, gfx942), both embedding ``__FILE__`` (the HIP unit
in host and device code), built with debug info in two workspaces: the wheels are byte for
byte the same and the library names neither workspace. Before the build stage put
launchers/cuid.py (``-ffile-prefix-map=<tree>=.``) in CMake's C/CXX launchers and the map in
its HIP launcher, the library held the tree's absolute path and the wheels differed. The
pip-wheel backend's test is tests/integration/test_prefix_map.py."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import rocmbuild
from tests.integration.test_prefix_map import shared_objects

CMAKE = """cmake_minimum_required(VERSION 3.27)
project(where LANGUAGES CXX HIP)
add_library(where SHARED src/host.cpp src/kernel.hip)
install(TARGETS where LIBRARY DESTINATION lib)
"""
HOST = 'extern "C" const char* host_file() { return __FILE__; }\n'
KERNEL = """#include <hip/hip_runtime.h>
__device__ const char device_file[] = __FILE__;
__global__ void k(char* x) { x[threadIdx.x] = device_file[threadIdx.x % 8]; }
extern "C" const char* hip_file(char* x) {
  hipLaunchKernelGGL(k, dim3(1), dim3(64), 0, 0, x);
  return __FILE__;
}
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
backend = "cmake"
mem_per_job_gb = 0.5
python_requires = ["cmake", "ninja"]
repair = false
cmake_args = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
"""


def test_cmake_cxx_and_hip_units_are_the_same_in_two_workspaces(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "src").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(CMAKE)
    (src / "src/host.cpp").write_text(HOST)
    (src / "src/kernel.hip").write_text(KERNEL)
    recipe = tmp_path / "where.toml"
    recipe.write_text(RECIPE.format(src=src))
    wheels = []
    for name in ("one", "second-workspace"):
        res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--compile-cache", "none",
                        env={"ROCMBUILD_WORKDIR": str(tmp_path / name)})
        assert res.returncode == 0, res.stderr
        wheels.extend((tmp_path / name / "wheels").glob("*.whl"))
    a, b = wheels
    (so,) = shared_objects(a).values()
    assert b"./src/host.cpp" in so and b"./src/kernel.hip" in so
    assert str(tmp_path).encode() not in so and b"/src/where/" not in so
    assert shared_objects(b) == shared_objects(a)
    assert a.read_bytes() == b.read_bytes()
