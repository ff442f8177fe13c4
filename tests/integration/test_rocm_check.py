"""The host check through the CLI: `doctor`, `plan` and `build` judge the ROCm components, the
SDK and torch ranges and the torch HIP vs SDK version, one line per problem, before anything is
fetched.

Faked (cannot exist here): the ROCm roots are fixture trees (make_rocm_root: .info/version, a
bin/hipcc that fails, empty CMake config files per component), and the ROCm torch is a site dir
holding only torch's metadata (fake_rocm_torch: 2.5.1+rocm6.2, HIP 6.2). The HIP compiler is
pointed at a path that does not exist, so doctor compiles nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import REPO, make_rocm_root, rocmbuild


def env_for(root: Path, torch_site: Path | None = None, **extra: str) -> dict[str, str]:
    path = [str(REPO / "src")] if torch_site is None else [str(torch_site), str(REPO / "src")]
    return {"ROCM_PATH": str(root), "HIP_PATH": "", "PYTHONPATH": os.pathsep.join(path),
            "ROCMBUILD_HIP_COMPILER": "", **extra}


def test_doctor_names_each_missing_component_with_its_packages(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1", omit=("rccl", "miopen"))
    args = ("doctor", "--recipe", "pytorch", "--arch", "gfx942", "--hip-compiler",
            str(tmp_path / "no-clang"))
    res = rocmbuild(*args, env=env_for(root))
    assert res.returncode == 10, res.stderr
    lines = res.stderr.splitlines()  # the check table is console output (stderr)
    rccl = [ln for ln in lines if ln.startswith("fail component:rccl ")]
    miopen = [ln for ln in lines if ln.startswith("fail component:miopen ")]
    assert len(rccl) == 1 and "apt rccl-dev / dnf rccl-devel" in rccl[0]
    assert len(miopen) == 1 and "apt miopen-hip-dev / dnf miopen-hip-devel" in miopen[0]
    assert any("sudo apt install rccl-dev" in ln for ln in lines)
    assert "Traceback" not in res.stderr
    closing = [ln for ln in lines if ln.startswith("toolchain error: doctor:")]
    assert len(closing) == 1 and "component:miopen, component:rccl" in closing[0]

    report = json.loads(rocmbuild(*args, "--json", env=env_for(root)).stdout)
    failed = {c["name"]: c for c in report["checks"] if c["status"] == "fail"}
    assert failed["component:rccl"]["data"]["dnf"] == "rccl-devel"
    assert failed["component:miopen"]["data"]["apt"] == "miopen-hip-dev"
    assert "hipblaslt" in report["host"]["rocm_root"]["components"]
    assert "rccl" not in report["host"]["rocm_root"]["components"]


def test_doctor_on_a_complete_root_finds_every_component(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1")
    res = rocmbuild("doctor", "--recipe", "pytorch", "--arch", "gfx942", "--json",
                    "--hip-compiler", str(tmp_path / "no-clang"), env=env_for(root))
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["rocm-components"]["status"] == "ok"
    assert checks["rocm-components"]["data"]["found"]["rccl"] == "lib/cmake/rccl/rccl-config.cmake"
    assert not [n for n in checks if n.startswith("component:")]
    assert checks["recipe"]["status"] == "ok", checks["recipe"]


def test_plan_warns_and_build_refuses_a_torch_for_another_hip(
        tmp_path: Path, fake_rocm_torch: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1")  # torch says HIP 6.2
    env = env_for(root, fake_rocm_torch, ROCMBUILD_WORKDIR=str(tmp_path / "w"),
                  ROCMBUILD_CACHE_DIR=str(tmp_path / "c"))
    # forced onto a line: the torch/SDK rule itself, not the line picker (no line fits this pair)
    plan = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork", env=env)
    assert plan.returncode == 0, plan.stderr
    assert "SDK's ROCm 6.4" in plan.stderr and "torch.version.hip 6.2.41133" in plan.stderr

    build = rocmbuild("build", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork", env=env)
    assert build.returncode == 10, build.stderr
    assert "Traceback" not in build.stderr
    assert "SDK's ROCm 6.4" in build.stderr and "download.pytorch.org/whl/rocm" in build.stderr
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").rglob("setup.py"))

    report = json.loads(rocmbuild("doctor", "--recipe", "flash-attn", "--arch", "gfx942",
                                  "--release", "2.8-fork",
                                  "--json", "--hip-compiler", str(tmp_path / "no-clang"),
                                  env=env).stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["torch-vs-sdk"]["status"] == "fail"
    # without --release no line fits this pair: the recipe check says what each line lacks
    report = json.loads(rocmbuild("doctor", "--recipe", "flash-attn", "--arch", "gfx942",
                                  "--json", "--hip-compiler", str(tmp_path / "no-clang"),
                                  env=env).stdout)
    recipe = {c["name"]: c for c in report["checks"]}["recipe"]
    assert recipe["status"] == "fail" and "no release line fits" in recipe["message"]
    assert "2.8-fork needs" in recipe["message"] and "main needs" in recipe["message"]


def test_plan_for_a_saved_host_missing_components(tmp_path: Path) -> None:
    """The controller judges the node's components from its host.json."""
    root = make_rocm_root(tmp_path / "rocm", "6.4.1", omit=("hipblaslt",))
    doc = rocmbuild("doctor", "--json", "--hip-compiler", str(tmp_path / "no-clang"),
                    env=env_for(root))
    host_json = tmp_path / "host.json"
    host_json.write_text(doc.stdout)
    res = rocmbuild("plan", "pytorch", "--arch", "gfx942", "--host", str(host_json),
                    env={"ROCM_PATH": "", "HIP_PATH": ""})
    assert res.returncode == 0, res.stderr
    warned = [ln for ln in res.stderr.splitlines() if "lacks" in ln]
    assert len(warned) == 1 and "hipblaslt (apt hipblaslt-dev / dnf hipblaslt-devel)" in warned[0]
