"""benchmarks/mem_planner.py without running it: its arguments, table, verdict and docs block
(the benchmark itself builds for minutes as root; see docs/benchmarks.md)."""

from __future__ import annotations

import importlib.util
import sys
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
    assert (opts.units, opts.limit_units, opts.unthrottled) == (8, 2.5, 8)
    with pytest.raises(SystemExit):
        mp.parse_args(["--units", "2"])


def test_table_ratio_is_against_the_best_fixed_jobs_without_an_oom_kill() -> None:
    mp = _bench()
    rows = [mp.Row("fixed -j 1", True, 1, "set by --jobs", 0, "ok", 120.0, 8, 9.5),
            mp.Row("fixed -j 2", True, 2, "set by --jobs", 0, "ok", 60.0, 8, 9.5),
            mp.Row("unthrottled -j 8", False, 8, "set by --jobs", 3,
                   "failed (exit 6): build error: ...", 30.0, 8, 9.5),
            mp.Row("learned", False, 2, "min(2 cpus, floor(a | b))", 0, "ok", 64.0, 8, 9.5)]
    table = mp.render(rows).splitlines()
    assert table[0].startswith("| config | MAX_JOBS |") and len(table) == 6
    assert "| fixed -j 2 | 2 | set by --jobs | 0 | ok | 60.0 | 8.00 | 1.00 | 0 | 9.5 |" in table
    assert "| 30.0 | - | - |" in table[4]  # a failed build has no throughput
    assert "floor(a / b)" in table[5] and table[5].endswith("| 7.50 | 0.94 | 0 | 9.5 |")
    assert mp.verdict(rows).endswith("0 OOM kills, 94 % -> met")
    slow = [*rows[:3], mp.Row("learned", False, 1, "r", 0, "ok", 100.0, 8, 9.5)]
    assert mp.verdict(slow).endswith("60 % -> NOT met")


def test_docs_block_is_replaced_or_appended() -> None:
    mp = _bench()
    text = mp.replace_block("# Benchmarks\n", "one\n")
    assert text == "# Benchmarks\n\n<!-- bench:mem_planner -->\none\n<!-- /bench:mem_planner -->\n"
    again = mp.replace_block(text + "after\n", "two")
    assert again.count("bench:mem_planner -->") == 2 and "two" in again and "one" not in again
    assert again.endswith("<!-- /bench:mem_planner -->\nafter\n")
