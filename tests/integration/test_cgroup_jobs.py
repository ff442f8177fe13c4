"""MAX_JOBS under a real memory cgroup: a limit on a parent cgroup reaches the plan of a process
in a child without a limit (cgroup v1 here; v2 where its memory controller is writable), and
Slurm's memory and cpu variables cap it. Needs root; skips with the reason otherwise."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, rocmbuild
from tests.integration.memcg import memory_mount

GiB = 1024**3
# mem_per_job_gb = 5; the fork line forced (this host fits no line of flash-attn's CK variant)
PLAN = ("plan", "flash-attn", "--arch", "gfx942", "--json", "--release", "2.8-fork")


@pytest.fixture
def limited_parent() -> Iterator[tuple[int, Path, Path]]:
    """A cgroup limited to 3 GiB and a child of it with no limit; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create memory cgroups")
    found = memory_mount()
    if found is None:
        pytest.skip("no writable cgroup v1 or v2 memory controller on this host")
    version, mnt = found
    parent = mnt / f"rocmbuild-test-{uuid.uuid4().hex[:8]}"
    child = parent / "inner"
    try:
        parent.mkdir()
        (parent / ("memory.limit_in_bytes" if version == 1 else "memory.max")).write_text(
            str(3 * GiB))
        if version == 2:
            (parent / "cgroup.subtree_control").write_text("+memory")
        child.mkdir()
        yield version, parent, child
    finally:
        for d in (child, parent):
            if d.exists():
                d.rmdir()


def test_parent_cgroup_limit_reaches_max_jobs(limited_parent: tuple[int, Path, Path],
                                              tmp_path: Path) -> None:
    version, parent, child = limited_parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(COLUMNS="200", ROCMBUILD_WORKDIR=str(tmp_path / "build"))
    cmd = (f"echo $$ > {shlex.quote(str(child / 'cgroup.procs'))} && exec "
           f"{shlex.quote(sys.executable)} -m rocmbuild {' '.join(PLAN)}")
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    what = "memory.limit_in_bytes" if version == 1 else "memory.max"
    assert f"cgroup v{version} {what} 3.0 GiB at /{parent.name} minus use" in plan["jobs_reason"]
    assert plan["jobs"] == 1, plan["jobs_reason"]  # floor(< 3 GiB / 1.5 GiB) = 1
    # and without the cgroup, this host plans for its own memory
    free = rocmbuild(*PLAN, env={"ROCMBUILD_WORKDIR": str(tmp_path / "build")}, check=True)
    assert f"at /{parent.name}" not in json.loads(free.stdout)["jobs_reason"]


def test_slurm_variables_cap_jobs(tmp_path: Path) -> None:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "SLURM_CPUS_PER_TASK": "1",
           "SLURM_MEM_PER_CPU": "10240"}
    plan = json.loads(rocmbuild(*PLAN, env=env, check=True).stdout)
    assert plan["jobs"] == 1
    assert "1 cpus (SLURM_CPUS_PER_TASK=1)" in plan["jobs_reason"]
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "SLURM_MEM_PER_NODE": "2048"}
    plan = json.loads(rocmbuild(*PLAN, env=env, check=True).stdout)
    assert "floor(2.0 GiB usable (SLURM_MEM_PER_NODE=2048 MB) / 1.5 GiB per job) = 1" in \
        plan["jobs_reason"]
