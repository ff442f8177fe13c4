"""ROCm from pip (TheRock's ``rocm[libraries,devel]``) as the ROCm root of `doctor`, `plan` and
`build`, through the CLI run by the Python of a real venv that holds the install.

Faked (cannot exist here): TheRock's wheels and a ROCm torch. The venv is real (``python -m
venv``); its site-packages gets the files TheRock's install leaves (make_therock_site: the
``rocm`` dist-info and ``rocm_sdk`` package, ``_rocm_sdk_core`` with .info/version and
share/therock/dist_info.json, ``_rocm_sdk_devel`` as ``rocm-sdk init`` unpacks it, ROCm 10.1 with
HIP 7.16) and a ROCm torch's metadata (2.15.0+rocm10.1, torch.version.rocm 10.1.0, hip 7.16).
rocmbuild itself comes in through a .pth file naming this checkout and its venv's packages. The
HIP compiler is pointed at a path that does not exist, so doctor compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path

from tests.conftest import REPO, make_rocm_torch, make_therock_site

PIP = "rocm_sdk (pip)"


def therock_venv(tmp_path: Path, devel: str = "unpacked") -> tuple[Path, Path]:
    """(the venv's python, its site-packages) with TheRock ROCm 10.1 and its torch in it."""
    venv = tmp_path / "venv"
    subprocess.run([os.environ.get("PYTHON", sysconfig.get_config_var("BINDIR") + "/python3"),
                    "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin/python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], check=True,
                               capture_output=True, text=True).stdout.strip())
    make_therock_site(site, "10.1", targets="gfx942;gfx950", devel=devel)
    make_rocm_torch(site, "2.15.0+rocm10.1", "7.16.26400-1a2b3c4d5", "10.1.0")
    # after the venv's own site-packages: its torch (the fake one) is found first
    (site / "zz_rocmbuild_checkout.pth").write_text(
        f"{REPO / 'src'}\n{sysconfig.get_paths()['purelib']}\n")
    return python, site


def run(python: Path, *args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(ROCM_PATH="", HIP_PATH="", ROCMBUILD_HIP_COMPILER="", COLUMNS="200",
               ROCMBUILD_WORKDIR=str(tmp_path / "w"), ROCMBUILD_CACHE_DIR=str(tmp_path / "c"))
    return subprocess.run([str(python), "-m", "rocmbuild", *args], capture_output=True,
                          text=True, env=env, cwd=REPO)


def test_doctor_plan_and_build_use_the_pip_rocm(tmp_path: Path) -> None:
    python, site = therock_venv(tmp_path)
    devel = site / "_rocm_sdk_devel"

    doc = run(python, "doctor", "--recipe", "flash-attn", "--arch", "gfx942,gfx90a", "--json",
              "--hip-compiler", str(tmp_path / "no-clang"), tmp_path=tmp_path)
    assert "Traceback" not in doc.stderr
    report = json.loads(doc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    rocm = checks["rocm"]
    assert rocm["status"] == "ok" and rocm["data"]["where"] == PIP
    assert rocm["data"]["path"] == str(devel) and rocm["data"]["targets"] == ["gfx942", "gfx950"]
    assert rocm["data"]["version"] == "10.1.0" and rocm["data"]["hip_version"] == "7.16.26400"
    assert f"({PIP}), ROCm 10.1.0" in rocm["message"] and "targets gfx942;gfx950" in rocm["message"]
    assert report["host"]["rocm_root"]["where"] == PIP
    assert report["host"]["rocm_root"]["targets"] == ["gfx942", "gfx950"]
    # the pip ROCm's libraries have no gfx90a code: said, not refused
    assert checks["rocm-targets"]["status"] == "warn" and "gfx90a" in checks["rocm-targets"][
        "message"]
    # torch 2.15+rocm10.1 (HIP 7.16) and ROCm 10.1 go together: no torch-vs-sdk failure
    assert checks["torch"]["status"] == "ok" and "ROCm 10.1.0" in checks["torch"]["message"]
    assert "torch-vs-sdk" not in checks
    # the recipe's checked ranges (ROCm < 7.1, torch < 2.14) refuse it, naming the pip root
    assert checks["recipe"]["status"] == "fail" and f"({PIP})" in checks["recipe"]["message"]

    # no line of flash-attn fits ROCm 10.1: each says what it lacks, naming the pip root
    none = run(python, "plan", "flash-attn", "--arch", "gfx942", tmp_path=tmp_path)
    assert none.returncode == 10 and "no release line fits this host" in none.stderr
    assert none.stderr.count(f"({PIP})") >= 2, none.stderr
    # forced onto a line, the plan shows the pip root and labels with the ROCm version
    plan = run(python, "plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork",
               "--json", tmp_path=tmp_path)
    assert plan.returncode == 0, plan.stderr
    p = json.loads(plan.stdout)
    assert p["rocm_root"]["where"] == PIP and p["rocm_root"]["targets"] == ["gfx942", "gfx950"]
    assert p["rocm"]["root"] == str(devel) and p["env"]["ROCM_PATH"] == str(devel)
    assert p["rocm"]["version"] == "10.1" and p["local_version"].startswith("rocm10.1.")
    assert "SDK's ROCm" not in plan.stderr and "rocm7.16" not in plan.stdout
    text = run(python, "plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork",
               tmp_path=tmp_path)
    assert f"root     {devel} ({PIP}, targets gfx942;gfx950)" in text.stdout + text.stderr

    build = run(python, "build", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork",
                tmp_path=tmp_path)
    assert build.returncode == 10, build.stderr
    assert "Traceback" not in build.stderr
    assert f"found ROCm 10.1.0 at {devel} ({PIP})" in build.stderr
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").rglob("setup.py"))


def test_build_says_run_rocm_sdk_init_for_a_packed_devel_tree(tmp_path: Path) -> None:
    python, _site = therock_venv(tmp_path, devel="packed")
    build = run(python, "build", "flash-attn", "--arch", "gfx942", tmp_path=tmp_path)
    assert build.returncode == 10 and "Traceback" not in build.stderr, build.stderr
    assert "is not unpacked yet: run `rocm-sdk init`" in build.stderr
    doc = run(python, "doctor", "--json", "--hip-compiler", str(tmp_path / "no-clang"),
              tmp_path=tmp_path)
    rocm = {c["name"]: c for c in json.loads(doc.stdout)["checks"]}["rocm"]
    assert rocm["status"] == "fail" and rocm["fix"].startswith("run `rocm-sdk init`")


def test_a_malformed_dist_info_json_is_one_line(tmp_path: Path) -> None:
    python, site = therock_venv(tmp_path)
    bad = site / "_rocm_sdk_core/share/therock/dist_info.json"
    bad.write_text('{"dist_amdgpu_targets": 942}')
    for args in (("doctor", "--hip-compiler", str(tmp_path / "no-clang")),
                 ("plan", "flash-attn", "--arch", "gfx942")):
        res = run(python, *args, tmp_path=tmp_path)
        assert res.returncode == 10 and "Traceback" not in res.stderr, res.stderr
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("toolchain error:")]
        assert len(errors) == 1 and str(bad) in errors[0] and "dist_amdgpu_targets" in errors[0]
