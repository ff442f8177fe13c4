"""Shared fixtures. Real tools everywhere (pip, git, clang, ...); what cannot exist here (an AMD
GPU, a ROCm torch, a ROCm SDK) is faked with small fixture trees, and each such test says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# The README's main job: the flash-attn Triton variant from the pinned PyPI sdist.
TRITON_ARGS = ("flash-attn", "--arch", "gfx942", "--variant", "triton", "--source", "pypi")
# Fixtures that build for real (the flash-attn sdist, the HIP probe): their tests are `slow`.
SLOW_FIXTURES = frozenset({"triton_build", "probe_wheel_2", "probe_wheel_942"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by place: tests/integration -> integration, tests/integration/hip -> hip as well,
    tests/gpu -> gpu; and `slow` for every test that uses a real build fixture."""
    tests = Path(__file__).parent
    for item in items:
        where = item.path.relative_to(tests).parts if item.path.is_relative_to(tests) else ()
        if where[:1] == ("integration",):
            item.add_marker(pytest.mark.integration)
            if where[1:2] == ("hip",):
                item.add_marker(pytest.mark.hip)
        elif where[:1] == ("gpu",):
            item.add_marker(pytest.mark.gpu)
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def rocmbuild(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (`python -m rocmbuild`) in a child process."""
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    res = subprocess.run(
        [sys.executable, "-m", "rocmbuild", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or REPO,
    )
    if check and res.returncode != 0:
        raise AssertionError(f"rocmbuild {' '.join(args)} -> {res.returncode}\n{res.stderr}")
    return res


@pytest.fixture(scope="session")
def download_cache(request: pytest.FixtureRequest) -> Path:
    """Downloads survive between test runs under pytest's cache (the sdist is 8.5 MB)."""
    return Path(request.config.cache.mkdir("rocmbuild-downloads"))


@pytest.fixture
def workdir(tmp_path: Path, download_cache: Path) -> dict[str, str]:
    """A fresh workspace and cache whose downloads/ is the shared download cache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "ROCMBUILD_CACHE_DIR": str(cache)}


@pytest.fixture
def fake_rocm_torch(tmp_path: Path) -> Path:
    """A site dir holding only the *metadata* of a ROCm torch (no code): dist-info with version
    2.5.1+rocm6.2 and torch/version.py with hip set. Put it first on sys.path/PYTHONPATH; it fakes
    what this machine cannot have, a ROCm build of torch."""
    site = tmp_path / "fake-rocm-torch"
    di = site / "torch-2.5.1+rocm6.2.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+rocm6.2\n")
    (di / "RECORD").write_text("")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(
        "__version__ = '2.5.1+rocm6.2'\ndebug = False\ncuda = None\nhip = '6.2.41133-dd7f95766'\n"
    )
    return site


def make_rocm_root(root: Path, version: str = "6.2.0-66", omit: tuple[str, ...] = ()) -> Path:
    """A directory shaped like /opt/rocm without any real ROCm: .info/version, a bin/hipcc that
    fails, and for every ROCm component rocmbuild knows except ``omit`` the file a real install
    has: its CMake package config under lib/cmake/<name>/ (empty files)."""
    from rocmbuild.components import COMPONENTS

    (root / ".info").mkdir(parents=True)
    (root / ".info" / "version").write_text(version + "\n")
    (root / "bin").mkdir()
    (root / "bin" / "hipcc").write_text("#!/bin/sh\nexit 1\n")
    for name in COMPONENTS:
        if name not in omit:
            (root / "lib/cmake" / name).mkdir(parents=True)
            (root / "lib/cmake" / name / f"{name}-config.cmake").write_text("")
    return root


@pytest.fixture
def fake_rocm_root(tmp_path: Path) -> Path:
    """A complete ROCm 6.2 root as a fixture tree (make_rocm_root): no real ROCm exists here."""
    return make_rocm_root(tmp_path / "opt-rocm")


@pytest.fixture(scope="session")
def triton_build(
    tmp_path_factory: pytest.TempPathFactory, download_cache: Path
) -> dict[str, Any]:
    """The real flash-attn Triton-variant wheel, built once per test session by the real CLI from
    the real PyPI sdist (pinned by sha256; the download is kept in pytest's cache)."""
    base = tmp_path_factory.mktemp("triton-build")
    cache = base / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    env = {"ROCMBUILD_WORKDIR": str(base / "build"), "ROCMBUILD_CACHE_DIR": str(cache)}
    res = rocmbuild(*TRITON_ARGS, env=env)
    assert res.returncode == 0, res.stderr
    wheels = sorted((base / "build" / "wheels").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return {"env": env, "wheel": wheels[0], "stderr": res.stderr, "base": base}
