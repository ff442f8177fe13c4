"""rocmbuild installed as a tool, for real: rocmbuild's own wheel (`pip wheel . --no-deps`, from a
copy of this checkout) goes into a fresh venv in a temp dir outside the checkout (no system site
packages) together with its dependencies from PyPI; from another directory that venv's
`rocmbuild` lists the shipped recipes, plans exactly as the checkout does, and builds the
flash-attn Triton variant from the pinned PyPI sdist (for NVIDIA GPUs: with the shipped patch).

What the venv borrows: the flash-attn build needs torch (CPU 2.13) and the build tools
(setuptools, ninja, psutil, ...) in the interpreter that builds; downloading torch for each test
run is gigabytes, so a `.pth` line appends the shared test venv's site-packages *after* the fresh
venv's own. rocmbuild itself and its dependencies come from the fresh venv (asserted), and the
shared venv's editable rocmbuild is not seen (a path line in a .pth file does not run that
directory's own .pth files).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, TRITON_ARGS

COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "__pycache__", "*.egg-info", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", "_skbuild",
)


def _env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH (the test run's points at this checkout's src/) and no rocmbuild settings."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("ROCMBUILD_")}
    return {**env, "COLUMNS": "200", **extra}


def _run(cmd: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(**extra), capture_output=True, text=True)


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("installed-tool")
    checkout = base / "checkout"
    shutil.copytree(REPO, checkout, ignore=COPY_IGNORE)
    dist = base / "dist"
    res = _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                "-q", "--disable-pip-version-check", "-w", str(dist)], cwd=checkout)
    assert res.returncode == 0, res.stderr
    (wheel,) = dist.glob("rocmbuild-*.whl")
    venv = base / "venv"
    res = _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    assert res.returncode == 0, res.stderr
    py = venv / "bin" / "python"
    res = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
               cwd=base)
    assert res.returncode == 0, res.stderr
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     cwd=base).stdout.strip())
    (site / "zz-borrowed-build-tools.pth").write_text(sysconfig.get_path("purelib") + "\n")
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return {"wheel": wheel, "venv": venv, "py": py, "exe": venv / "bin" / "rocmbuild",
            "cwd": elsewhere, "base": base}


def test_wheel_carries_the_data_and_no_tests(tool: dict[str, Any]) -> None:
    names = set(zipfile.ZipFile(tool["wheel"]).namelist())
    for rel in ("recipes/flash-attn.toml", "recipes/pytorch.toml",
                "recipes/hip-attention-probe.toml", "schemas/recipe.schema.json",
                "probes/hip-attention/CMakeLists.txt"):
        assert f"rocmbuild/data/{rel}" in names
    patches = [n for n in names if n.startswith("rocmbuild/data/patches/") and n.endswith(".patch")]
    assert patches
    for n in names:
        assert not n.startswith("tests/") and "/tests/" not in n, n
        assert "__pycache__" not in n, n


def test_installed_rocmbuild_is_the_wheel_not_the_checkout(tool: dict[str, Any]) -> None:
    res = _run([str(tool["py"]), "-c", "import rocmbuild, rich; print(rocmbuild.__file__); "
                "print(rich.__file__)"], cwd=tool["cwd"])
    assert res.returncode == 0, res.stderr
    mod, rich = res.stdout.split()
    assert mod.startswith(str(tool["venv"])) and rich.startswith(str(tool["venv"]))


def test_recipes_listed_from_another_directory(tool: dict[str, Any]) -> None:
    res = _run([str(tool["exe"]), "recipes"], cwd=tool["cwd"])
    assert res.returncode == 0, res.stderr
    for name in ("flash-attn", "pytorch", "hip-attention-probe"):
        assert name in res.stdout


def test_own_recipes_dir_comes_first(tool: dict[str, Any]) -> None:
    """--recipes DIR and ROCMBUILD_RECIPE_PATH add a user's recipes to the shipped ones."""
    mine = tool["base"] / "my-recipes"
    mine.mkdir(exist_ok=True)
    text = (REPO / "recipes" / "flash-attn.toml").read_text()
    (mine / "my-attn.toml").write_text(text.replace("../patches/", str(REPO / "patches") + "/"))
    for args, extra in ((["--recipes", str(mine)], {}), ([], {"ROCMBUILD_RECIPE_PATH": str(mine)})):
        res = _run([str(tool["exe"]), *args, "recipes"], cwd=tool["cwd"], **extra)
        assert res.returncode == 0, res.stderr
        assert "my-attn" in res.stdout and "flash-attn" in res.stdout


@pytest.mark.parametrize(("args", "shipped"), [
    ((*TRITON_ARGS, "--gpu-vendor", "nvidia"), '"file": "patches/flash-attn/'),
    (("hip-attention-probe", "--arch", "gfx942"), '"path": "probes/hip-attention"'),
], ids=["flash-attn-patch", "probe-tree"])
def test_installed_plans_as_the_checkout_does(
    tool: dict[str, Any], args: tuple[str, ...], shipped: str
) -> None:
    """Same plan JSON, byte for byte, cache key included: the shipped patch and the probe's
    source tree are found in the wheel and hash as in the checkout."""
    argv = ["plan", *args, "--jobs", "2", "--json"]  # --jobs: MAX_JOBS not from free memory
    installed = _run([str(tool["exe"]), *argv], cwd=tool["cwd"])
    assert installed.returncode == 0, installed.stderr
    # the checkout's sources without PYTHONPATH, which the plan would list among the variables
    # a build passes on (the installed tool's environment has none)
    main = (f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); "
            "from rocmbuild.cli import main; raise SystemExit(main())")
    checkout = _run([sys.executable, "-c", main, *argv], cwd=REPO)
    assert checkout.returncode == 0, checkout.stderr
    assert installed.stdout == checkout.stdout
    assert shipped in installed.stdout


@pytest.mark.slow
def test_build_flash_attn_triton_from_the_installed_tool(
    tool: dict[str, Any], download_cache: Path
) -> None:
    """The check build for NVIDIA GPUs (`--gpu-vendor nvidia`): the recipe's patches (0001, when =
    triton + nvidia; 0004, every Triton build of the sdist) are the shipped ones, found in the
    wheel's data and applied to a fresh copy of the real sdist. The default (amd) build, without
    0001, is tests/integration/test_e2e_flash_attn.py (the session's triton_build); one real
    build here covers the installed tool and the patches."""
    cache = tool["base"] / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    res = _run([str(tool["exe"]), *TRITON_ARGS, "--gpu-vendor", "nvidia",
                "--workdir", str(tool["cwd"] / "build"), "--cache-dir", str(cache)],
               cwd=tool["cwd"])
    assert res.returncode == 0, res.stderr
    assert "2 patch(es) applied" in res.stderr
    assert re.search(r"\.whl  sha256=[0-9a-f]{64}  \d+\.\d\ds  built", res.stderr), res.stderr
    wheels = sorted((tool["cwd"] / "build" / "wheels").glob("*.whl"))
    assert [w.name for w in wheels] == ["flash_attn-2.8.3.post1+rocm6.2.gfx942-py3-none-any.whl"]
    with zipfile.ZipFile(wheels[0]) as zf:
        init = zf.read("flash_attn/flash_attn_triton_amd/__init__.py").decode()
        prov = json.loads(zf.read(next(n for n in zf.namelist()
                                       if n.endswith("rocmbuild.json"))))
    assert "_AMD_ONLY_OPTIONS" in init
    assert prov["gpu_vendor"] == "nvidia" and len(prov["patches"]) == 2
    assert prov["patches"][0]["file"].startswith("patches/flash-attn/")
    assert prov["runtime_env"] == {"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}
