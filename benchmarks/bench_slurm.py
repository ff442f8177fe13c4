"""Slurm overhead per cell of the nightly's Slurm executor: submit -> start and end -> collected.

Starts the tests' private single-node Slurm (slurmctld + slurmd on 127.0.0.1, needs root and
Debian's slurmctld/slurmd/slurm-client), then runs --rounds nightlies of --cells trivial cells
(1 CPU each; `python -c` that notes its own start and end and writes a result.json) through
``SlurmExecutor.run`` with its default poll interval (--poll). Two views of the same runs:
  * Slurm's clock (what the executor records in slurm.json; 1-second steps): StartTime - the
    submission, the collection - EndTime
  * the tasks' own clock (sub-second): the task's first instruction - the submission (includes
    the queue wait when there are more cells than CPUs, and Python's start), the collection -
    the task's last instruction

    PYTHONPATH=src python benchmarks/bench_slurm.py [--cells 4] [--rounds 3] [--poll 2]
                                                    [--grid 1x5:2 4x3:0.5 ...] [--json out.json]

Prints a Markdown table on stdout (one row per configuration), progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rocmbuild.nightly.model import Task  # noqa: E402
from rocmbuild.nightly.slurm.executor import SlurmExecutor  # noqa: E402
from rocmbuild.nightly.slurm.settings import SlurmSettings  # noqa: E402
from tests.integration import slurm_cluster  # noqa: E402

CELL = """
import json, sys, time
t0 = time.time()
cell, result, times = sys.argv[1:4]
open(result, "w").write(json.dumps({"cell": cell, "status": "success", "end": "completed"}))
open(times, "w").write(json.dumps([t0, time.time()]))
"""


def one(tmp: Path, cells: int, rounds: int, poll: float) -> dict[str, float | int]:
    """``rounds`` nightlies of ``cells`` trivial cells; medians over all cells of all rounds."""
    slurm_start: list[float] = []
    slurm_collect: list[float] = []
    own_start: list[float] = []
    own_collect: list[float] = []
    walls: list[float] = []
    for r in range(rounds):
        run_dir = tmp / f"{cells}x{rounds}@{poll}" / f"run{r}"
        tasks = []
        for i in range(cells):
            d = run_dir / "cells" / f"c{i}"
            tasks.append(Task(f"c{i}", (sys.executable, "-c", CELL, f"c{i}",
                                        str(d / "result.json"), str(d / "times.json")),
                              d / "result.json", d / "log.txt", cpus=1,
                              mem_bytes=64 << 20, time_s=600))
        ex = SlurmExecutor(SlurmSettings(poll_s=poll), run_dir)
        t0 = time.perf_counter()
        outcomes = ex.run(tasks)
        walls.append(time.perf_counter() - t0)
        assert all(o.status.value == "success" for o in outcomes), outcomes
        data = json.loads((run_dir / "slurm.json").read_text())
        for t in ex.timings:
            assert t.submit_to_start_s is not None and t.end_to_collected_s is not None
            slurm_start.append(t.submit_to_start_s)
            slurm_collect.append(t.end_to_collected_s)
        for i in range(cells):
            start, end = json.loads((run_dir / f"cells/c{i}/times.json").read_text())
            own_start.append(start - data["submitted"])
            own_collect.append(data["collected"] - end)
    med = statistics.median
    return {
        "submit_to_start_slurm_s": med(slurm_start), "end_to_collected_slurm_s": med(slurm_collect),
        "submit_to_start_task_s": med(own_start), "end_to_collected_task_s": med(own_collect),
        "submit_to_start_task_max_s": max(own_start), "run_wall_s": med(walls),
        "cells": cells, "rounds": rounds, "poll_s": poll,
    }


def grid(text: str) -> tuple[int, int, float]:
    """``CELLSxROUNDS:POLL`` (e.g. ``4x3:0.5``)."""
    shape, _, poll = text.partition(":")
    cells, _, rounds = shape.partition("x")
    try:
        return int(cells), int(rounds), float(poll or SlurmSettings.poll_s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not CELLSxROUNDS:POLL") from None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--poll", type=float, default=SlurmSettings.poll_s,
                    help="the executor's squeue poll interval (default: the product's)")
    ap.add_argument("--grid", nargs="+", type=grid, metavar="CELLSxROUNDS:POLL",
                    help="several configurations, one table row each (instead of --cells, "
                         "--rounds, --poll)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if reason := slurm_cluster.why_not():
        print(f"skipped: {reason}")
        return 77  # benchmarks/run.py: cannot run on this machine
    configs = args.grid or [(args.cells, args.rounds, args.poll)]
    results = []
    with slurm_cluster.cluster() as c, tempfile.TemporaryDirectory() as tmp:
        os.environ["SLURM_CONF"] = str(c.conf)
        print(f"cluster idle {c.started_s:.2f}s after slurmctld started", file=sys.stderr)
        for cells, rounds, poll in configs:
            rows = one(Path(tmp), cells, rounds, poll)
            for k, v in rows.items():
                print(f"{k:30} {v:.3f}" if isinstance(v, float) else f"{k:30} {v}",
                      file=sys.stderr)
            results.append(rows)
    print("Each cell is a 1-CPU `python -c` that writes its result.json, run through "
          "`SlurmExecutor.run` on the tests' private single-node Slurm (127.0.0.1); medians "
          f"over all cells of all rounds. The cluster was idle {c.started_s:.2f} s after "
          "slurmctld started.")
    print()
    print("| cells x rounds, poll | submit -> start (Slurm clock / task's own clock) "
          "| end -> collected (Slurm clock / task's clock) | run() wall |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['cells']} x {r['rounds']}, {r['poll_s']:g} s "
              f"| {r['submit_to_start_slurm_s']:.1f} s / {r['submit_to_start_task_s']:.1f} s "
              f"(max {r['submit_to_start_task_max_s']:.1f} s) "
              f"| {r['end_to_collected_slurm_s']:.1f} s / {r['end_to_collected_task_s']:.1f} s "
              f"| {r['run_wall_s']:.1f} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(results if args.grid else results[0], indent=1)
                                   + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
