"""The real ROCm 7.2 SDK tree (scripts/install-rocm-sdk.sh: Debian experimental's ROCm 7.2.4
-dev packages, unpacked; setup.sh installs it): rocmbuild finds its version and components, and
builds a HIP library of ours against it with clang-22 as the bitsandbytes recipe builds
bitsandbytes' (tests/fixtures/rocm72-lib: a kernel and calls into hipBLAS, hipRAND and
hipBLASLt, each found by its CMake config).

Nothing here is faked but the GPU: the headers, CMake configs and device libraries are ROCm
7.2.4's; its libraries are link stubs with the real sonames and symbols (the real ones need glibc
2.38), so what is linked is what a ROCm 7.2 host loads. Skipped, naming the script, when the tree
is not installed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts import elf
from rocmbuild.host import toolchain
from tests.conftest import REPO, make_rocm_torch, rocmbuild

# the script's own variable (not rocmbuild's: rocmbuild is pointed at the tree by ROCM_PATH)
SDK_DIR = Path(os.environ.get("ROCMBUILD_ROCM_SDK_DIR")
               or Path.home() / ".cache/rocmbuild/rocm-7.2")
ROOT = SDK_DIR / "usr"
RECIPE = REPO / "tests/recipes/rocm72-lib.toml"

pytestmark = pytest.mark.skipif(
    not (ROOT / toolchain.SDK_FACTS).is_file(),
    reason=f"no ROCm 7.2 SDK tree at {SDK_DIR}: run scripts/install-rocm-sdk.sh (setup.sh does, "
    "unless ROCMBUILD_SKIP_APT=1)")


def env_for(**extra: str) -> dict[str, str]:
    return {"ROCM_PATH": str(ROOT), "HIP_PATH": "", "ROCMBUILD_HIP_COMPILER": "", **extra}


def test_the_tree_is_found_as_a_debian_laid_out_rocm_72() -> None:
    root = toolchain.find_rocm_root(str(ROOT))
    assert root is not None
    assert (root.kind, root.layout, root.version) == ("rocm", "debian", "7.2.4")
    assert root.version_from == "include/rocm-core/rocm_version.h"  # no .info/version
    assert root.hip_version.startswith("7.2.")
    assert Path(root.device_lib_path, "ocml.bc").is_file()
    assert not root.has_hipcc  # Debian's hipcc needs glibc 2.38: not used
    # the components the bitsandbytes recipe needs, in the multiarch and share/cmake dirs
    assert root.components is not None
    assert {"hip", "hipblas", "hiprand", "rocrand", "hipblaslt", "rocblas", "hipcub",
            "rocprim"} <= set(root.components)


def test_doctor_and_plan_judge_the_real_tree(tmp_path: Path) -> None:
    """doctor's component checks and the torch/SDK rule on the real tree (the fixture-tree tests
    in test_rocm_check.py cover the rest): every component of the bitsandbytes recipe found; a
    ROCm torch for 6.2 (metadata only: none exists here) against this 7.2 SDK refused; the clang
    compiles against the tree's headers and device libraries."""
    res = rocmbuild("doctor", "--recipe", "bitsandbytes", "--arch", "gfx942", env=env_for())
    lines = res.stderr.splitlines()
    assert any(ln.startswith("ok   rocm ") and "ROCm 7.2.4" in ln for ln in lines), res.stderr
    assert res.returncode == 0, res.stderr
    assert any(ln.startswith("ok   rocm-components all 8 ROCm components bitsandbytes needs")
               and "hipblaslt" in ln and "hipcub, rocprim" in ln for ln in lines), res.stderr
    hip = next(ln for ln in lines if ln.startswith("ok   hip-compiler "))
    assert f"against {ROOT} (layout debian)" in hip
    assert any(ln.startswith("ok   arch:gfx942 ") for ln in lines), res.stderr
    # the torch/SDK rule: a recipe that needs both, a torch for ROCm 6.2 against ROCm 7.2.4
    recipe = tmp_path / "ext.toml"
    recipe.write_text('schema_version = 1\n[package]\nname = "ext"\n[source]\npath = "src"\n'
                      '[build]\nhost_requires = ["rocm-torch", "rocm-sdk"]\n'
                      '[validate]\nkernel = "none"\n')
    (tmp_path / "src").mkdir()
    site = make_rocm_torch(tmp_path / "torch62")
    plan = rocmbuild("plan", str(recipe), "--arch", "gfx942",
                     env=env_for(PYTHONPATH=f"{site}:{REPO / 'src'}"))
    assert "a ROCm torch built for the SDK's ROCm 7.2" in plan.stderr, plan.stderr
    assert "with ROCm 7.2.4 of the ROCm root" in plan.stderr


def test_a_library_linking_hipblas_hiprand_hipblaslt_builds_against_the_tree(
        tmp_path: Path) -> None:
    env = env_for(ROCMBUILD_WORKDIR=str(tmp_path / "w"))
    res = rocmbuild("build", str(RECIPE), "--arch", "gfx90a,gfx942", "--jobs", "2",
                    "--cache-dir", str(tmp_path / "cache"), env=env)
    assert res.returncode == 0, res.stderr
    assert "device code for gfx90a, gfx942" in res.stderr
    (wheel,) = (tmp_path / "w/wheels").glob("*.whl")
    assert re.match(r"rocm72lib-1\.0\.0\+rocm7\.2\.gfx90a\.gfx942-py3-none-", wheel.name)
    with zipfile.ZipFile(wheel) as zf:
        so = tmp_path / "librocm72lib.so"
        so.write_bytes(zf.read("rocm72lib/lib/librocm72lib.so"))
        meta = zf.read(next(n for n in zf.namelist() if n.endswith("/METADATA"))).decode()
        prov = json.loads(zf.read(next(n for n in zf.namelist()
                                       if n.endswith("/rocmbuild.json"))))
    assert "Requires-External: rocm (>=7.2,<7.3)" in meta.splitlines()
    assert prov["rocm_version"] == "7.2"
    audit = rocmbuild("audit", str(wheel), "--arch", "gfx90a,gfx942")
    assert audit.returncode == 0 and "gfx90a, gfx942  bundles" in audit.stdout + audit.stderr
    # NEEDED: ROCm 7.2's sonames, those of the real runtime libraries the script unpacked
    needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", _readelf(so)))
    want = {"libamdhip64.so.7", "libhipblas.so.3", "libhiprand.so.1", "libhipblaslt.so.1"}
    assert want <= needed, needed
    facts = json.loads((ROOT / toolchain.SDK_FACTS).read_text())
    runtime = Path(facts["runtime_lib"])
    for name in ("libamdhip64.so.7", "libhipblas.so.3", "libhiprand.so.1"):
        real = next(p for p in runtime.glob(name + "*") if not p.is_symlink())
        assert f"[{name}]" in _readelf(real), real  # the real library's SONAME
    # installed in a fresh venv
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                          "install", "-q", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "rocm72lib/lib/librocm72lib.so").is_file()


def _readelf(path: Path) -> str:
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.slow  # about a minute: 32 MB of runtime copied, patched and zipped
def test_bundling_takes_the_real_runtime_libraries_not_the_link_stubs(tmp_path: Path) -> None:
    """rocm_runtime = "bundle" against the tree: the HIP runtime the library needs
    (libamdhip64.so.7, and its libhsa-runtime64.so.1) is copied from the tree's runtime dir (the
    real ROCm 7.2.4 files), never from the link dir's stubs. Those need glibc 2.38 (Debian
    experimental's build): a manylinux tag the repair stage gave the unbundled wheel is raised to
    manylinux_2_38 (name and WHEEL), and rocmbuild.json says why."""
    recipe = tmp_path / "rocm72lib.toml"
    recipe.write_text(RECIPE.read_text().replace(
        'path = "../fixtures/rocm72-lib"', f'path = "{REPO / "tests/fixtures/rocm72-lib"}"')
        .replace('cmake_args = ', 'rocm_runtime = "bundle"\ncmake_args = '))
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--jobs", "2", "--cache-dir",
                    str(tmp_path / "cache"), env=env_for(ROCMBUILD_WORKDIR=str(tmp_path / "w")))
    assert res.returncode == 0, res.stderr
    (wheel,) = (tmp_path / "w/wheels").glob("*.whl")
    facts = json.loads((ROOT / toolchain.SDK_FACTS).read_text())
    runtime = Path(facts["runtime_lib"])
    with zipfile.ZipFile(wheel) as zf:
        for name in ("libamdhip64.so.7", "libhsa-runtime64.so.1"):
            data = zf.read(f"rocm72lib/lib/{name}")
            real = (runtime / name).resolve().stat().st_size  # MBs; a stub is 2-50 KB
            assert abs(len(data) - real) < 65536, (name, len(data), real)  # patchelf's RPATH
            assert elf.glibc_needed(data) == (2, 38), name
        names = zf.namelist()
        tags = [ln.split(": ", 1)[1] for ln in zf.read(next(
            n for n in names if n.endswith(".dist-info/WHEEL"))).decode().splitlines()
            if ln.startswith("Tag: ")]
        glibc = json.loads(zf.read(next(n for n in names if n.endswith("/rocmbuild.json")))
                           )["rocm_runtime"]["glibc"]
    platform = wheel.name.removesuffix(".whl").rsplit("-", 1)[1]
    assert glibc["glibc"] == "2.38" and glibc["needed_by"].startswith("rocm72lib/lib/")
    repair = re.search(r"\] repair\n\s+(\w+) in [\d.]+s: (\S+)", res.stderr)
    assert repair, res.stderr
    if repair.group(2).startswith("manylinux"):  # auditwheel tagged the unbundled wheel
        assert platform == "manylinux_2_38_x86_64", wheel.name
        assert glibc["platform_to"] == platform and tags == [f"py3-none-{platform}"]
        assert f"-> {platform}" in " ".join(res.stderr.split())  # the warning line
    else:  # kept linux_x86_64: it promises no glibc, nothing to raise
        assert platform == "linux_x86_64" and "platform_to" not in glibc
