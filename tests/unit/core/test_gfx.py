"""--arch parsing, `native` from KFD sysfs, and memory-aware MAX_JOBS.

The sysfs, /proc and cgroup trees here are small fixture trees: this machine has no AMD GPU and
its cgroup limits are not ours to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.core import gfx as arch
from rocmbuild.core.errors import ToolchainError, UsageError
from rocmbuild.host import cgroups, gpus

GiB = 1024**3


def make_sysfs(root: Path, versions: list[int]) -> Path:
    for i, v in enumerate(versions):
        node = root / "class/kfd/kfd/topology/nodes" / str(i)
        node.mkdir(parents=True)
        node.joinpath("properties").write_text(
            f"cpu_cores_count {0 if v else 16}\nsimd_count {0 if not v else 304}\n"
            f"gfx_target_version {v}\nvendor_id 4098\n"
        )
    return root


def test_gfx_from_target_version() -> None:
    assert gpus.gfx_from_target_version(90402) == "gfx942"
    assert gpus.gfx_from_target_version(90010) == "gfx90a"
    assert gpus.gfx_from_target_version(110000) == "gfx1100"
    assert gpus.gfx_from_target_version(90500) == "gfx950"


def test_native_reads_gpus_and_skips_cpu_nodes(tmp_path: Path, monkeypatch) -> None:
    make_sysfs(tmp_path, [0, 90402, 90402, 90010])
    monkeypatch.setenv("ROCMBUILD_SYSFS_ROOT", str(tmp_path))
    assert gpus.native_archs() == ["gfx942", "gfx90a"]
    assert arch.parse_archs("native", ("gfx90a", "gfx942"),
                            native=gpus.native_archs()) == ("gfx942", "gfx90a")


def test_native_without_gpu_fails_clearly(tmp_path: Path, monkeypatch) -> None:
    make_sysfs(tmp_path, [0])
    monkeypatch.setenv("ROCMBUILD_SYSFS_ROOT", str(tmp_path))
    with pytest.raises(ToolchainError, match="no AMD GPU found"):
        gpus.native_archs()
    with pytest.raises(ToolchainError, match="no AMD GPU found under the host in h.json"):
        arch.parse_archs("native", native=(), native_where="the host in h.json")


def test_parse_keeps_order_drops_repeats_and_accepts_features() -> None:
    assert arch.parse_archs("gfx942,gfx90a;gfx942") == ("gfx942", "gfx90a")
    assert arch.parse_archs("gfx90a:xnack+", ("gfx90a",)) == ("gfx90a:xnack+",)


def test_unknown_and_unsupported_archs() -> None:
    with pytest.raises(UsageError, match="did you mean gfx942"):
        arch.parse_archs("gfx9420")
    with pytest.raises(UsageError, match=r"gfx1100 is not supported by .*gfx90a, gfx942"):
        arch.parse_archs("gfx1100", ("gfx90a", "gfx942"), "flash-attn.toml")
    with pytest.raises(UsageError, match="empty"):
        arch.parse_archs(" , ")


def fake_root(
    tmp_path: Path,
    avail_gb: float,
    cg_limit_gb: float | None = None,
    cg_used_gb: float = 0,
    cpu_max: str | None = None,
) -> Path:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text(
        f"MemTotal: {int(avail_gb * 2 * 1024**2)} kB\nMemAvailable: {int(avail_gb * 1024**2)} kB\n"
    )
    (tmp_path / "proc/self/cgroup").write_text("0::/build.slice\n")
    cg = tmp_path / "sys/fs/cgroup/build.slice"
    cg.mkdir(parents=True)
    (cg / "memory.max").write_text(
        "max\n" if cg_limit_gb is None else f"{int(cg_limit_gb * GiB)}\n"
    )
    (cg / "memory.current").write_text(f"{int(cg_used_gb * GiB)}\n")
    if cpu_max:
        (cg / "cpu.max").write_text(cpu_max + "\n")
    return tmp_path


def test_jobs_limited_by_memory(tmp_path: Path) -> None:
    plan = cgroups.plan_jobs(5.0, root=fake_root(tmp_path, avail_gb=22), cpus=64)
    assert plan.jobs == 4  # floor(22 / 5)
    assert "floor(22.0 GiB usable" in plan.reason and "= 4" in plan.reason


def test_jobs_respect_cgroup_v2_limit(tmp_path: Path) -> None:
    root = fake_root(tmp_path, avail_gb=500, cg_limit_gb=16, cg_used_gb=1)
    plan = cgroups.plan_jobs(5.0, root=root, cpus=64)
    assert plan.jobs == 3  # floor((16 - 1) / 5), not 100 from the host's 500 GB
    assert "cgroup v2 memory.max 16.0 GiB at /build.slice" in plan.reason


def test_jobs_limited_by_cpus_and_cpu_quota(tmp_path: Path) -> None:
    assert cgroups.plan_jobs(0.5, root=fake_root(tmp_path, avail_gb=64), cpus=8).jobs == 8
    root = fake_root(tmp_path / "q", avail_gb=64, cpu_max="300000 100000")
    assert cgroups.usable_cpus(root) <= 3


def test_jobs_never_zero_and_override(tmp_path: Path) -> None:
    root = fake_root(tmp_path, avail_gb=1)
    assert cgroups.plan_jobs(5.0, root=root, cpus=4).jobs == 1
    over = cgroups.plan_jobs(5.0, override=7, root=root, cpus=4)
    assert over.jobs == 7 and "--jobs" in over.reason
