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
