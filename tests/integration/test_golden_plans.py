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
    # main's Triton backend: the aiter wheel first (depends), patch 0002, AITER_TRITON_ONLY=1
    "flash-attn-main-triton-gfx942": ["flash-attn", "--arch", "gfx942", "--release", "main",
                                      "--variant", "triton"],
    # --rocm-version: the line's ROCm (the fixture root is 6.2), so its AOTriton runtime shows
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
