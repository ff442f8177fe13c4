"""The `cmake` backend for real: CMake (pip, >= 3.27) configures a HIP library with -G Ninja, the
detected compiler and flags, CMAKE_HIP_ARCHITECTURES from --arch; ninja builds it with MAX_JOBS;
`cmake --install` stages it; rocmbuild packs the prefix as a wheel; the repair stage gives it a
manylinux tag with real auditwheel (ROCm's libraries excluded); the audit stage checks the archs.
Uses tests/fixtures/cmake-hip (a plain HIP shared library, not a Python extension)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from rocmbuild.core.run import run
from tests.conftest import REPO, rocmbuild
from tests.integration.hip.conftest import VECADD_RECIPE as RECIPE


def test_cmake_backend_builds_packs_and_audits(tmp_path: Path, vecadd_build: dict) -> None:
    """The session's vecadd build (conftest.vecadd_build: the real CLI, gfx90a+gfx942)."""
    plan = rocmbuild("plan", str(vecadd_build["recipe"]), "--arch", "gfx90a,gfx942", "--jobs",
                     "2", env=vecadd_build["env"])
    assert plan.returncode == 0, plan.stderr
    for text in ("-G Ninja", "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx942",
                 "-DCMAKE_HIP_PLATFORM=amd", "CMAKE_BUILD_PARALLEL_LEVEL=2"):
        assert text in plan.stdout, text
    err, wheel = vecadd_build["stderr"], vecadd_build["wheel"]
    assert "device code for gfx90a, gfx942" in err
    # the repair stage (on by default for cmake): a manylinux tag, libamdhip64 not bundled
    assert re.fullmatch(r"vecadd-1\.2\.0\+rocm[\d.]+\.gfx90a\.gfx942-py3-none-"
                        r"(manylinux\w+\.)?manylinux_2_\d+_x86_64\.whl", wheel.name), wheel.name
    assert re.search(r"\[\d+/\d+\] repair\n +ok in [\d.]+s: .*manylinux_2_\d+_x86_64; bundled: "
                     r"nothing \(ROCm and torch libraries excluded\)", err), err
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        wheel_meta = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "vecadd/lib/libvecadd.so" in names and "vecadd/include/vecadd.h" in names
    # rocm_runtime = "host" (the default): the wheel says which ROCm release it needs
    rocm = re.search(r"\+rocm(\d+)\.(\d+)", wheel.name)
    assert rocm is not None
    major, minor = int(rocm[1]), int(rocm[2])
    assert f"Requires-External: rocm (>={major}.{minor},<{major}.{minor + 1})" in \
        metadata.decode().splitlines(), metadata
    assert "bundle\n      skipped" in err
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
    assert not [n for n in names if "libamdhip64" in n or ".libs/" in n], names
    assert re.search(r"^Tag: py3-none-manylinux_2_\d+_x86_64$", wheel_meta, re.M), wheel_meta
    with zipfile.ZipFile(wheel) as zf:  # the repaired library still needs the host's HIP runtime
        so = tmp_path / "libvecadd.so"
        so.write_bytes(zf.read("vecadd/lib/libvecadd.so"))
    needed = run(["readelf", "-d", so], capture=True).output
    assert re.search(r"NEEDED.*\[libamdhip64\.so\.\d+\]", needed), needed
    pip = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
               tmp_path / "site", wheel], capture=True, check=False)
    assert pip.returncode == 0, pip.output
    assert (tmp_path / "site/vecadd/lib/libvecadd.so").is_file()
    log = next((vecadd_build["workdir"] / "logs").rglob("build.log")).read_text()
    # ninja's status as rocmbuild asks for it (NINJA_STATUS): [finished/total running]
    assert re.search(r"^\[\d+/\d+ \d+\] ", log, re.M), "ninja's [N/M] progress lines are logged"
    units = next((vecadd_build["workdir"] / "logs").rglob("units.jsonl")).read_text()
    assert '"out": "CMakeFiles/vecadd.dir/' in units  # memlog measured the HIP units too
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


UNREPAIRABLE = """cmake_minimum_required(VERSION 3.27)
project(needsdep LANGUAGES C)
add_library(dep SHARED dep.c)
add_library(user SHARED user.c)
target_link_libraries(user PRIVATE dep)
set_target_properties(user PROPERTIES SKIP_BUILD_RPATH ON INSTALL_RPATH "")
install(TARGETS user LIBRARY DESTINATION lib)
"""


def test_repair_not_possible_keeps_linux_tag_and_says_why(tmp_path: Path) -> None:
    """A library the wheel needs that is nowhere to be found (built, not installed, no RPATH):
    auditwheel cannot repair it; the build still succeeds, the wheel keeps linux_x86_64, and
    one warning line gives auditwheel's reason."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(UNREPAIRABLE)
    (src / "dep.c").write_text("int dep(void) { return 1; }\n")
    (src / "user.c").write_text("int dep(void);\nint user(void) { return dep() + 1; }\n")
    recipe = tmp_path / "needsdep.toml"
    recipe.write_text(RECIPE.replace('"vecadd"', '"needsdep"').replace(
        "cmake_args = [\"-DCMAKE_VERBOSE_MAKEFILE=OFF\"]\n", "").format(src=src))
    res = rocmbuild("build", str(recipe), "--arch", "gfx942",
                    env={"ROCMBUILD_WORKDIR": str(tmp_path / "build")})
    assert res.returncode == 0, res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1, res.stderr
    assert "keeps linux_x86_64: auditwheel cannot repair it" in warnings[0]
    assert "libdep.so" in warnings[0], warnings[0]  # auditwheel's own reason
    (wheel,) = (tmp_path / "build/wheels").glob("*.whl")
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
