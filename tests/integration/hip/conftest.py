"""Session fixtures for the HIP tests: real device-code objects built with the real compiler.

Nothing here is faked: every .so/.o is compiled in the test session by clang++ -x hip from the
toolchain that scripts/install-hip-toolchain.sh installs (or a real ROCm). The tests fail, rather
than skip, when no HIP compiler is found: CI installs one.
"""

from __future__ import annotations

import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.core.run import run
from rocmbuild.host import compiler
from rocmbuild.host.compiler import HipCompiler, accepts_arch, hip_env
from tests.conftest import rocmbuild

REPO = Path(__file__).resolve().parents[3]
PROBE = REPO / "probes/hip-attention"

KERNEL_A = """#include <hip/hip_runtime.h>
__global__ void ka(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch_a(float* x) { hipLaunchKernelGGL(ka, dim3(1), dim3(64), 0, 0, x); }
"""
KERNEL_B = """#include <hip/hip_runtime.h>
__global__ void kb(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" void launch_b(float* x) { hipLaunchKernelGGL(kb, dim3(1), dim3(64), 0, 0, x); }
"""
NO_KERNELS = """#include <hip/hip_runtime.h>
extern "C" int count_devices() { int n = 0; (void)hipGetDeviceCount(&n); return n; }
"""

# tests/fixtures/cmake-hip (a plain HIP shared library) as a cmake-backend recipe
VECADD_RECIPE = """schema_version = 1
[package]
name = "vecadd"
version = "1.2.0"
[source]
path = "{src}"
[arch]
supported = ["gfx90a", "gfx942", "gfx950"]
[build]
backend = "cmake"
mem_per_job_gb = 0.5
python_requires = ["cmake", "ninja"]
cmake_args = ["-DCMAKE_VERBOSE_MAKEFILE=OFF"]
"""


def _by_name(name: str) -> HipCompiler | None:
    for c in compiler.load_toolchain_json():
        if c.get("name") == name:
            return compiler._from_toolchain_entry(c, "toolchain.json")
    return None


@pytest.fixture(scope="session")
def hipc() -> HipCompiler:
    """The compiler rocmbuild detects (clang-22 when installed, a real ROCm's amdclang++...)."""
    return compiler.detect()


@pytest.fixture(scope="session")
def clang19() -> HipCompiler:
    """clang-19 from toolchain.json (emits CCOB v2); fall back to the detected compiler."""
    return _by_name("clang-19") or compiler.detect()


@pytest.fixture(scope="session")
def clang22() -> HipCompiler | None:
    return _by_name("clang-22")


def _compile(c: HipCompiler, srcs: list[Path], out: Path, archs: list[str], extra: list[str]):
    argv = [c.path, "-x", "hip", *c.flags, *(f"--offload-arch={a}" for a in archs), *extra,
            *map(str, srcs), "-o", str(out)]
    run(argv, env=hip_env(), capture=True)
    return out


@pytest.fixture(scope="session")
def objs(tmp_path_factory, clang19, clang22) -> dict[str, Path]:
    """name -> built file. Built in parallel (2 workers)."""
    d = tmp_path_factory.mktemp("hipobjs")
    a, b, nok = d / "a.hip", d / "b.hip", d / "nok.hip"
    a.write_text(KERNEL_A)
    b.write_text(KERNEL_B)
    nok.write_text(NO_KERNELS)
    (d / "host.c").write_text("int host_only(int x) { return x + 1; }\n")
    so = ["-fPIC", "-shared"]
    c19 = clang19
    jobs = {
        "one.so": (c19, [a], ["gfx942"], so),
        "two.so": (c19, [a], ["gfx90a:xnack+", "gfx942"], so),
        "comp.so": (c19, [a], ["gfx90a", "gfx942"], [*so, "--offload-compress"]),
        "a_c.o": (c19, [a], ["gfx90a", "gfx942"], ["-fPIC", "-c", "--offload-compress"]),
        "b.o": (c19, [b], ["gfx90a", "gfx942"], ["-fPIC", "-c"]),
        "rdc.o": (c19, [a], ["gfx90a", "gfx942"], ["-fPIC", "-c", "-fgpu-rdc"]),
        "nok.so": (c19, [nok], ["gfx942"], so),
        "hostonly.o": (c19, [a], ["gfx942"], ["-fPIC", "-c", "--offload-host-only"]),
    }
    if clang22 is not None:
        jobs["c22.so"] = (clang22, [a], ["gfx942:sramecc+:xnack-", "gfx950"],
                          [*so, "--offload-compress"])
        jobs["generic.so"] = (clang22, [a], ["gfx9-4-generic"], so)
    out: dict[str, Path] = {}
    with ThreadPoolExecutor(2) as ex:
        futs = {n: ex.submit(_compile, c, s, d / n, ar, e) for n, (c, s, ar, e) in jobs.items()}
        out = {n: f.result() for n, f in futs.items()}
    # two TUs in one .so: one compressed bundle and one plain bundle in .hip_fatbin
    run([c19.path, "-fPIC", "-shared", str(out["a_c.o"]), str(out["b.o"]),
         "-o", str(d / "multi.so"), "-L/usr/lib/x86_64-linux-gnu", "-lamdhip64"],
        env=hip_env(), capture=True)
    out["multi.so"] = d / "multi.so"
    run(["cc", "-fPIC", "-shared", str(d / "host.c"), "-o", str(d / "host.so")], capture=True)
    out["host.so"] = d / "host.so"
    return out


def make_wheel(path: Path, members: dict[str, bytes | Path]) -> Path:
    """A minimal wheel (zip + dist-info) holding ``members``."""
    name, version = path.name.split("-")[:2]
    di = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in members.items():
            zf.writestr(arc, data.read_bytes() if isinstance(data, Path) else data)
        zf.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                    "Tag: cp311-cp311-linux_x86_64\n")
        zf.writestr(f"{di}/RECORD", "")
    return path


def build_probe(out_dir: Path, c: HipCompiler, archs: list[str]) -> Path:
    """Build the probe through rocmbuild itself (recipes/hip-attention-probe.toml): the real
    CLI, the detected compiler ``c``, pip wheel + scikit-build-core + CMake HIP + ninja, then the
    build's own audit stage, which fails the build if an arch is missing."""
    env = {**hip_env(), "ROCMBUILD_WORKDIR": str(out_dir / "work"),
           "ROCMBUILD_HIP_COMPILER": str(c.path)}
    res = run([sys.executable, "-m", "rocmbuild", "build", "hip-attention-probe", "--arch",
               ",".join(archs), "-w", str(out_dir)], env=env, capture=True, timeout=600)
    assert "] audit" in res.output and f"device code for {', '.join(sorted(archs))}" in res.output
    wheels = sorted(out_dir.glob("hipattn-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session")
def vecadd_build(tmp_path_factory) -> dict[str, Any]:
    """The cmake backend's wheel of tests/fixtures/cmake-hip (VECADD_RECIPE, gfx90a+gfx942, the
    detected compiler), built once per session by the real CLI in a workspace of its own. Its
    tests read it (test_cmake_backend) or have `rocmbuild verify` rebuild it in another workspace
    (test_reproducible_cmake)."""
    base = tmp_path_factory.mktemp("vecadd")
    recipe = base / "vecadd.toml"
    recipe.write_text(VECADD_RECIPE.format(src=REPO / "tests/fixtures/cmake-hip"))
    env = {"ROCMBUILD_WORKDIR": str(base / "build")}
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942", env=env)
    assert res.returncode == 0, res.stderr
    (wheel,) = (base / "build/wheels").glob("*.whl")
    return {"recipe": recipe, "env": env, "stderr": res.stderr, "wheel": wheel,
            "workdir": base / "build"}


@pytest.fixture(scope="session")
def probe_archs(hipc) -> list[str]:
    """The archs of probe_wheel_2: gfx90a and gfx942, and gfx950 where the detected compiler
    compiles it (clang-22 from install-hip-toolchain.sh --with-gfx950, a ROCm >= 6.4 compiler):
    one build, not a second one for gfx950 alone."""
    return ["gfx90a", "gfx942", *(["gfx950"] if accepts_arch(hipc, "gfx950")[0] else [])]


@pytest.fixture(scope="session")
def probe_wheel_2(tmp_path_factory, hipc, probe_archs) -> Path:
    return build_probe(tmp_path_factory.mktemp("probe2"), hipc, probe_archs)


@pytest.fixture(scope="session")
def probe_wheel_942(tmp_path_factory, hipc) -> Path:
    return build_probe(tmp_path_factory.mktemp("probe942"), hipc, ["gfx942"])
