"""`rocmbuild cache prune` through the real CLI over real builds: a cache hit records its last
use, so LRU follows use and not age; a build lock held by another process keeps its build; the
JSON and the human report say what was freed. And the no-op rebuild (issue 13): a hit imports
only what it needs. The builds are a small local setuptools project (real pip, no compiler);
nothing is faked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.conftest import REPO, rocmbuild
from tests.integration.test_pipeline_local import make_recipe


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real builds of the same recipe (gfx942, then gfx90a): two cache keys. The recipe's
    validation requirements (not installed: nothing is validated) carry version ranges, which
    every load checks."""
    base = tmp_path_factory.mktemp("prune")
    recipe = make_recipe(base)
    with recipe.open("a") as f:
        f.write('[validate]\nrequires = ["pytest>=7,<100", "packaging~=24.0", "wheel"]\n')
    env = {"ROCMBUILD_WORKDIR": str(base / "build")}
    keys = []
    for arch in ("gfx942", "gfx90a"):
        res = rocmbuild("build", str(recipe), "--arch", arch, "--json", env=env, check=True)
        keys.append(json.loads(res.stdout)["cache_key"])
    return {"base": base, "recipe": recipe, "env": env, "keys": keys}


# What a cache hit must not import: every stage (and through them http, tarfile, ...), the build
# env, the process runner, the compiler search (this recipe compiles no HIP), importlib.metadata
# (host facts are read from the dist-info files) and the modules those pulled in; rich (the hit's
# two lines are plain text, written without it) and packaging (plain requirement strings and
# version ranges are checked by rocmbuild.core.pep508); the other commands (a run imports and
# builds the parser of its own command only), the resource preflight (a build's, not a hit's) and
# the stages' own values (buildfacts: torch as built, hipify's changes, the bundle).
NOT_ON_A_HIT = ("rocmbuild.stages.fetch", "rocmbuild.stages.build", "rocmbuild.stages.tag",
                "rocmbuild.stages.audit", "rocmbuild.stages.validate",
                "rocmbuild.buildtools.buildenv", "rocmbuild.core.run", "rocmbuild.host.compiler",
                "rocmbuild.artifacts.audit", "rocmbuild.artifacts.wheel",
                "rocmbuild.validate.runner", "importlib.metadata", "email.message", "http.client",
                "urllib.request", "tarfile", "zipfile", "difflib", "rich", "rich.console",
                "rich.markup", "packaging.requirements", "packaging.specifiers", "logging",
                "rocmbuild.commands.plan", "rocmbuild.commands.validate",
                "rocmbuild.commands.nightly", "rocmbuild.commands.completion",
                "rocmbuild.buildtools.preflight", "rocmbuild.artifacts.buildfacts")


def test_noop_rebuild_imports_only_what_a_hit_needs(two_builds: dict[str, Any]) -> None:
    """Runs first (file order): both entries are still cached."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rocmbuild", "build",
         str(two_builds["recipe"]), "--arch", "gfx942"],
        capture_output=True, text=True, env={**os.environ, **two_builds["env"]}, cwd=REPO)
    assert res.returncode == 0 and res.stderr.rstrip().endswith("cached"), res.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    # it did parse
    assert "rocmbuild.pipeline.build" in imported and "rocmbuild.cache.store" in imported
    assert sorted(imported & set(NOT_ON_A_HIT)) == []


def _prune(env: dict[str, str], *args: str) -> dict[str, Any]:
    res = rocmbuild("cache", "prune", "--json", *args, env=env, check=True)
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def test_hit_records_use_and_lru_follows_it(two_builds: dict[str, Any]) -> None:
    env, first, second = two_builds["env"], *two_builds["keys"]
    time.sleep(0.05)  # mtimes must differ
    hit = rocmbuild("build", str(two_builds["recipe"]), "--arch", "gfx942", env=env, check=True)
    assert hit.stderr.rstrip().endswith("cached")
    plan = _prune(env, "--max-size", "0", "--dry-run")
    assert [r["key"] for r in plan["removed"]] == [second, first]  # first built, last used
    assert plan["dry_run"] and (two_builds["base"] / "build/cache/wheels" / second).is_dir()
    # the in-use skip: another process holds the second build's lock, as a running build does
    with subprocess.Popen(
            [sys.executable, "-c", "import sys, time; from pathlib import Path; "
             "from rocmbuild.core import lock\nwith lock.held(Path(sys.argv[1]), 'test'):\n"
             "    print('held', flush=True); time.sleep(60)",
             str(two_builds["base"] / "build/cache/locks" / f"{second}.lock")],
            stdout=subprocess.PIPE, text=True, cwd=REPO) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            kept = _prune(env, "--keep-days", "0")
        finally:
            holder.kill()
    assert [r["key"] for r in kept["kept_in_use"]] == [second]
    assert kept["kept_in_use"][0]["reason"] == "in use by a running build"
    assert [r["key"] for r in kept["removed"]] == [first]
    assert kept["freed_bytes"] == kept["removed"][0]["size"] > 0
    assert not (two_builds["base"] / "build/cache/wheels" / first).exists()
    assert not (two_builds["base"] / "build/src/demo" / first[:16]).exists()
    # the lock is free now: the human report names what went and the total freed
    res = rocmbuild("cache", "prune", "--keep-days", "0", env=env, check=True)
    assert f"removed build {second[:16]}" in res.stdout and "freed " in res.stdout
    assert not (two_builds["base"] / "build/cache/wheels" / second).exists()
    # the wheels delivered to the wheel dir are not the cache's: they stay
    assert len(list((two_builds["base"] / "build/wheels").glob("*.whl"))) == 2
