"""`rocmbuild plan ... --json` for the CK variant and PyTorch, compared with golden JSON in
tests/golden/. Host facts (python, torch, MAX_JOBS) are pinned or removed so the files are stable;
the ROCm root is a fixture tree (this machine has no ROCm SDK). Regenerate after an intended
change with ROCMBUILD_UPDATE_GOLDEN=1."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import rocmbuild

GOLDEN = Path(__file__).parents[1] / "golden"
CASES = {  # every release line with each variant it builds (the fixture host fits none)
    # ROCm/aiter cannot be fetched here (no GitHub): its plan is all that is checked
    "aiter-gfx942": ["aiter", "--arch", "gfx942"],
    "flash-attn-ck-gfx90a-gfx942": ["flash-attn", "--arch", "gfx90a,gfx942", "--variant", "ck",
                                    "--release", "2.8-fork"],
    "flash-attn-triton-pypi-gfx942": ["flash-attn", "--arch", "gfx942", "--variant", "triton",
                                      "--source", "pypi", "--release", "2.8-fork"],
    "flash-attn-fork-triton-gfx942": ["flash-attn", "--arch", "gfx942", "--variant", "triton",
                                      "--release", "2.8-fork"],
    "flash-attn-main-ck-gfx942": ["flash-attn", "--arch", "gfx942", "--release", "main"],
    # the C++17 line for ROCm >= 7.1 with torch < 2.14: Dao-AILab 0e60e394, or the sdist
    "flash-attn-2.8.3-ck-gfx942": ["flash-attn", "--arch", "gfx942", "--release", "2.8.3"],
    "flash-attn-2.8.3-ck-pypi-gfx942": ["flash-attn", "--arch", "gfx942", "--release", "2.8.3",
                                        "--source", "pypi"],
    # main's Triton backend: the aiter wheel first (depends), patch 0002, AITER_TRITON_ONLY=1
    "flash-attn-main-triton-gfx942": ["flash-attn", "--arch", "gfx942", "--release", "main",
                                      "--variant", "triton"],
    # --rocm-version: the line's ROCm (the fixture root is 6.2), so its AOTriton runtime shows
    "pytorch-2.15-gfx942": ["pytorch", "--arch", "gfx942", "--release", "2.15",
                            "--rocm-version", "7.14"],
    "pytorch-2.14-gfx942": ["pytorch", "--arch", "gfx942", "--release", "2.14",
                            "--rocm-version", "7.14"],
    "pytorch-2.13-gfx942": ["pytorch", "--arch", "gfx942", "--release", "2.13",
                            "--rocm-version", "7.2"],
    "pytorch-2.9-gfx942": ["pytorch", "--arch", "gfx942", "--release", "2.9"],
    # the cmake backend with cmake_wheel = "pip-wheel" (CI cannot fetch it: no GitHub)
    "bitsandbytes-gfx90a-gfx942-gfx950": ["bitsandbytes", "--arch", "gfx90a,gfx942,gfx950"],
}
# Cases whose commands hold the HIP compiler (the cmake backend's configure): pinned, so that
# the file does not hold this host's toolchain paths
CASE_ENV = {"bitsandbytes-gfx90a-gfx942-gfx950": {
    "ROCMBUILD_HIP_COMPILER": "/usr/bin/clang++-22", "ROCMBUILD_HIP_FLAGS": "--offload-compress"}}


def normalise(plan: dict, rocm_root: Path) -> dict:
    assert re.fullmatch(r"[0-9a-f]{64}", plan.pop("cache_key"))
    for dep in plan.get("depends", ()):  # hashes the fixture root's (temporary) path
        assert re.fullmatch(r"[0-9a-f]{64}", dep.pop("cache_key"))
    plan.pop("host")
    plan.pop("rocm_root")  # the host's root as found (test_therock.py checks it)
    plan["host_env"].pop("passed")  # names set in this process's environment
    if plan["rocm"].get("compiler"):  # the pinned compiler's version: this host's clang's
        plan["rocm"]["compiler"]["version"] = "<VERSION>"
    text = json.dumps(plan, indent=2, sort_keys=True).replace(str(rocm_root), "<ROCM_ROOT>")
    return json.loads(text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_matches_golden(name: str, fake_rocm_root: Path) -> None:
    env = {"ROCM_PATH": str(fake_rocm_root), "HIP_PATH": "", "ROCMBUILD_JOBS": "8",
           **CASE_ENV.get(name, {})}
    res = rocmbuild("plan", *CASES[name], "--json", env=env)
    assert res.returncode == 0, res.stderr
    got = normalise(json.loads(res.stdout), fake_rocm_root)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("ROCMBUILD_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())


def test_pytorch_plan_has_rocm_build_steps(fake_rocm_root: Path) -> None:
    res = rocmbuild("plan", "pytorch", "--arch", "gfx942", "--release", "2.9", "--json",
                    env={"ROCM_PATH": str(fake_rocm_root)})
    plan = json.loads(res.stdout)
    assert plan["hipify"] == ["python", "tools/amd_build/build_amd.py"]
    env = plan["env"]
    assert env["USE_ROCM"] == "1" and env["USE_CUDA"] == "0" and env["BUILD_TEST"] == "0"
    assert env["PYTORCH_ROCM_ARCH"] == "gfx942" and env["MAX_JOBS"].isdigit()
    assert plan["source"]["submodules"] == ["*"] and len(plan["source"]["commit"]) == 40
    assert plan["jobs_reason"].startswith("min(")


# A saved MI300X host (tests/fixtures/hosts/, `rocmbuild doctor --json` on a fixture node: a ROCm
# 7.2 root and a ROCm torch 2.13.0+rocm7.2 as fixture trees, one gfx942 GPU in a fake KFD sysfs,
# paths then set to /opt/rocm-7.2.0, 128 cpus, 1 TiB): no ROCm torch can exist here.
MI300X = Path(__file__).parents[1] / "fixtures/hosts/mi300x-rocm7.2-torch2.13.json"


def test_deepspeed_rocm_plan_on_a_saved_host() -> None:
    """DeepSpeed's HIP ops for gfx90a+gfx942 on a host whose one GPU is a gfx942: both archs reach
    PYTORCH_ROCM_ARCH (patch 0001 keeps it rather than rocminfo's first GPU), the wavefront is
    CDNA's 64 (not upstream's 32 without rocminfo), one C++20 for cxx and hipcc, the accelerator
    is named (a GPU-less build host would pick DeepSpeed's CPU one)."""
    res = rocmbuild("plan", "deepspeed", "--arch", "gfx90a,gfx942", "--variant", "rocm",
                    "--host", str(MI300X), "--json", env={"ROCM_PATH": "", "HIP_PATH": ""})
    assert res.returncode == 0, res.stderr
    assert "lacks" not in res.stderr  # the saved host has what the rocm variant needs
    plan = json.loads(res.stdout)
    env = plan["env"]
    assert env["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx942" and env["DS_ROCM_WAVEFRONT_SIZE"] == "64"
    assert env["DS_CXX_STD"] == "c++20" and env["DS_ACCELERATOR"] == "cuda"
    assert env["DS_BUILD_OPS"] == "0" and env["DS_BUILD_FUSED_ADAM"] == "1"
    assert plan["archs"] == ["gfx90a", "gfx942"] and plan["rocm"]["version"] == "7.2"
    assert [Path(p["file"]).name[:4] for p in plan["patches"]] == ["0001", "0002", "0003"]
    assert re.fullmatch(r"[0-9a-f]{64}", plan.pop("cache_key"))
    assert plan["host"]["torch"] == "2.13.0+rocm7.2" and plan["host"]["torch_kind"] == "rocm"
    plan["host_env"].pop("passed")
    path = GOLDEN / "deepspeed-rocm-gfx90a-gfx942.json"
    if os.environ.get("ROCMBUILD_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    assert plan == json.loads(path.read_text())


def test_deepspeed_cpu_ops_plan_is_arch_independent() -> None:
    """rocm_runtime = "none" (the cpu-ops variant): on the same saved host, --arch is checked but
    left out of the plan, so gfx942, gfx90a,gfx950 and native plan the same wheel (one cache key),
    with no ROCm/gfx label, no PYTORCH_ROCM_ARCH, and a key other than the rocm variant's."""
    def plan(*args: str) -> dict[str, object]:
        res = rocmbuild("plan", "deepspeed", *args, "--host", str(MI300X), "--json",
                        env={"ROCM_PATH": "", "HIP_PATH": ""})
        assert res.returncode == 0, res.stderr
        return dict(json.loads(res.stdout))

    cpu = [plan("--variant", "cpu-ops", "--arch", a) for a in ("gfx942", "gfx90a,gfx950",
                                                                "native")]
    assert {p["cache_key"] for p in cpu} == {cpu[0]["cache_key"]}
    first = cpu[0]
    assert first["archs"] == [] and first["local_version"] == ""
    assert first["rocm_runtime"] == {"mode": "none", "arch_independent": True}
    env = first["env"]
    assert isinstance(env, dict) and "PYTORCH_ROCM_ARCH" not in env
    assert plan("--variant", "rocm", "--arch", "gfx942")["cache_key"] != first["cache_key"]
    text = rocmbuild("plan", "deepspeed", "--variant", "cpu-ops", "--arch", "gfx942", "--host",
                     str(MI300X), env={"ROCM_PATH": "", "HIP_PATH": ""})
    out = text.stdout + text.stderr
    assert "archs=none (arch-independent) -> no local label" in out, out
    assert "runtime  none: no device code" in out


HOSTS = Path(__file__).parents[1] / "fixtures/hosts"


@pytest.mark.parametrize("saved", ["mi300x-rocm7.2-torch2.13", "mi300x-rocm7.1-torch2.13",
                                   "mi300x-rocm10.0-torch2.13"])
def test_flash_attn_ck_on_todays_torch_2_13_hosts(saved: str) -> None:
    """Saved MI300X hosts (fixture files as `doctor --json` writes them: ROCm 7.2, 7.1 and 10.0,
    the last reporting HIP 7.15 with torch.version.rocm 10.0.0, vLLM's ROCm base image; no ROCm
    torch can exist here) with torch 2.13 get flash-attn's 2.8.3 line (C++17, the ROCm 7 fixes)
    for CK, and nothing the build would stop on."""
    res = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--host",
                    str(HOSTS / f"{saved}.json"), "--json", env={"ROCM_PATH": "", "HIP_PATH": ""})
    assert res.returncode == 0, res.stderr
    assert "would stop" not in res.stderr and "lacks" not in res.stderr, res.stderr
    plan = json.loads(res.stdout)
    assert (plan["release"], plan["variant"]) == ("2.8.3", "ck")
    assert plan["source"]["commit"].startswith("0e60e394") and plan["archs"] == ["gfx942"]
    assert plan["env"]["GPU_ARCHS"] == "gfx942"


def test_pytorch_2_15_on_a_rocm_7_14_host_checks_amd_smi(tmp_path: Path) -> None:
    """ROCm 7.14 + torch 2.15 (a saved host): pytorch's 2.15 line, whose components include
    amd_smi (LoadHIP.cmake requires it from 7.14); the same host without amd_smi is told so."""
    saved = HOSTS / "mi300x-rocm7.14-torch2.15.json"
    res = rocmbuild("plan", "pytorch", "--arch", "gfx942", "--host", str(saved), "--json",
                    env={"ROCM_PATH": "", "HIP_PATH": ""})
    assert res.returncode == 0, res.stderr
    assert "would stop" not in res.stderr, res.stderr
    plan = json.loads(res.stdout)
    assert plan["release"] == "2.15" and plan["source"]["commit"].startswith("d0f2af8b")
    assert {"amd_smi", "hipfile"} <= set(plan["rocm_components"])
    doc = json.loads(saved.read_text())
    doc["host"]["rocm_root"]["components"].remove("amd_smi")
    lacking = tmp_path / "no-amd-smi.json"
    lacking.write_text(json.dumps(doc))
    res = rocmbuild("plan", "pytorch", "--arch", "gfx942", "--host", str(lacking),
                    env={"ROCM_PATH": "", "HIP_PATH": ""})
    assert res.returncode == 0, res.stderr
    assert "amd_smi (apt amd-smi-lib / dnf amd-smi-lib)" in res.stderr
    assert "would stop before fetching" in res.stderr


def test_vllm_plan_on_a_rocm_7_14_torch_2_14_host() -> None:
    """vLLM 0.34.0 from its PyPI sdist for gfx942 on a saved ROCm 7.14 + torch 2.14 host: the
    extensions' env (VLLM_TARGET_DEVICE, PYTORCH_ROCM_ARCH with plain names), the Rust frontend
    off (option and patch 0001), triton_kernels from [[downloads]] into TRITON_KERNELS_SRC_DIR
    (its python/triton_kernels/triton_kernels directory), hipfile checked from ROCm 7.14, and
    nothing the host lacks but the download's pin (the ROCm/triton archive could not be read
    with this project's tools: docs/recipes/vllm.md). Rendered through plan.planning as
    `plan` does."""
    from rocmbuild.host.detect import from_json
    from rocmbuild.plan import planning, requirements
    from rocmbuild.plan.render import Target
    from rocmbuild.recipe.load import load
    from rocmbuild.recipe.search import find_recipe

    saved = HOSTS / "mi300x-rocm7.14-torch2.14.json"
    host = from_json(json.loads(saved.read_text()), str(saved))
    recipe = load(find_recipe("vllm"))
    plan = planning.plan(recipe, Target(arch="gfx942"), host)
    (lacking,) = requirements.missing(plan, host)
    assert lacking.startswith("a sha256 pin for the download 'rocm-triton-kernels'")
    got = plan.to_json()
    assert got["env"]["VLLM_TARGET_DEVICE"] == "rocm" and got["env"]["PYTORCH_ROCM_ARCH"] == \
        "gfx942" and got["env"]["VLLM_REQUIRE_RUST_FRONTEND"] == "0"
    (dl,) = got["downloads"]
    assert (dl["env"], dl["subdir"]) == ("TRITON_KERNELS_SRC_DIR",
                                         "python/triton_kernels/triton_kernels")
    assert "hipfile" in got["rocm_components"] and plan.label_torch
    for key in ("cache_key", "host", "rocm_root"):
        got.pop(key, None)
    path = GOLDEN / "vllm-gfx942.json"
    if os.environ.get("ROCMBUILD_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())
