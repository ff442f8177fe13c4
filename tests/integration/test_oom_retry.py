"""An OOM-killed compile, for real: rocmbuild runs inside a cgroup v1 memory cgroup with
``memory.limit_in_bytes`` set (swap is off here); the recipe's setup.py builds a CMake project of
light and heavy C++ units with ninja at ``-j MAX_JOBS``. A compiler launcher (the one stand-in:
a few lines of Python in front of the real g++, as ccache is) holds HEAVY_MB of memory before
each heavy unit compiles, so four heavy units at once exceed the limit and two fit. Real: the
cgroup, the kernel's OOM killer and its oom_kill counter, cmake, ninja, g++, pip, setuptools.

Checked: the kill is detected (the counter), the build re-runs at half the jobs in the same tree,
units finished before the kill are not compiled again (the launcher's journal and ninja's own
.ninja_log say each object was built once), the build finishes, and the warning, the stage's
reason and the build record say so; a kill with nothing left to halve is a build error with the
fix. Needs root and
a writable memory controller; skips with the reason otherwise. Cgroups are removed afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration import memcg as memcg_helpers

MiB = 1024**2
HEAVY_MB = 320

LAUNCHER = """import os, subprocess, sys, time
obj = sys.argv[sys.argv.index("-o") + 1]
block = b"x" * ({mb} << 20) if "heavy" in obj else b""  # touched: charged to the cgroup
time.sleep(3.0 if block else 0)  # long enough to overlap on a loaded machine
del block
rc = subprocess.call(sys.argv[1:])
if rc == 0:
    with open({journal!r}, "a") as f:
        f.write(os.environ["MAX_JOBS"] + " " + obj + "\\n")
sys.exit(rc)
"""
SETUP = """import os, subprocess, sys
from setuptools import setup
from setuptools.command.build_py import build_py

class Build(build_py):
    def run(self):
        here = os.path.dirname(os.path.abspath(__file__))
        out = os.path.join(here, "_cbuild")  # in the tree: a retry resumes it
        if not os.path.exists(os.path.join(out, "build.ninja")):
            subprocess.check_call(["cmake", "-S", here, "-B", out, "-G", "Ninja",
                                   "-DCMAKE_CXX_COMPILER_LAUNCHER=" + sys.executable + ";"
                                   + os.path.join(here, "launcher.py")])
        subprocess.check_call(["cmake", "--build", out, "-j", os.environ["MAX_JOBS"]])
        super().run()

setup(name="oomdemo", version="1.0", packages=["oomdemo"], cmdclass={"build_py": Build})
"""
UNITS = [f"light_{i}" for i in range(4)] + [f"heavy_{i}" for i in range(4)]
RECIPE = """schema_version = 1
[package]
name = "oomdemo"
[source]
path = "src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 0.1
disk_gb = 0.1
python_requires = ["setuptools", "wheel"]
env = { MAX_JOBS = "{jobs}" }
"""


def make_recipe(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src"
    (src / "oomdemo").mkdir(parents=True)
    (src / "oomdemo" / "__init__.py").write_text("")
    (src / "setup.py").write_text(SETUP)
    journal = tmp_path / "journal.txt"
    (src / "launcher.py").write_text(LAUNCHER.format(mb=HEAVY_MB, journal=str(journal)))
    for u in UNITS:
        (src / f"{u}.cpp").write_text(f"int {u}() {{ return {len(u)}; }}\n")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(oomdemo CXX)\n"
        f"add_library(oomdemo STATIC {' '.join(u + '.cpp' for u in UNITS)})\n")
    recipe = tmp_path / "oomdemo.toml"
    recipe.write_text(RECIPE)
    return recipe, journal


@pytest.fixture
def memcg() -> Iterator[Path]:
    """A cgroup v1 memory cgroup (no swap for it); removed afterwards."""
    why = memcg_helpers.v1_unavailable()
    if why is not None:
        pytest.skip(why)
    with memcg_helpers.v1_cgroup("rocmbuild-oom") as cg:
        yield cg


def build_in(cg: Path, limit: int, recipe: Path, jobs: int, tmp_path: Path
             ) -> subprocess.CompletedProcess[str]:
    memcg_helpers.set_limit(cg, limit)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(COLUMNS="200", ROCMBUILD_WORKDIR=str(tmp_path / "build"))
    argv = [sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch", "gfx942",
            "--jobs", str(jobs)]
    return subprocess.run(memcg_helpers.inside(cg, argv), capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


oom_kills = memcg_helpers.oom_kills


def test_oom_kill_retries_at_half_the_jobs_and_keeps_finished_units(
        memcg: Path, tmp_path: Path) -> None:
    recipe, journal = make_recipe(tmp_path)
    res = build_in(memcg, (4 * HEAVY_MB - 200) * MiB, recipe, 4, tmp_path)
    assert res.returncode == 0, res.stderr
    assert oom_kills(memcg) >= 1  # the kernel did kill
    assert "OOM-killed at MAX_JOBS 4 (unit CMakeFiles/oomdemo.dir/heavy_" in res.stderr
    assert "the memory cgroup's oom_kill counter rose by " in res.stderr  # seen by the counter
    assert "retrying at MAX_JOBS 2 in the same tree" in res.stderr
    assert re.search(r"warning in [\d.]+s: oomdemo-1\.0\S+\.whl; OOM-killed at MAX_JOBS 4 "
                     r"\(unit CMakeFiles/oomdemo\.dir/heavy_\d\.cpp\.o\); retried at 2, finished",
                     res.stderr), res.stderr
    built = [line.split() for line in journal.read_text().splitlines()]
    objects = [o for _, o in built]
    assert sorted(objects) == sorted(f"CMakeFiles/oomdemo.dir/{u}.cpp.o" for u in UNITS)
    assert {(j, o) for j, o in built if "light" in o} == {
        ("4", f"CMakeFiles/oomdemo.dir/light_{i}.cpp.o") for i in range(4)}
    assert any(j == "2" for j, o in built if "heavy" in o)  # the retry compiled the rest
    tree = next((tmp_path / "build/src/oomdemo").iterdir())
    logged = [ln.split("\t")[3] for ln in (tree / "_cbuild/.ninja_log").read_text().splitlines()
              if not ln.startswith("#")]
    assert sorted(o for o in logged if o.endswith(".o")) == sorted(objects)  # each once
    wheel = next((tmp_path / "build/wheels").glob("oomdemo-*.whl"))
    record = json.loads(Path(f"{wheel}.build.json").read_text())
    assert record["oom_retry"].startswith("OOM-killed at MAX_JOBS 4 (unit CMakeFiles/")
    assert record["oom_retry"].endswith("; retried at 2, finished")
    assert record["disk"]["tree_bytes"] > 0


def test_oom_kill_at_one_job_is_a_build_error_with_the_fix(memcg: Path, tmp_path: Path
                                                           ) -> None:
    """Nothing to halve: no retry (the retry's own second kill is tested in the unit tests)."""
    recipe, _ = make_recipe(tmp_path)
    res = build_in(memcg, (HEAVY_MB - 60) * MiB, recipe, 1, tmp_path)
    assert res.returncode == 6, res.stderr
    assert "retrying" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("build error: ")]
    assert len(errors) == 1, res.stderr
    assert "a compile was OOM-killed at MAX_JOBS 1 (unit CMakeFiles/oomdemo.dir/heavy_" \
        in errors[0]
    assert "lower --jobs" in res.stderr and "mem_per_job_gb" in res.stderr
    assert "Traceback" not in res.stderr


COUNTER = """import subprocess, sys
from rocmbuild.buildtools import oom
before = oom.oom_kills()
rc = subprocess.call([sys.executable, "-c",
                      "b = bytearray({mb} << 20); b[::4096] = b'x' * len(b[::4096])"])
print(rc, oom.oom_kills() - before)
"""


def test_counter_sees_a_kill_under_a_parents_limit(memcg: Path) -> None:
    """The limit sits on a parent (a Slurm job above its step, a slice above a container) and
    rocmbuild runs in a child without one: a child process hitting the parent's limit is
    killed, and ``oom.oom_kills()`` read inside the child cgroup (the own cgroup's counter, the
    only one read) rises by 1. Real kernel, real cgroup v1 hierarchy; the parent's own counter
    stays 0 on v1, which is why the own cgroup's is the one that counts."""
    memcg_helpers.set_limit(memcg, 100 * MiB)
    child = memcg / "step_0"
    child.mkdir()
    try:
        res = subprocess.run(memcg_helpers.inside(child, [
            sys.executable, "-c", COUNTER.format(mb=300)]), capture_output=True, text=True,
            cwd=REPO, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["-9", "1"], res.stdout + res.stderr
    finally:
        for pid in (child / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        child.rmdir()
