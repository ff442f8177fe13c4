"""The Dockerfile, read as text (no Docker engine here): its base image's Python meets
requires-python (from a recorded table of the ROCm images' Ubuntu releases), the torch index
matches the base's ROCm release, it runs as a non-root user built with the host's UID/GID and in
the render and video groups, and .dockerignore keeps virtualenvs, build outputs and git out of
the build context while keeping what `pip install` of rocmbuild needs."""

from __future__ import annotations

import fnmatch
import re
import tomllib

from packaging.specifiers import SpecifierSet

from tests.conftest import REPO

# python3 of each Ubuntu release the rocm/dev-ubuntu-* images are made from.
UBUNTU_PYTHON = {"20.04": "3.8", "22.04": "3.10", "24.04": "3.12"}

TEXT = (REPO / "Dockerfile").read_text()
LINES = [ln.strip() for ln in TEXT.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def instructions(name: str) -> list[str]:
    return [ln.split(None, 1)[1] for ln in LINES if ln.split(None, 1)[0].upper() == name]


def test_base_python_meets_requires_python() -> None:
    (base,) = instructions("FROM")
    m = re.fullmatch(r"rocm/dev-ubuntu-(\d\d\.\d\d):(\d+)\.(\d+)\.(\d+)(-complete)?", base)
    assert m, f"base {base!r}: a rocm/dev-ubuntu image pinned to a ROCm patch release"
    python = UBUNTU_PYTHON[m.group(1)]
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python in SpecifierSet(requires), f"{base} has Python {python}, rocmbuild {requires}"
    # torch comes from the ROCm index of the base's ROCm release
    (index,) = [a for a in instructions("ARG") if a.startswith("TORCH_INDEX=")]
    assert index.endswith(f"/whl/rocm{m.group(2)}.{m.group(3)}")
    assert "python3 -m venv" in TEXT and "python3.1" not in TEXT


def test_runs_as_the_hosts_user_in_render_and_video() -> None:
    args = instructions("ARG")
    assert any(a.startswith("UID=") for a in args) and any(a.startswith("GID=") for a in args)
    user = instructions("USER")[-1]
    assert user not in ("root", "0") and not user.startswith("0:")
    useradd = re.search(r"useradd[^\n]*", TEXT)
    assert useradd and '-u "${UID}"' in useradd.group(0) and '-g "${GID}"' in useradd.group(0)
    assert re.search(r"-G render,video\b", useradd.group(0))
    assert "--group-add" in TEXT and "getent group render" in TEXT  # the run line says how


def test_dockerignore_keeps_heavy_things_out_and_the_package_in() -> None:
    patterns = [p.strip() for p in (REPO / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]

    def ignored(name: str) -> bool:
        return any(fnmatch.fnmatch(name, p.removeprefix("**/")) for p in patterns)

    for name in (".venv", ".venv-devpi", "build", ".git", "dist", "x.egg-info", "__pycache__"):
        assert ignored(name), name
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "src", "recipes",
                 "patches", "probes", "schemas"):
        assert not ignored(name), name
        assert (REPO / name).exists(), name
