"""One plan for the same inputs, whoever plans it: once a build has recorded what its units took
(the cache's learned memory), `rocmbuild plan --json`, `rocmbuild doctor --recipe --json`, the
nightly's decision for a cell (`nightly --dry-run --json`, and the task its Slurm executor would
submit) and verify's planning from the wheel's provenance all render the same MAX_JOBS, the same
reason (the learned figure) and the same cache key (plan/planning.py).

Real parts: the real CLI builds a small C++ cmake project (real c++, cmake, ninja and the memlog
launcher, which measures every unit); its wheel is the one verify plans from. Nothing is faked.
The usable memory is pinned with SLURM_MEM_PER_NODE, the allocation a build on a Slurm node sees
(cgroups.usable_memory), so that every planner, in whichever process, reads the same figure
(MemAvailable moves between processes). The recipe's mem_per_job_gb (1.5 GiB of the 2 GiB) is
far above what the units take, so a planner that ignores the learned memory plans differently.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.cache import learned
from rocmbuild.host import cgroups
from rocmbuild.nightly import config as nightly_config
from rocmbuild.nightly import controller
from rocmbuild.pipeline import verify
from tests.conftest import rocmbuild

UNITS = 4
USABLE_MB = 2048
RECIPE = """schema_version = 1
[package]
name = "oneplan"
version = "1.0.0"
[source]
path = "{src}"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
backend = "cmake"
mem_per_job_gb = 1.5
python_requires = ["cmake", "ninja"]
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("oneplan")
    src = d / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(oneplan LANGUAGES CXX)\n"
        f"add_library(one SHARED {' '.join(f'u{i}.cpp' for i in range(UNITS))})\n"
        "install(TARGETS one LIBRARY DESTINATION lib)\n")
    for i in range(UNITS):
        (src / f"u{i}.cpp").write_text(f"#include <vector>\nint f{i}() {{ return {i}; }}\n")
    recipe = d / "oneplan.toml"
    recipe.write_text(RECIPE.format(src=src))
    env = {"ROCMBUILD_WORKDIR": str(d / "w"), "ROCMBUILD_PROGRESS_SECONDS": "3600",
           "SLURM_MEM_PER_NODE": str(USABLE_MB)}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--jobs", "2", env=env)
    assert res.returncode == 0, res.stderr
    (wheel,) = (d / "w/wheels").glob("oneplan-*.whl")
    (d / "nightly.toml").write_text(
        f'workdir = "{d / "w"}"\n[[matrix]]\nrecipes = ["{recipe}"]\narchs = ["gfx942"]\n'
        '[publish]\nindex = "index"\n')
    return {"d": d, "recipe": recipe, "env": env, "wheel": wheel}


def test_every_planner_renders_the_same_plan(built: dict[str, Any],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    d, recipe, env = built["d"], built["recipe"], built["env"]
    (measured,) = learned.load(d / "w/cache", "oneplan")
    assert measured.count == UNITS and measured.per_job_gb() < 1.5

    res = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--json", env=env)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    want = (plan["jobs"], plan["jobs_reason"], plan["cache_key"])
    assert f"p95 measured over {UNITS} units + 15 %" in plan["jobs_reason"], plan
    assert f"{USABLE_MB / 1024:.1f} GiB usable (SLURM_MEM_PER_NODE" in plan["jobs_reason"]
    by_mem = max(1, math.floor(USABLE_MB / 1024 / measured.per_job_gb()))
    assert plan["jobs"] == min(cgroups.usable_cpus(), by_mem)  # the recipe's 1.5 GiB: 1

    # doctor: its host-readiness memory line is the recipe's plan (rc 10 where ROCm is absent)
    res = rocmbuild("doctor", "--recipe", str(recipe), "--arch", "gfx942", "--json", env=env)
    assert res.returncode in (0, 10), res.stderr
    memory = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "memory")["data"]
    assert memory["jobs"] == plan["jobs"], memory  # (before planning.py: the recipe's figure)
    assert (memory["jobs"], memory["jobs_reason"], memory["cache_key"]) == want, memory
    assert memory["mem_from"] == "learned"

    # the nightly: the cell's decision, and the resources a Slurm array task asks for
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cfg = nightly_config.load(d / "nightly.toml")
    planned = controller.plan(cfg)
    assert planned[0].plan is not None and planned[0].plan.jobs == plan["jobs"]
    (task,) = controller.tasks(cfg, d / "run", planned)
    assert task.cpus == plan["jobs"]
    assert task.mem_bytes == int(plan["jobs"] * measured.per_job_gb() * (1 << 30))
    res = rocmbuild("nightly", "--config", str(d / "nightly.toml"), "--dry-run", "--json",
                    env=env, cwd=d)
    assert res.returncode == 0, res.stderr
    (cell,) = json.loads(res.stdout)
    assert (cell["jobs"], cell["jobs_reason"], cell["cache_key"]) == want, cell
    assert cell["mem_from"] == "learned"

    # verify: the plan it rebuilds from, from the wheel's provenance, with the same cache
    prov = read_wheel(built["wheel"]).provenance
    assert prov is not None
    vplan, _ = verify.plan_for(prov, str(recipe), None, None, d / "w/cache")
    assert (vplan.jobs, vplan.jobs_reason, vplan.cache_key) == want
    assert vplan.cache_key == prov["cache_key"]  # the wheel's own key: verify would rebuild


def test_nothing_learned_plans_from_the_recipe(built: dict[str, Any]) -> None:
    """Another arch set has measured nothing: the recipe's figure, and the dry-run says so."""
    d, recipe, env = built["d"], built["recipe"], built["env"]
    res = rocmbuild("plan", str(recipe), "--arch", "gfx90a", "--json", env=env)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert "measured" not in plan["jobs_reason"] and "1.5 GiB per job" in plan["jobs_reason"]
    (d / "n90a.toml").write_text((d / "nightly.toml").read_text().replace('"gfx942"', '"gfx90a"'))
    res = rocmbuild("nightly", "--config", str(d / "n90a.toml"), "--dry-run", env=env, cwd=d)
    assert res.returncode == 0, res.stderr
    assert f"MAX_JOBS {plan['jobs']} x 1.5 GiB (recipe)" in res.stdout, res.stdout
