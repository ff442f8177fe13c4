"""benchmarks/mem_planner.py without running it: its arguments, table, verdict and docs block
(the benchmark itself builds for minutes as root; see docs/dev/benchmarks-notebook.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mem_planner",
                                                  REPO / "benchmarks/mem_planner.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mem_planner"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_arguments() -> None:
    mp = _bench()
    opts = mp.parse_args([])
    assert (opts.units, opts.limit_units, opts.limit_ram, opts.rounds, opts.unthrottled) == (
        8, 1.5, None, 3, 8)
    assert opts.fixed == (1, 2) and opts.learning_jobs is None
    assert mp.parse_args(["--limit-ram", "0.5"]).limit_ram == 0.5
    assert mp.parse_args(["--fixed", "4,8", "--learning-jobs", "4"]).fixed == (4, 8)
    for bad in (["--units", "2"], ["--rounds", "0"], ["--limit-ram", "1.5"],
                ["--limit-ram", "0.5", "--limit-units", "2"], ["--fixed", "0,2"],
                ["--fixed", "2,2"], ["--fixed", "x"], ["--learning-jobs", "0"]):
        with pytest.raises(SystemExit):
            mp.parse_args(bad)


def test_table_ratio_is_against_the_best_fixed_jobs_without_an_oom_kill() -> None:
    mp = _bench()
    rows = [mp.Row("fixed -j 1", True, 1, "set by --jobs", 0, "ok", 120.0, 8, 9.5),
            mp.Row("fixed -j 2", True, 2, "set by --jobs", 0, "ok", 60.0, 8, 9.5),
            mp.Row("unthrottled -j 8", False, 8, "set by --jobs", 3,
                   "failed (exit 6): build error: ...", 30.0, 8, 9.5),
            mp.Row("learned", False, 2, "min(2 cpus, floor(a | b))", 0, "ok", 64.0, 8, 9.5)]
    table = mp.render(rows).splitlines()
    assert table[0].startswith("| config | MAX_JOBS |") and len(table) == 6
    assert "| fixed -j 2 | 2 | set by --jobs | 0 | ok | 60.0 | 8.00 | 1.00 | 0 | 0 | 9.5 |" \
        in table
    assert "| 30.0 | - | - |" in table[4]  # a failed build has no throughput
    assert "floor(a / b)" in table[5] and table[5].endswith("| 7.50 | 0.94 | 0 | 0 | 9.5 |")
    assert mp.verdict(rows).endswith("one build each): 0 OOM kills, 94 % -> met")
    slow = [*rows[:3], mp.Row("learned", False, 1, "r", 0, "ok", 100.0, 8, 9.5)]
    assert mp.verdict(slow).endswith("60 % -> NOT met")


def test_rounds_give_medians_and_the_ratio_of_the_same_rounds() -> None:
    """The first pass picks the fixed -j the rounds repeat (-j 2 was OOM-killed and retried: not
    a candidate); the verdict divides the medians of the rounds, not the first pass's figure."""
    mp = _bench()

    def row(config: str, fixed: bool, jobs: int, wall: float, n: int, kills: int = 0,
            outcome: str = "ok") -> object:
        return mp.Row(config, fixed, jobs, "r", kills, outcome, wall, 8, 2.0, 70.0, 450.0, n)

    rows = [row("fixed -j 1", True, 1, 50.0, 0),
            row("fixed -j 2", True, 2, 40.0, 0, 2, "retried: OOM-killed at MAX_JOBS 2"),
            row("learning (recipe's guess)", False, 2, 70.0, 0, 1, "retried: ..."),
            row("fixed -j 1", True, 1, 100.0, 1), row("learned", False, 1, 110.0, 1),
            row("learned", False, 1, 90.0, 2), row("fixed -j 1", True, 1, 80.0, 2),
            row("fixed -j 1", True, 1, 96.0, 3), row("learned", False, 1, 200.0, 3)]
    assert mp.baseline(rows).config == "fixed -j 1" and mp.baseline(rows).round == 0
    table = mp.render(rows).splitlines()
    assert len(table) == 2 + 5
    # medians: fixed 96.0 s (5.00 units/min), learned 110.0 s (4.36 units/min, 0.87)
    assert table[5].startswith("| fixed -j 1 (rounds, median of 3) | 1 | r | 0 | ok | 96.0 | 5.00 "
                               "| 1.00 | 70 | 450 | 2.0 |")
    assert table[6].startswith("| learned (rounds, median of 3) | 1 | r |")
    assert "| 110.0 | 4.36 | 0.87 |" in table[6]
    assert "| 50.0 | 9.60 | 1.92 |" in table[2]  # the first pass against the rounds' median
    assert mp.verdict(rows).endswith("medians of 3 rounds): 0 OOM kills, 87 % -> NOT met")
    planned = [mp.Row("learned", False, 1, f"floor(0.8 GiB (limit at /rocmbuild-bench-{c * 8}))",
                      0, "ok", 100.0, 8, 2.0, 70.0, 450.0, n) for n, c in ((1, "a"), (2, "b"))]
    one_reason = ("| learned (rounds, median of 2) | 1 "
                  "| floor(0.8 GiB (limit at /rocmbuild-bench-*)) |")
    assert mp.render([*rows[:3], *planned]).splitlines()[-1].startswith(one_reason)
    line = mp.rounds_line(rows)
    assert line.startswith("round 1: fixed -j 1 100.0 s, learned 110.0 s (0.91); "
                           "round 2: learned 90.0 s, fixed -j 1 80.0 s (0.89)")
    killed = [*rows[:-1], row("learned", False, 1, 95.0, 3, 1, "retried: ...")]
    assert "1 OOM kills, 101 % -> NOT met" in mp.verdict(killed)


def test_docs_block_is_replaced_or_appended() -> None:
    mp = _bench()
    text = mp.replace_block("# Benchmarks\n", "one\n")
    assert text == "# Benchmarks\n\n<!-- bench:mem_planner -->\none\n<!-- /bench:mem_planner -->\n"
    again = mp.replace_block(text + "after\n", "two")
    assert again.count("bench:mem_planner -->") == 2 and "two" in again and "one" not in again
    assert again.endswith("<!-- /bench:mem_planner -->\nafter\n")


def test_child_env_drops_settings_but_keeps_the_hip_compiler(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mp = _bench()
    monkeypatch.setenv("ROCMBUILD_JOBS", "8")
    monkeypatch.setenv("SLURM_MEM_PER_NODE", "1000")
    monkeypatch.setenv("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
    monkeypatch.setenv("ROCMBUILD_HIP_COMPILER", "/usr/bin/g++")
    env = mp.child_env(tmp_path)
    assert env["ROCMBUILD_HIP_COMPILER"] == "/usr/bin/g++"
    assert env["ROCMBUILD_WORKDIR"] == str(tmp_path) and env["CCACHE_DISABLE"] == "1"
    assert not {"ROCMBUILD_JOBS", "SLURM_MEM_PER_NODE", "CMAKE_CXX_COMPILER_LAUNCHER"} & set(env)
