"""Usable memory and cpus from cgroup v1 and v2 (own cgroup and its parents) and Slurm's env.

The /proc and /sys trees are small fixture trees (made by ``fake``): this machine's own cgroups
are not ours to change in a unit test (tests/integration/test_cgroup_jobs.py changes real ones
as root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.host import cgroups
from rocmbuild.host import detect as host

GiB = 1024**3
UNLIMITED = "9223372036854771712"  # what cgroup v1 shows for "no limit"

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_SELF = "4:memory:/slurm/uid_0/job_12/step_0\n3:cpuset:/slurm/uid_0/job_12/step_0\n" \
          "2:cpu,cpuacct:/slurm/uid_0/job_12/step_0\n0::/\n"
V2_MOUNTS = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def fake(root: Path, files: dict[str, str], avail_gb: float = 500,
         mounts: str = V1_MOUNTS, self_cgroup: str = V1_SELF) -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(f"MemAvailable: {int(avail_gb * 1024**2)} kB\n")
    (root / "proc/self/mountinfo").write_text(mounts)
    (root / "proc/self/cgroup").write_text(self_cgroup)
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return root


def v1_memory(job_limit: int | str, step_limit: str = UNLIMITED) -> dict[str, str]:
    base = "sys/fs/cgroup/memory"
    return {
        f"{base}/memory.limit_in_bytes": UNLIMITED,
        f"{base}/memory.usage_in_bytes": str(100 * GiB),
        f"{base}/slurm/uid_0/job_12/memory.limit_in_bytes": str(job_limit),
        f"{base}/slurm/uid_0/job_12/memory.usage_in_bytes": str(2 * GiB),
        f"{base}/slurm/uid_0/job_12/step_0/memory.limit_in_bytes": step_limit,
        f"{base}/slurm/uid_0/job_12/step_0/memory.usage_in_bytes": str(GiB),
    }


def test_v1_parent_limit_is_found_and_unlimited_is_no_limit(tmp_path: Path) -> None:
    root = fake(tmp_path, v1_memory(60 * GiB))
    mem, source = cgroups.usable_memory(root)
    assert mem == 58 * GiB  # the job's 60 GiB minus its 2 GiB use; the step's "limit" is none
    assert source == ("cgroup v1 memory.limit_in_bytes 60.0 GiB at /slurm/uid_0/job_12 "
                      "minus use")
    plan = cgroups.plan_jobs(9.1, root=root, cpus=16)
    assert plan.jobs == 6 and "/slurm/uid_0/job_12" in plan.reason


def test_v1_tightest_of_step_and_job(tmp_path: Path) -> None:
    root = fake(tmp_path, v1_memory(60 * GiB, step_limit=str(5 * GiB)))
    mem, source = cgroups.usable_memory(root)
    assert mem == 4 * GiB and "at /slurm/uid_0/job_12/step_0 " in source


def test_inactive_page_cache_is_not_use(tmp_path: Path) -> None:
    files = v1_memory(10 * GiB, step_limit=str(5 * GiB))
    files["sys/fs/cgroup/memory/slurm/uid_0/job_12/step_0/memory.usage_in_bytes"] = str(5 * GiB)
    files["sys/fs/cgroup/memory/slurm/uid_0/job_12/step_0/memory.stat"] = (
        f"cache {4 * GiB}\ninactive_file 1\ntotal_inactive_file {3 * GiB}\n")
    assert cgroups.usable_memory(fake(tmp_path, files))[0] == 3 * GiB  # 5 - 5 + 3


def test_no_limits_anywhere_is_memavailable(tmp_path: Path) -> None:
    root = fake(tmp_path, v1_memory(UNLIMITED), avail_gb=20)
    assert cgroups.usable_memory(root) == (20 * GiB, "MemAvailable")


def test_v2_parents_walked(tmp_path: Path) -> None:
    base = "sys/fs/cgroup"
    root = fake(tmp_path, {
        f"{base}/build.slice/memory.max": str(16 * GiB),
        f"{base}/build.slice/memory.current": str(GiB),
        f"{base}/build.slice/b.service/memory.max": "max",
        f"{base}/build.slice/b.service/memory.current": "0",
        f"{base}/build.slice/cpu.max": "400000 100000",
        f"{base}/build.slice/b.service/cpu.max": "max 100000",
        f"{base}/build.slice/b.service/cpuset.cpus.effective": "0-63",
    }, mounts=V2_MOUNTS, self_cgroup="0::/build.slice/b.service\n")
    mem, source = cgroups.usable_memory(root)
    assert mem == 15 * GiB and source.startswith("cgroup v2 memory.max 16.0 GiB at /build.slice")
    cpus, why = cgroups.usable_cpus_why(root)
    if cpus == 4:  # the fixture host's cpu count may itself be below 4
        assert why == "cgroup v2 cpu quota at /build.slice"


def test_v1_cpu_quota_and_cpuset(tmp_path: Path) -> None:
    cpu = "sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/job_12"
    root = fake(tmp_path, {
        f"{cpu}/cpu.cfs_quota_us": "150000", f"{cpu}/cpu.cfs_period_us": "100000",
        f"{cpu}/step_0/cpu.cfs_quota_us": "-1", f"{cpu}/step_0/cpu.cfs_period_us": "100000",
        "sys/fs/cgroup/cpuset/slurm/uid_0/job_12/step_0/cpuset.effective_cpus": "0-3,8",
    })
    assert cgroups.usable_cpus_why(root) == (1, "cgroup v1 cpu quota at /slurm/uid_0/job_12")
    root2 = fake(tmp_path / "b", {
        "sys/fs/cgroup/cpuset/slurm/uid_0/job_12/step_0/cpuset.effective_cpus": "0",
        "sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/job_12/step_0/cpu.cfs_quota_us": "-1",
    })
    assert cgroups.usable_cpus_why(root2) == (1, "cgroup v1 cpuset at /slurm/uid_0/job_12/step_0")


def test_container_view_mount_root(tmp_path: Path) -> None:
    """In a container the mount shows only the container's own cgroup (mount root /docker/x):
    its limit is in the mount point itself."""
    mounts = "35 31 0:32 /docker/x /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
    root = fake(tmp_path, {"sys/fs/cgroup/memory/memory.limit_in_bytes": str(8 * GiB),
                           "sys/fs/cgroup/memory/memory.usage_in_bytes": "0"},
                mounts=mounts, self_cgroup="4:memory:/docker/x\n")
    assert cgroups.usable_memory(root) == (8 * GiB, "cgroup v1 memory.limit_in_bytes 8.0 GiB at "
                                                 "/docker/x minus use")


def test_untrusted_paths_stay_inside(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/memory.limit_in_bytes").write_text(str(GiB))
    root = fake(tmp_path / "r", {}, self_cgroup="4:memory:/../../../outside\n", avail_gb=10)
    assert cgroups.cgroup_dirs("memory", root) == []
    assert cgroups.usable_memory(root) == (10 * GiB, "MemAvailable")
    garbage = fake(tmp_path / "g", {"sys/fs/cgroup/memory/slurm/uid_0/job_12/step_0/"
                                    "memory.limit_in_bytes": "lots"}, avail_gb=10)
    assert cgroups.usable_memory(garbage)[0] == 10 * GiB


def test_slurm_env_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake(tmp_path, v1_memory(60 * GiB))
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("SLURM_MEM_PER_CPU", "2048")
    assert cgroups.usable_cpus_why(root) == (1, "SLURM_CPUS_PER_TASK=1")
    assert cgroups.usable_memory(root) == (2 * GiB, "SLURM_MEM_PER_CPU=2048 MB x 1 cpus")
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "3072")
    assert cgroups.usable_memory(root) == (3 * GiB, "SLURM_MEM_PER_NODE=3072 MB")
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "0")  # the whole node: the cgroup decides
    monkeypatch.delenv("SLURM_MEM_PER_CPU")
    assert cgroups.usable_memory(root)[0] == 58 * GiB
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "16G")
    with pytest.raises(UsageError, match="SLURM_MEM_PER_NODE"):
        cgroups.usable_memory(root)


def test_host_carries_cpu_source(tmp_path: Path) -> None:
    cpu = "sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/job_12"
    root = fake(tmp_path, {f"{cpu}/cpu.cfs_quota_us": "100000",
                           f"{cpu}/cpu.cfs_period_us": "100000", **v1_memory(60 * GiB)})
    h = host.detect(want_compiler=False, fs_root=root)
    assert (h.cpus, h.cpus_source) == (1, "cgroup v1 cpu quota at /slurm/uid_0/job_12")
    again = host.from_json(h.to_json(), "h.json")
    assert again.cpus_source == h.cpus_source and again.memory_source == h.memory_source
    data = h.to_json()
    del data["cpus_source"]  # hosts saved before it existed
    assert host.from_json(data, "old.json").cpus_source == ""
