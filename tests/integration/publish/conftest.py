"""Fixtures for the publish tests: real wheels built by `pip wheel` (once per session)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version
from publish_helpers import clean_env


@pytest.fixture(scope="session")
def real_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three wheels built by real `pip wheel` from tiny setuptools projects (one run)."""
    root = tmp_path_factory.mktemp("wheelsrc")
    specs = {
        "tiny": ("Tiny_Pkg", "1.0+rocm6.2.gfx942"),
        "tiny_old": ("Tiny_Pkg", "0.9"),
        "other": ("other.pkg", "0.1"),
    }
    dirs = []
    for key, (name, version) in specs.items():
        d = root / key
        mod = name.lower().replace(".", "_")
        (d / mod).mkdir(parents=True)
        (d / mod / "__init__.py").write_text(f"VERSION = {version!r}\n")
        (d / "setup.py").write_text(
            textwrap.dedent(f"""
            from setuptools import setup
            setup(name={name!r}, version={version!r}, packages=[{mod!r}],
                  python_requires=">=3.8")
        """)
        )
        dirs.append(str(d))
    out = root / "dist"
    # two pip runs: one resolver run cannot hold two versions of the same project
    for group in (dirs[:1] + dirs[2:], dirs[1:2]):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out),
                *group,
            ],
            check=True,
            env={**clean_env(), "SOURCE_DATE_EPOCH": "315532800"},
            timeout=300,
        )
    found = {parse_wheel_filename(p.name)[:2]: p for p in out.glob("*.whl")}
    return {key: found[(canonicalize_name(n), Version(v))] for key, (n, v) in specs.items()}
