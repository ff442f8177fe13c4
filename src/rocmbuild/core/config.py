"""Where things live. Every path can be moved by a flag or an environment variable.

- workspace: ``--workdir`` / ``ROCMBUILD_WORKDIR`` / ``[tool.rocmbuild] workdir`` (default
  ``./build``): src/, logs/, wheels/, index/, reports/, broken/
- cache: ``--cache-dir`` / ``ROCMBUILD_CACHE_DIR`` (default ``<workdir>/cache``): downloads,
  git mirrors, built wheels keyed by content
- recipes: ``--recipes DIR`` (repeatable), then ``ROCMBUILD_RECIPE_PATH``
  (``os.pathsep``-separated), then the shipped ``recipes/``

The shipped recipes, patches, probes and schemas (``DATA_ROOT``) are the repository's top-level
directories in a checkout; a built wheel carries the same directories as package data in
``rocmbuild/data/`` (setup.py copies them there), so a checkout and an installed tool find the
same files, and the recipes' relative paths (``../patches/...``) hold in both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import fsutil, options
from rocmbuild.core.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[3]


def _data_root() -> Path:
    """rocmbuild/data/ in an installed wheel, else the checkout's root."""
    packaged = Path(__file__).resolve().parents[1] / "data"
    return packaged if (packaged / "recipes").is_dir() else REPO_ROOT


DATA_ROOT = _data_root()
"""Where ``recipes/``, ``patches/``, ``probes/`` and ``schemas/`` are."""

_flag_recipe_dirs: tuple[Path, ...] = ()

# What a `path` source's copy leaves out, and so what its cache key must ignore too: build
# outputs of earlier local builds, which are not source.
SOURCE_TREE_IGNORE = ("build", "_skbuild", "__pycache__", "*.egg-info", ".git", "dist")


@dataclass(frozen=True)
class Workspace:
    """A workspace (``--workdir``) and its cache (``--cache-dir``)."""

    root: Path
    cache: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def wheels(self) -> Path:
        return self.root / "wheels"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def broken(self) -> Path:
        return self.root / "broken"


def workspace(workdir: str | None = None, cache_dir: str | None = None) -> Workspace:
    """The workspace from the flags (None: environment, then [tool.rocmbuild], then default)."""
    root = Path(options.resolve("workdir", workdir, "build")).absolute()
    cache = Path(options.resolve("cache_dir", cache_dir, str(root / "cache"))).absolute()
    return Workspace(root=root, cache=cache)


def use_recipe_dirs(dirs: list[str]) -> None:
    """The ``--recipes DIR`` flags (the command layer calls this once, after parsing)."""
    global _flag_recipe_dirs
    for d in dirs:
        if problem := fsutil.name_problem(d):
            raise UsageError(f"--recipes: {d[:60]!r}...: {problem}",
                             hint="give a directory holding <name>.toml recipes")
        if not Path(d).is_dir():
            raise UsageError(f"--recipes: {d} is not a directory",
                             hint="give a directory holding <name>.toml recipes")
    _flag_recipe_dirs = tuple(Path(d) for d in dirs)


def flag_recipe_dirs() -> tuple[Path, ...]:
    """The ``--recipes`` directories given to ``use_recipe_dirs``."""
    return _flag_recipe_dirs


def recipe_dirs() -> list[Path]:
    """Where recipe names are looked up, first match wins: --recipes, ROCMBUILD_RECIPE_PATH,
    the shipped recipes."""
    dirs = [Path(p) for p in (options.env("ROCMBUILD_RECIPE_PATH") or "").split(os.pathsep) if p]
    for d in dirs:
        if problem := fsutil.name_problem(d):
            raise UsageError(f"ROCMBUILD_RECIPE_PATH: {str(d)[:60]!r}...: {problem}",
                             hint=f"list existing recipe directories, separated by {os.pathsep!r}")
        if not d.is_dir():
            raise UsageError(f"ROCMBUILD_RECIPE_PATH: {d} is not a directory",
                             hint=f"list existing recipe directories, separated by {os.pathsep!r}")
    return [*_flag_recipe_dirs, *dirs, DATA_ROOT / "recipes"]
