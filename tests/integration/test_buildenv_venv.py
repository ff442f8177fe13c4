"""Build environments for real: venvs made with this Python, requirements installed by real pip
from the configured index, torch (here the CPU torch; a ROCm torch on an AMD host) seen through
the host view, and nothing else of the host. One workspace-level env is shared by the module's
tests; a second one (another pin) shows that the pin picks the env."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from rocmbuild.buildtools import buildenv
from rocmbuild.core.errors import ToolchainError
from rocmbuild.plan.model import BuildEnvSpec
from tests.conftest import rocmbuild

TORCH = importlib.metadata.version("torch")


def _ensure(ws: Path, reqs: tuple[str, ...], python_requires: tuple[str, ...] = ()
            ) -> buildenv.BuildEnv:
    tree = ws / "tree"
    tree.mkdir(parents=True, exist_ok=True)
    return buildenv.ensure(BuildEnvSpec(reqs), tree, ws / "envs", "demo", "demo.toml",
                           python_requires, ws / "env.log")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, buildenv.BuildEnv, float]:
    ws = tmp_path_factory.mktemp("buildenv")
    start = time.monotonic()
    env = _ensure(ws, ("six==1.17.0",), ("six", "torch"))
    return ws, env, time.monotonic() - start


def _py(env: buildenv.BuildEnv, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(env.python), "-c", code], capture_output=True, text=True,
                          env=env.env(os.environ), cwd=env.root)


def test_env_holds_the_pins_and_sees_torch(made) -> None:
    _, env, _ = made
    assert env.created
    assert ("six", "1.17.0") in env.packages and any(n == "pip" for n, _ in env.packages)
    assert ("torch", TORCH) in env.host_packages
    assert not {n for n, _ in env.packages} & {n for n, _ in env.host_packages}
    res = _py(env, "import sys, six, torch; print(torch.__version__, six.__version__, "
                   "sys.prefix)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [TORCH, "1.17.0", str(env.root)]


@pytest.mark.parametrize("module", ["rich", "pytest", "rocmbuild", "numpy"])
def test_host_packages_torch_does_not_need_are_not_visible(made, module: str) -> None:
    """rich, pytest, rocmbuild (also on PYTHONPATH here) and numpy are installed in the host
    venv, and torch does not require them."""
    _, env, _ = made
    importlib.metadata.version(module)  # present on the host
    res = _py(env, f"import {module}")
    assert res.returncode == 1 and f"No module named '{module}'" in res.stderr


def test_same_inputs_reuse_the_env(made) -> None:
    ws, env, took = made
    start = time.monotonic()
    again = _ensure(ws, ("six==1.17.0",))
    assert not again.created and again.root == env.root and again.packages == env.packages
    assert time.monotonic() - start < min(2.0, took)


def test_incomplete_env_is_made_again(tmp_path: Path, made) -> None:
    """An env whose creation was interrupted (no rocmbuild-env.json yet) is not used."""
    ws, env, _ = made
    (env.root / buildenv.MARKER).unlink()
    again = _ensure(ws, ("six==1.17.0",))
    assert again.created and again.root == env.root and (env.root / buildenv.MARKER).is_file()


def test_another_pin_another_env_and_recipe_pins_beat_the_view(made) -> None:
    """A different pin makes a different env; a requirement the recipe names itself
    (typing-extensions, which torch requires) is installed in the env, with torch's own
    specifier added, instead of being seen from the host."""
    ws, env, _ = made
    other = _ensure(ws, ("six==1.16.0", "typing-extensions>=4.12"))
    assert other.root != env.root and other.digest != env.digest
    assert ("six", "1.16.0") in other.packages
    assert "typing-extensions" in {n for n, _ in other.packages}
    assert "typing-extensions" not in {n for n, _ in other.host_packages}
    torch_spec = next(r for r in other.requirements if r.startswith("typing-extensions")
                      and r != "typing-extensions>=4.12")
    assert torch_spec.startswith("typing-extensions>=")
    assert _py(other, "import torch").returncode == 0


def test_python_requires_is_checked_in_the_env(made) -> None:
    """psutil is installed in the host venv, not in the env: build.python_requires is about the
    env (checked on reuse too)."""
    ws, _, _ = made
    with pytest.raises(ToolchainError, match=r"demo.toml: build.python_requires: psutil not in "
                       "the build environment"):
        _ensure(ws, ("six==1.17.0",), ("torch", "six", "psutil"))


RECIPE = """schema_version = 1
[package]
name = "env-probe"
[source]
path = "src"
[build]
mem_per_job_gb = 1
build_requires = {reqs}
"""
# The build itself checks where it runs: the build env's python, its bin/ first on PATH, none
# of the host's extra packages importable; it records the setuptools it was built with.
SETUP = """import os, shutil, sys
from pathlib import Path
import setuptools
assert Path(sys.prefix).parent.name == "envs", sys.prefix
assert shutil.which("python") == os.path.join(sys.prefix, "bin", "python"), shutil.which("python")
for host_only in ("rich", "pytest", "rocmbuild"):
    try:
        __import__(host_only)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{host_only} leaked into the build environment")
Path("envprobe").mkdir(exist_ok=True)
Path("envprobe/__init__.py").write_text(f"SETUPTOOLS = {setuptools.__version__!r}\\n")
setuptools.setup(name="env-probe", version="1.0", packages=["envprobe"])
"""


def _project(d: Path, reqs: str) -> Path:
    (d / "src").mkdir(parents=True)
    (d / "src" / "setup.py").write_text(SETUP)
    (d / "r.toml").write_text(RECIPE.replace("{reqs}", reqs))
    return d / "r.toml"


def test_cli_build_runs_in_the_env_and_records_versions(tmp_path: Path) -> None:
    """setuptools comes from the source tree's requirements file (PyTorch's style: comments
    after requirements), wheel from build_requires."""
    recipe = _project(tmp_path, '["wheel>=0.44"]\nbuild_requirements_file = "reqs-build.txt"')
    (tmp_path / "src" / "reqs-build.txt").write_text(
        "# Build System requirements\nsetuptools>=70.1,<80  # as PyTorch caps it\n")
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build")}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", env=env)
    assert res.returncode == 0, res.stderr
    assert "] env" in res.stderr and "made r-" in res.stderr
    wheel = next((tmp_path / "build" / "wheels").glob("env_probe-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(zf.read(next(n for n in zf.namelist()
                                       if n.endswith("rocmbuild.json"))))
        built_with = zf.read("envprobe/__init__.py").decode()
    benv = prov["build_env"]
    setuptools = next(p for p in benv["packages"] if p.startswith("setuptools=="))
    assert built_with == f"SETUPTOOLS = {setuptools.split('==')[1]!r}\n"
    assert int(setuptools.split("==")[1].split(".")[0]) < 80
    assert prov["toolchain"]["setuptools"] == setuptools.split("==")[1]
    assert f"torch=={TORCH}" in benv["host_packages"]
    assert benv["requirements"][:2] == ["wheel>=0.44", "setuptools>=70.1,<80"]
    assert prov["plan"]["build_env"] == {"requires": ["wheel>=0.44"],
                                         "requirements_file": "reqs-build.txt"}


def test_cli_unresolvable_pin_is_one_line(tmp_path: Path) -> None:
    recipe = _project(tmp_path, '["wheel>=0.44", "six==0.0.1"]')
    res = rocmbuild("build", str(recipe), "--arch", "gfx942",
                    env={"ROCMBUILD_WORKDIR": str(tmp_path / "build")})
    assert res.returncode == 10, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("toolchain error: ")]
    assert errors == ["toolchain error: r.toml: build.build_requires: cannot install "
                      "'six==0.0.1' into the build environment: No matching distribution "
                      "found for six==0.0.1"], res.stderr
    assert "hint: check the pin" in res.stderr and "Traceback" not in res.stderr
    assert not list((tmp_path / "build").glob("wheels/*.whl"))
