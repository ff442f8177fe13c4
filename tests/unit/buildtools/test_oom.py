"""OOM detection and the retry's job count (rocmbuild.buildtools.oom), the build stage's decision
after a kill, and the resource preflight's checks (rocmbuild.buildtools.preflight), on values and
fixture trees.
The real kills run in tests/integration/test_oom_retry.py (a memory cgroup, as root); the real
small disk in tests/integration/test_preflight.py."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.buildtools import oom, preflight
from rocmbuild.core import fsutil
from rocmbuild.core.errors import BuildError, CommandFailed, ToolchainError, UsageError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.stages import build
from tests.unit.host.test_cgroups import V1_MOUNTS, V1_SELF, fake

GiB = 1024**3
HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * GiB, memory_source="MemAvailable")
NINJA_KILL = """[5/9] Building CXX object CMakeFiles/x.dir/a.cpp.o
FAILED: [code=137] CMakeFiles/x.dir/heavy_0.cpp.o
/usr/bin/c++ -o CMakeFiles/x.dir/heavy_0.cpp.o -c heavy_0.cpp
Killed
ninja: build stopped: subcommand failed.
"""


def ck(archs: str = "gfx942", host: Host = HOST) -> Plan:
    return render(load(find_recipe("flash-attn")).on_line("2.8-fork"), Target(arch=archs), host)


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(("output", "rc", "unit"), [
    (NINJA_KILL, 1, "CMakeFiles/x.dir/heavy_0.cpp.o"),
    ("FAILED: /t/build/temp/k.o\ng++: fatal error: Killed signal terminated program cc1plus\n",
     1, "build/temp/k.o"),
    ("FAILED: k.o\nclang++: error: unable to execute command: Killed\n", 1, "k.o"),
    ("subprocess.CalledProcessError: Command '['ninja']' died with <Signals.SIGKILL: 9>.", 1,
     ""),
    ("error: command '/usr/bin/c++' failed with exit code 137", 1, ""),
    ("RuntimeError: Error compiling objects for extension\n", 137, ""),
])
def test_a_killed_compiler_is_an_oom_kill(output: str, rc: int, unit: str) -> None:
    killed = oom.detect(output, rc, 0, 0, Path("/t"))
    assert killed is not None and killed.unit == unit


def test_the_cgroup_counter_alone_is_enough_and_other_failures_are_not_oom() -> None:
    plain = "FAILED: k.o\nk.cpp:1:1: error: expected ';'\nninja: build stopped\n"
    assert oom.detect(plain, 1, 3, 3) is None
    killed = oom.detect(plain, 1, 3, 4)
    assert killed is not None and killed.unit == "k.o"
    assert "oom_kill counter rose by 1" in killed.evidence
    assert oom.detect("exit code 1370; Killedness", 1, 0, 0) is None


def test_oom_kill_counter_of_the_own_cgroup_only(tmp_path: Path) -> None:
    """The own cgroup's counter counts this process tree's kills whatever limit was hit; the
    parents' (v2: a sibling's kills too; v1: the parent's own tasks) are left out."""
    base = "sys/fs/cgroup/memory"
    root = fake(tmp_path, {
        f"{base}/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 5",
        f"{base}/slurm/uid_0/job_12/memory.oom_control": "oom_kill_disable 0\noom_kill 2",
        f"{base}/slurm/uid_0/job_12/step_0/memory.oom_control": "oom_kill 1",
    }, mounts=V1_MOUNTS, self_cgroup=V1_SELF)
    assert oom.oom_kills(root) == 1  # step_0's
    v2 = fake(tmp_path / "v2", {"sys/fs/cgroup/a/memory.events": "oom 1\noom_kill 3\n",
                                "sys/fs/cgroup/memory.events": "oom_kill 4"},
              mounts="30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
              self_cgroup="0::/a\n")
    assert oom.oom_kills(v2) == 3  # /a's, not the root's 4
    assert oom.oom_kills(tmp_path / "nothing") == 0


def test_the_retry_halves_every_job_setting() -> None:
    env = {"MAX_JOBS": "8", "NINJA_JOBS": "8", "OTHER": "8", "CMAKE_BUILD_PARALLEL_LEVEL": "8"}
    assert oom.env_with_jobs(env, 8, 4) == {"MAX_JOBS": "4", "NINJA_JOBS": "4", "OTHER": "8",
                                            "CMAKE_BUILD_PARALLEL_LEVEL": "4"}
    assert oom.env_with_jobs({}, 8, 4) == {"MAX_JOBS": "4", "CMAKE_BUILD_PARALLEL_LEVEL": "4"}
    assert oom.argv_with_jobs(["ninja", "-j8", "-j", "8", "--parallel", "8", "--parallel=8",
                               "-k", "8"], 8, 4) == \
        ["ninja", "-j4", "-j", "4", "--parallel", "4", "--parallel=4", "-k", "8"]
    assert [oom.half(n) for n in (1, 2, 3, 8)] == [1, 1, 1, 4]


def test_a_second_kill_or_one_job_is_a_build_error_with_the_fix(tmp_path: Path) -> None:
    plan = ck()
    killed = oom.OomKill("k.o", "the build said 'Killed'")
    exc = CommandFailed("pip exited with code 1", detail="  Killed")
    note = build._oom_retry(plan, 8, killed, "", tmp_path / "build.log", exc)
    assert note == "OOM-killed at MAX_JOBS 8 (unit k.o); retried at 4"
    with pytest.raises(BuildError) as err:
        build._oom_retry(plan, 4, killed, note, tmp_path / "build.log", exc)
    assert err.value.message == ("flash-attn (ck): a compile was OOM-killed again, on the "
                                 "retry, at MAX_JOBS 4 (unit k.o); the build said 'Killed'")
    assert err.value.hint is not None and "lower --jobs" in err.value.hint
    assert "mem_per_job_gb in flash-attn.toml (now 1.5 GiB per job)" in err.value.hint
    with pytest.raises(BuildError, match="OOM-killed at MAX_JOBS 1 "):
        build._oom_retry(plan, 1, killed, "", tmp_path / "build.log", exc)


# --------------------------------------------------------------------------- preflight


def test_disk_need_is_the_learned_tree_else_the_recipe(tmp_path: Path) -> None:
    plan = ck()  # build.disk_gb = 30
    where = Path("/w")
    assert preflight.disk_problem(plan, where, 31 * GiB, None, 0) is None
    p = preflight.disk_problem(plan, where, 20 * GiB, None, 0)
    assert p is not None and p.error is ToolchainError
    assert p.message == ("flash-attn (ck): 20.0 GiB free at /w, the build needs ~30.0 GiB "
                         "(build.disk_gb = 30 in flash-attn.toml; no build of it measured here "
                         "yet)")
    assert "--workdir" in p.hint
    assert preflight.disk_problem(plan, where, 20 * GiB, 10 * GiB, 0) is None  # 12 GiB needed
    p = preflight.disk_problem(plan, where, 11 * GiB, 10 * GiB, 0)
    assert p is not None and "the last build's tree took 10.0 GiB, +20%" in p.message
    assert preflight.disk_problem(plan, where, 11 * GiB, 10 * GiB, 2 * GiB) is None  # replaced


def test_learned_disk_round_trip_and_untrusted_files(tmp_path: Path) -> None:
    plan = ck()
    assert preflight.learned_disk(tmp_path, plan) is None
    preflight.record_disk(tmp_path, plan, 12345)
    assert preflight.learned_disk(tmp_path, plan) == 12345
    f = preflight.learned_file(tmp_path, plan)
    for bad in ("[1]", '{"tree_bytes": "1"}', '{"tree_bytes": -5}', '{"tree_bytes": true}',
                "not json"):
        f.write_text(bad)
        assert preflight.learned_disk(tmp_path, plan) is None
    (tmp_path / "t/sub").mkdir(parents=True)
    (tmp_path / "t/sub/f").write_bytes(b"x" * 10000)
    (tmp_path / "t/link").symlink_to("/usr")
    # the blocks of the directory, the file and the link itself: /usr behind the link not counted
    want = sum(os.lstat(tmp_path / "t" / n).st_blocks * 512 for n in ("sub", "sub/f", "link"))
    assert fsutil.disk_bytes(tmp_path / "t") == want
    assert fsutil.disk_bytes(tmp_path / "absent") == 0


def test_memory_for_one_job() -> None:
    assert preflight.memory_problem(ck(), HOST) is None
    small = replace(HOST, memory_bytes=GiB,
                    memory_source="cgroup v1 memory.limit_in_bytes 1.0 GiB at /x minus use")
    p = preflight.memory_problem(ck(host=small), small)
    assert p is not None and p.message == (
        "flash-attn (ck): 1.0 GiB usable (cgroup v1 memory.limit_in_bytes 1.0 GiB at /x minus "
        "use), one compile job needs 1.5 GiB (mem_per_job_gb in flash-attn.toml)")


def test_compile_cache_dir_must_be_writable(tmp_path: Path) -> None:
    assert preflight.cache_dir_problem("CCACHE_DIR", str(tmp_path / "new/ccache")) is None
    assert (tmp_path / "new/ccache").is_dir()
    (tmp_path / "afile").write_text("")
    p = preflight.cache_dir_problem("SCCACHE_DIR", str(tmp_path / "afile"))
    assert p is not None and p.message.startswith(f"SCCACHE_DIR={tmp_path / 'afile'}: the "
                                                  "compile cache directory cannot be written")


def test_link_line_against_arg_max() -> None:
    tree = Path("/work/build/src/flash-attn/0123456789abcdef")
    assert ck().link_units_per_arch == 930
    two_mib = 2 * 1024 * 1024
    p, note = preflight.argv_problem(ck("gfx90a,gfx942,gfx950"), tree, two_mib, 4096)
    assert p is None and "link_units_per_arch = 930 in flash-attn.toml: the final link names " \
        "~2790 objects (930 per arch x 3 archs" in note
    plan = ck("gfx90a,gfx942,gfx950")  # under a 1 MiB stack limit (ARG_MAX = stack / 4)
    p, _ = preflight.argv_problem(plan, tree, 256 * 1024, 4096)
    assert p is not None and p.error is UsageError
    assert "over this host's ARG_MAX of 256 KiB" in p.message
    assert "Argument list too long" in p.message
    assert "build at most 1 arch(es) per wheel (--arch" in p.hint and "ulimit -s" in p.hint
    p, _ = preflight.argv_problem(plan, tree, 64 * 1024, 4096)
    assert p is not None and p.hint.startswith("compile fewer kernels")
    p, note = preflight.argv_problem(ck("gfx942"), tree, two_mib, 4096)
    assert p is None and "MAX_ARG_STRLEN (128 KiB)" in note
    assert preflight.argv_problem(replace(plan, link_units_per_arch=None), tree, 1, 0) == \
        (None, "")


def test_problems_run_every_check_in_well_under_a_second(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    start = time.monotonic()
    found, _ = preflight.problems(ck(), HOST, tmp_path / "src", tmp_path / "cache",
                                  env={"CCACHE_DIR": str(tmp_path / "afile/x")}, arg_max=1024)
    assert time.monotonic() - start < 5
    assert [p.error for p in found][-2:] == [ToolchainError, UsageError]
    assert found[-2].message.startswith("CCACHE_DIR=")
