"""The shipped recipes, patches, probes and schemas go into the wheel as package data.

They stay where they are in the repository (top-level recipes/, patches/, probes/, schemas/:
the recipes point at each other's files with relative paths such as ``../patches/...``); the
build copies the four directories into ``rocmbuild/data/`` of the wheel, where
``rocmbuild.core.config.DATA_ROOT`` finds them. An editable install reads them from the checkout.
Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("recipes", "patches", "probes", "schemas", "stacks")
# Build outputs of local probe builds are not data.
IGNORE = shutil.ignore_patterns("build", "_skbuild", "dist", "__pycache__", "*.egg-info", "*.pyc")


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "rocmbuild" / "data"
        for name in DATA_DIRS:
            dest = target / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(here / name, dest, ignore=IGNORE)


setup(cmdclass={"build_py": BuildPyWithData})
