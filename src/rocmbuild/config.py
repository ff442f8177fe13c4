"""Where things live. Every path can be moved by a flag or an environment variable.

- workspace: ``--workdir`` / ``ROCMBUILD_WORKDIR`` / ``[tool.rocmbuild] workdir`` (default
  ``./build``): src/, logs/, wheels/, index/, reports/, broken/
- cache: ``--cache-dir`` / ``ROCMBUILD_CACHE_DIR`` (default ``<workdir>/cache``): downloads,
  git mirrors, built wheels keyed by content
- recipes: ``ROCMBUILD_RECIPE_PATH`` (``os.pathsep``-separated) then the repository's
  ``recipes/``
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocmbuild import options
from rocmbuild.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]

# What a `path` source's copy leaves out, and so what its cache key must ignore too: build
# outputs of earlier local builds, which are not source.
SOURCE_TREE_IGNORE = ("build", "_skbuild", "__pycache__", "*.egg-info", ".git", "dist")


@dataclass(frozen=True)
class Workspace:
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


def recipe_dirs() -> list[Path]:
    dirs = [Path(p) for p in (options.env("ROCMBUILD_RECIPE_PATH") or "").split(os.pathsep) if p]
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"ROCMBUILD_RECIPE_PATH: {d} is not a directory",
                             hint=f"list existing recipe directories, separated by {os.pathsep!r}")
    dirs.append(REPO_ROOT / "recipes")
    return dirs
