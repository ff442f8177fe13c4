"""The real CLI in a child process: help, listing, bad flags (one line, distinct exit codes),
and the early stop for builds this host cannot do (no ROCm torch / ROCm SDK here)."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, rocmbuild


def torch_found() -> str:
    """How the toolchain error names this interpreter's torch (the child runs the same Python)."""
    try:
        return f"torch {importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        return "no torch"


def test_help_documents_env_vars() -> None:
    res = rocmbuild("--help")
    assert res.returncode == 0
    for cmd in ("build", "plan", "recipes"):
        assert cmd in res.stdout
    build = rocmbuild("build", "--help").stdout
    for flag, env in (
        ("--arch", "ROCMBUILD_ARCH"),
        ("--jobs", "ROCMBUILD_JOBS"),
        ("--wheel-dir", "ROCMBUILD_WHEEL_DIR"),
        ("--workdir", "ROCMBUILD_WORKDIR"),
        ("--variant", "ROCMBUILD_VARIANT"),
        ("--source", "ROCMBUILD_SOURCE"),
    ):
        assert flag in build and env in build, flag


def test_recipes_lists_variants_and_archs() -> None:
    res = rocmbuild("recipes", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    fa = rows["flash-attn"]
    assert fa["default_variant"] == "ck" and set(fa["variants"]) == {"ck", "triton"}
    assert fa["archs"] == ["gfx90a", "gfx942", "gfx950"] and "pypi" in fa["sources"]
    table = rocmbuild("recipes").stdout
    assert "flash-attn" in table and "pytorch" in table


@pytest.mark.parametrize(
    "args,code,text",
    [
        (["plan", "flash-attn", "--arch", "gfx1100"], 2, "gfx1100 is not supported"),
        (["plan", "flash-attn", "--arch", "gfx9422"], 2, "unknown GPU architecture"),
        (["plan", "flash-atn", "--arch", "gfx942"], 2, "did you mean flash-attn"),
        (["plan", "flash-attn", "--arch", "gfx942", "--variant", "cuda"], 2, "no variant 'cuda'"),
        (
            ["plan", "flash-attn", "--arch", "gfx942", "--jobs", "0"],
            2,
            "--jobs: must be at least 1",
        ),
        (["plan", "flash-attn", "--arch", "gfx942", "--jobs", "x"], 2, "invalid int value"),
        (["build", "flash-attn", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["plan", "flash-attn", "--arch", "gfx942", "--rocm-version", "six"], 2, "--rocm-version"),
    ],
)
def test_bad_flags_give_one_line_errors(args: list[str], code: int, text: str) -> None:
    res = rocmbuild(*args)
    assert res.returncode == code, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("usage error:")]
    assert len(errors) == 1 and text in errors[0], res.stderr
    assert "hint:" in res.stderr and "Traceback" not in res.stderr


def test_native_without_gpu_exits_10(tmp_path: Path) -> None:
    """Fake sysfs with one CPU node only (no GPU, as on this machine)."""
    node = tmp_path / "class/kfd/kfd/topology/nodes/0"
    node.mkdir(parents=True)
    (node / "properties").write_text("gfx_target_version 0\n")
    res = rocmbuild("plan", "flash-attn", env={"ROCMBUILD_SYSFS_ROOT": str(tmp_path)})
    assert res.returncode == 10 and "no AMD GPU found" in res.stderr


@pytest.mark.parametrize(
    "args,needs",
    [
        (
            ["flash-attn", "--arch", "gfx942"],
            [f"a ROCm build of torch >=2.2,<2.14 (found {torch_found()}",
             "a ROCm SDK >=6.0,<7.1"],
        ),
        (["flash-attn", "--arch", "gfx90a,gfx942", "--variant", "ck"], ["a ROCm build of torch"]),
        (["pytorch", "--arch", "gfx942"], ["a ROCm SDK >=6.3,<6.5 with hipcc"]),
    ],
)
def test_rocm_only_builds_stop_before_fetching(
    tmp_path: Path, args: list[str], needs: list[str]
) -> None:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCM_PATH": "", "HIP_PATH": ""}
    res = rocmbuild(*args, env=env)
    assert res.returncode == 10, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("toolchain error:")]
    # flash-attn (main, 2.8.3, 2.8-fork) and pytorch (2.15, 2.14, 2.13, 2.9) have release lines:
    # none fits this host, and each says what it lacks, one error line per line after the first
    assert len(lines) == {"flash-attn": 4, "pytorch": 5}[args[0]], res.stderr
    for text in needs:
        assert text in lines[-1]
    assert "Traceback" not in res.stderr and "hint:" in res.stderr
    assert not (tmp_path / "w").exists(), "nothing may be fetched or written"


def test_ck_with_rocm_torch_but_no_sdk(tmp_path: Path, fake_rocm_torch: Path) -> None:
    """A fake ROCm torch (metadata-only fixture) satisfies the torch check; the SDK is missing."""
    env = {
        "PYTHONPATH": os.pathsep.join([str(fake_rocm_torch), str(REPO / "src")]),
        "ROCMBUILD_WORKDIR": str(tmp_path / "w"),
        "ROCM_PATH": "",
        "HIP_PATH": "",
    }
    res = rocmbuild("flash-attn", "--arch", "gfx942", env=env)
    assert res.returncode == 10
    assert "ROCm build of torch" not in res.stderr and "ROCm SDK >=6.0,<7.1" in res.stderr


def test_plan_warns_but_renders_on_this_host() -> None:
    res = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork")
    assert res.returncode == 0
    assert "release  2.8-fork: forced by --release 2.8-fork" in res.stdout
    assert "GPU_ARCHS=gfx942" in res.stdout and "MAX_JOBS" in res.stdout
    assert "would stop before fetching" in res.stderr


def test_cli_exit_code_and_one_line_per_problem(tmp_path: Path) -> None:
    many = Path(__file__).parents[1] / "recipes" / "bad-many.toml"
    res = rocmbuild("plan", str(many), "--arch", "gfx942")
    assert res.returncode == 3
    errors = [line for line in res.stderr.splitlines() if line.startswith("recipe error:")]
    assert len(errors) == 3, res.stderr
    assert "Traceback" not in res.stderr
    assert "hint:" in res.stderr
