"""A plan rendered from a saved host is the plan that host renders for itself.

The "node" is this machine dressed as an MI300 build host: a ROCm root and a ROCm torch that exist
only as fixture trees (no ROCm SDK or ROCm torch can be installed here), and a fake KFD sysfs with
one gfx942 GPU. `rocmbuild doctor --json` there writes host.json. The "controller" is a Python
that has no torch at all: this interpreter started with -S and a copy of the venv's
site-packages that leaves torch out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, rocmbuild


@pytest.fixture
def node_env(tmp_path: Path, fake_rocm_root: Path, fake_rocm_torch: Path) -> dict[str, str]:
    sysfs = tmp_path / "sys"
    node = sysfs / "class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_text("simd_count 304\ngfx_target_version 90402\n")
    return {"ROCM_PATH": str(fake_rocm_root), "HIP_PATH": "", "ROCMBUILD_SYSFS_ROOT": str(sysfs),
            "PYTHONPATH": os.pathsep.join([str(fake_rocm_torch), str(REPO / "src")]),
            "ROCMBUILD_JOBS": ""}


@pytest.fixture
def no_torch_python(tmp_path: Path) -> list[str]:
    """argv prefix of a Python without torch: -S (no site-packages) plus a directory of links to
    every top-level entry of this venv's site-packages except torch's."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    lean = tmp_path / "lean-site"
    lean.mkdir()
    for entry in site.iterdir():
        if entry.name.lower().startswith(("torch", "functorch", "nvidia", "triton")):
            continue
        (lean / entry.name).symlink_to(entry)
    return [sys.executable, "-S", "-c",
            f"import sys; sys.path[:0] = [{str(REPO / 'src')!r}, {str(lean)!r}]; "
            "from rocmbuild.cli import main; raise SystemExit(main())"]


def strip_jobs(plan: dict) -> dict:
    """MAX_JOBS depends on MemAvailable at the moment of rendering, which moves between runs;
    host_env.passed names the variables set where `plan` runs (none are known for --host)."""
    plan = dict(plan)
    for k in ("jobs", "jobs_reason"):
        plan.pop(k)
    plan["host_env"] = {**plan["host_env"], "passed": None}
    plan["env"] = {k: v for k, v in plan["env"].items() if k != "MAX_JOBS"}
    # the same root, found by --rocm-path on the node and by ROCM_PATH in doctor's host file
    plan["rocm_root"] = {k: v for k, v in plan["rocm_root"].items() if k != "where"}
    return plan


def test_plan_from_saved_host_matches_the_node(tmp_path: Path, node_env: dict[str, str],
                                               no_torch_python: list[str]) -> None:
    doc = rocmbuild("doctor", "--json", env=node_env)
    assert doc.stdout, doc.stderr
    host_json = tmp_path / "host.json"
    host_json.write_text(doc.stdout)
    saved = json.loads(doc.stdout)["host"]
    assert saved["torch"]["hip"] and saved["gpus"] == ["gfx942"]

    args = ["plan", "flash-attn", "--arch", "native", "--release", "2.8-fork", "--json"]
    on_node = rocmbuild(*args, env=node_env)
    assert on_node.returncode == 0, on_node.stderr
    assert "lacks" not in on_node.stderr  # the node has what the CK variant needs

    env = {k: v for k, v in os.environ.items() if k not in ("ROCM_PATH", "HIP_PATH",
                                                            "ROCMBUILD_SYSFS_ROOT", "PYTHONPATH")}
    probe = subprocess.run([*no_torch_python[:2], "-c", no_torch_python[3].split(";")[0]
                            + "; " + no_torch_python[3].split(";")[1]
                            + "; import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True, env=env)
    assert probe.stdout.strip() == "None", probe.stderr  # the controller really has no torch
    ctl = subprocess.run([*no_torch_python, *args, "--host", str(host_json)], capture_output=True,
                         text=True, env=env, cwd=REPO)
    assert ctl.returncode == 0, ctl.stderr
    node_plan, ctl_plan = json.loads(on_node.stdout), json.loads(ctl.stdout)
    assert strip_jobs(ctl_plan) == strip_jobs(node_plan)
    assert ctl_plan["cache_key"] == node_plan["cache_key"]
    # the node's environment is unknown here: the allow-list only, no names from this machine
    assert ctl_plan["host_env"]["passed"] is None and "PATH" in node_plan["host_env"]["passed"]
    gib = saved["memory"]["usable_bytes"] / 2**30
    assert f"{gib:.1f} GiB usable" in ctl_plan["jobs_reason"]
    assert ctl_plan["host"]["torch_kind"] == "rocm" and ctl_plan["rocm"]["version"] == "6.2"

    # this machine itself (CPU torch, no ROCm root) renders a different plan
    here = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork", "--json")
    assert json.loads(here.stdout)["cache_key"] != node_plan["cache_key"]


def test_plan_with_unusable_host_file(tmp_path: Path) -> None:
    (tmp_path / "h.json").write_text('{"schema": "rocmbuild-host/1"}')
    res = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork",
                    "--host", str(tmp_path / "h.json"))
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("usage error: --host") and "torch: missing" in lines[0]
    assert lines[1].startswith("hint:") and "Traceback" not in res.stderr
