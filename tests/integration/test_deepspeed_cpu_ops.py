"""DeepSpeed's prebuilt CPU op, for real: `rocmbuild build deepspeed --variant cpu-ops` downloads
the PyPI sdist 0.19.8 (pinned by sha256), applies patches/deepspeed/*, and compiles cpu_adam with
g++ against this venv's CPU torch 2.13; `rocmbuild validate` installs the wheel into a fresh venv
and imports the prebuilt op module; with no compiler on PATH, DeepSpeed's own
`CPUAdamBuilder().load()` returns that .so instead of JIT-compiling, and DeepSpeedCPUAdam takes a
step with it. The wheel's own copy of the op builder (patch 0001) is then asked, next to a fake
`rocminfo` of another GPU, for the arch list, wavefront, C++ standard and CPU flags.

Each CPU op is a g++ compile of about 70 s on one core here, so this builds cpu_adam alone
(`--opt deepspeed.cpu_adagrad=0 --opt deepspeed.cpu_lion=0`); the whole CPU set is measured in
docs/dev/benchmarks-notebook.md. Nothing is faked: no GPU is needed for the CPU ops."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import build_once, rocmbuild

ARGS = ("build", "deepspeed", "--variant", "cpu-ops", "--arch", "gfx942",
        "--opt", "deepspeed.cpu_adagrad=0", "--opt", "deepspeed.cpu_lion=0")
SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"


@pytest.fixture(scope="module")
def ds_build(tmp_path_factory: pytest.TempPathFactory, download_cache: Path) -> dict[str, Any]:
    return build_once(tmp_path_factory.mktemp("deepspeed-cpu"), download_cache, *ARGS)


def test_wheel_carries_the_prebuilt_op_for_the_cpu_accelerator(ds_build: dict[str, Any]) -> None:
    """rocm_runtime = "none": no ROCm or gfx part in the label (only the torch the ops are bound
    to), no Requires-External: rocm in METADATA, no archs in the provenance (--arch gfx942 was
    checked, then left out: the wheel is the same for every arch)."""
    wheel: Path = ds_build["wheel"]
    assert re.fullmatch(r"deepspeed-0\.19\.8\+torch2\.13\.cxx11abi(true|false)"  # patch 0002
                        r"-cp311-cp311-linux_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = zf.read("deepspeed/git_version_info_installed.py").decode()
        dist = next(n for n in names if n.endswith(".dist-info/rocmbuild.json"))
        prov = json.loads(zf.read(dist))
        meta = zf.read(dist.replace("rocmbuild.json", "METADATA")).decode()
    assert not any(ln.startswith("Requires-External") for ln in meta.splitlines()), meta[:800]
    assert re.search(r"^Version: 0\.19\.8\+torch2\.13\.cxx11abi(true|false)$", meta, re.M)
    assert prov["archs"] == [] and prov["local_version"].startswith("torch2.13.")
    assert prov["rocm_runtime"] == {"mode": "none", "arch_independent": True}
    assert "PYTORCH_ROCM_ARCH" not in prov["plan"]["env"]  # arch.env: no targets to pass
    assert "shared object(s), no device code (rocm_runtime = none)" in ds_build["stderr"]
    assert SO in names
    assert not any("cpu_adagrad_op" in n or "cpu_lion_op" in n for n in names if n.endswith(".so"))
    # what DeepSpeed's load() reads: the op is installed, for the accelerator it was built for
    assert "'cpu_adam': 1" in info and "'cpu_adagrad': False" in info
    assert "accelerator_name='cpu'" in info and "git_hash='unknown'" in info
    env = prov["plan"]["env"]
    assert env["DS_ACCELERATOR"] == "cpu" and env["DS_CPU_SIMD"] == "avx2"
    assert env["DS_BUILD_CPU_ADAGRAD"] == "0" and env["DS_BUILD_CPU_ADAM"] == "1"
    assert [Path(p["file"]).name[:4] for p in prov["patches"]] == ["0001", "0002"]


def test_cpu_ops_compiled_for_the_named_isa_not_the_build_host(ds_build: dict[str, Any]) -> None:
    """Patch 0001: DS_CPU_SIMD=avx2 gives -march=x86-64-v3 -D__AVX256__, whatever this CPU has
    (upstream: -march=native and the host's AVX-512 flag)."""
    logs = list((ds_build["base"] / "build" / "logs" / "deepspeed").glob("*/build.log"))
    assert len(logs) == 1
    compiles = [ln for ln in logs[0].read_text().splitlines()
                if "cpu_adam_impl.cpp" in ln and " -c " in ln]
    assert compiles, "no compile line for cpu_adam_impl.cpp in the build log"
    assert all("-march=x86-64-v3" in ln and "-D__AVX256__" in ln for ln in compiles)
    assert not any("-march=native" in ln or "__AVX512__" in ln for ln in compiles)


@pytest.fixture(scope="module")
def validated(ds_build: dict[str, Any]) -> dict[str, Any]:
    """`rocmbuild validate --keep-venv` on the wheel: its report and the venv it left."""
    env = ds_build["env"]
    res = rocmbuild("validate", str(ds_build["wheel"]), "--keep-venv", "--json", env=env)
    assert res.returncode == 0, res.stderr
    kept = sorted(Path(env["ROCMBUILD_WORKDIR"]).glob("validate-*/**/bin/python"))
    assert kept, "validate --keep-venv left no venv"
    return {"report": json.loads(res.stdout), "bin": kept[0].parent}


def run_in(venv_bin: Path, code: str, tmp_path: Path, path: str = "",
           **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in the venv with PATH holding only `path` and the venv's bin (no compiler)."""
    run_env = {"PATH": os.pathsep.join(p for p in (path, str(venv_bin)) if p),
               "HOME": str(tmp_path), **env}
    return subprocess.run([str(venv_bin / "python"), "-c", code], capture_output=True, text=True,
                          env=run_env, timeout=300, cwd=tmp_path)


def test_validate_then_load_without_a_compiler(validated: dict[str, Any], tmp_path: Path) -> None:
    steps = validated["report"]["wheels"][0]["steps"]
    assert steps["audit"]["status"] == "success"  # no device code, as rocmbuild.json says
    step = steps["import"]
    # the recipe's [validate] imports reach the validator: the prebuilt module itself
    assert step["status"] == "success" and "deepspeed.ops.adam.cpu_adam_op" in step["reason"]
    ext_dir = tmp_path / "torch-extensions"
    code = ("import shutil; assert shutil.which('c++') is None and shutil.which('g++') is None\n"
            "from deepspeed.ops.op_builder import CPUAdamBuilder\n"
            "m = CPUAdamBuilder().load()\n"
            "import torch\n"
            "from deepspeed.ops.adam import DeepSpeedCPUAdam\n"
            "p = torch.nn.Parameter(torch.ones(8)); p.grad = torch.full((8,), 0.5)\n"
            "DeepSpeedCPUAdam([p], lr=0.1).step()\n"
            "print(round(float(p.data.max()), 4), round(float(p.data.min()), 4))\n"
            "print(m.__file__)\n")
    out = run_in(validated["bin"], code, tmp_path, TORCH_EXTENSIONS_DIR=str(ext_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    *_, step_line, so = out.stdout.strip().splitlines()
    assert step_line == "0.9 0.9"  # Adam's first step moves each weight by lr against its grad
    loaded = Path(so)
    assert loaded.name == Path(SO).name and "site-packages" in loaded.parts
    assert not ext_dir.exists()  # nothing was JIT-compiled


ROCMINFO = """#!/bin/sh
echo "  Name:                    gfx908"
echo "  Wavefront Size:          32(0x20)"
"""
PROBE = ("from deepspeed.ops.op_builder.builder import OpBuilder, cpp_standard\n"
         "from deepspeed.ops.op_builder import CPUAdamBuilder\n"
         "b = CPUAdamBuilder()\n"
         "print(OpBuilder.get_rocm_gpu_arch(), OpBuilder.get_rocm_wavefront_size(),"
         " cpp_standard(), b.cpu_arch(), b.simd_width())\n")


def test_the_shipped_op_builder_takes_the_builds_values(validated: dict[str, Any],
                                                        tmp_path: Path) -> None:
    """Patch 0001 in the wheel's own copy (deepspeed/ops/op_builder/, what JIT builds on the
    user's host use). A fake `rocminfo` on PATH plays a build host with another GPU (a gfx908,
    whose rocminfo says wave 32): without the variables upstream's answers come back; with them,
    the build's. No ROCm exists here: only these functions run, not a HIP compile."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "rocminfo").write_text(ROCMINFO)
    (bin_dir / "rocminfo").chmod(0o755)
    venv = validated["bin"]
    plain = run_in(venv, PROBE, tmp_path, str(bin_dir))
    assert plain.returncode == 0, plain.stderr[-2000:]
    # upstream's answers (the last line: DeepSpeed's logger writes to stdout too)
    arch, wave, std, march, _simd = plain.stdout.splitlines()[-1].split()
    assert (arch, wave, std, march) == ("gfx908", "32", "-std=c++20", "-march=native")
    named = run_in(venv, PROBE, tmp_path, str(bin_dir), PYTORCH_ROCM_ARCH="gfx90a;gfx942",
                   DS_ROCM_WAVEFRONT_SIZE="64", DS_CXX_STD="c++17", DS_CPU_SIMD="avx512")
    assert named.returncode == 0, named.stderr[-2000:]
    assert named.stdout.splitlines()[-1].split() == [
        "gfx90a;gfx942", "64", "-std=c++17", "-march=x86-64-v4", "-D__AVX512__"]
    bad = run_in(venv, PROBE, tmp_path, str(bin_dir), DS_ROCM_WAVEFRONT_SIZE="48")
    assert bad.returncode != 0 and "DS_ROCM_WAVEFRONT_SIZE='48': must be 32 or 64" in bad.stderr
