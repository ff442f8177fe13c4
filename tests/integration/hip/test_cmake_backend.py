"""The `cmake` backend for real: CMake (pip, >= 3.27) configures a HIP library with -G Ninja, the
detected compiler and flags, CMAKE_HIP_ARCHITECTURES from --arch; ninja builds it with MAX_JOBS;
`cmake --install` stages it; rocmbuild packs the prefix as a wheel; the audit stage checks the
archs. Uses tests/fixtures/cmake-hip (a plain HIP shared library, not a Python extension)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO, rocmbuild

RECIPE = """schema_version = 1
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


def test_cmake_backend_builds_packs_and_audits(tmp_path: Path) -> None:
    recipe = tmp_path / "vecadd.toml"
    recipe.write_text(RECIPE.format(src=REPO / "tests/fixtures/cmake-hip"))
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build")}
    plan = rocmbuild("plan", str(recipe), "--arch", "gfx90a,gfx942", "--jobs", "2", env=env)
    assert plan.returncode == 0, plan.stderr
    for text in ("-G Ninja", "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942",
                 "-DCMAKE_HIP_PLATFORM=amd", "CMAKE_BUILD_PARALLEL_LEVEL=2"):
        assert text in plan.stdout, text
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942", env=env)
    assert res.returncode == 0, res.stderr
    assert "device code for gfx90a, gfx942" in res.stderr
    wheel = tmp_path / "build/wheels" / next(
        p.name for p in (tmp_path / "build/wheels").glob("*.whl"))
    assert re.fullmatch(r"vecadd-1\.2\.0\+rocm[\d.]+\.gfx90a\.gfx942-py3-none-linux_x86_64\.whl",
                        wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert "vecadd/lib/libvecadd.so" in names and "vecadd/include/vecadd.h" in names
    # rocm_runtime = "host" (the default): the wheel says which ROCm release it needs
    rocm = re.search(r"\+rocm(\d+)\.(\d+)", wheel.name)
    assert rocm is not None
    major, minor = int(rocm[1]), int(rocm[2])
    assert f"Requires-External: rocm (>={major}.{minor},<{major}.{minor + 1})" in \
        metadata.decode().splitlines(), metadata
    assert "bundle\n      skipped" in res.stderr
    # ... and publish files it under that ROCm's view, where pip finds it
    index = tmp_path / "index"
    pub = rocmbuild("publish", str(wheel), "--index", str(index))
    assert pub.returncode == 0, pub.stderr
    view = index / "stable" / f"rocm{major}.{minor}" / "simple"
    assert (view / "vecadd" / "index.html").is_file()
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                          str(tmp_path / "dl"), "--index-url", view.as_uri() + "/", "vecadd"],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    assert [p.name for p in (tmp_path / "dl").iterdir()] == [wheel.name]
    log = next((tmp_path / "build/logs").rglob("build.log")).read_text()
    assert re.search(r"^\[\d+/\d+\] ", log, re.M), "ninja's [N/M] progress lines are logged"
    # the audit in the build refuses a wheel without a requested arch: audit it against gfx950
    bad = rocmbuild("audit", str(wheel), "--arch", "gfx950")
    assert bad.returncode == 7 and "libvecadd.so" in bad.stderr


def test_cmake_backend_needs_a_version(tmp_path: Path) -> None:
    recipe = tmp_path / "vecadd.toml"
    recipe.write_text(RECIPE.replace('version = "1.2.0"\n', "").format(
        src=REPO / "tests/fixtures/cmake-hip"))
    res = rocmbuild("plan", str(recipe), "--arch", "gfx942")
    assert res.returncode == 3 and "package.version: missing" in res.stderr


def test_hip_compiler_flag_picks_the_compiler(tmp_path: Path) -> None:
    """--hip-compiler overrides detection (here: clang-19 from the installed toolchain, which
    gives gfx90a/gfx942 only); a compiler that does not exist is a one-line toolchain error."""
    ok = rocmbuild("plan", "hip-attention-probe", "--arch", "gfx942", "--hip-compiler",
                   "/usr/bin/clang++-19")
    assert ok.returncode == 0, ok.stderr
    assert "HIP_CXX=/usr/bin/clang++-19" in ok.stdout
    bad = rocmbuild("plan", "hip-attention-probe", "--arch", "gfx942", "--hip-compiler",
                    str(tmp_path / "no-such-clang"))
    assert bad.returncode == 10
    assert [x for x in bad.stderr.splitlines() if x.startswith("toolchain error:")] == [
        f"toolchain error: --hip-compiler: HIP compiler '{tmp_path / 'no-such-clang'}' not found"]
