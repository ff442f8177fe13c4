"""Slurm overhead per cell of the nightly's Slurm executor: submit -> start and end -> collected.

Starts one of the tests' private Slurm clusters (needs root and Debian's slurmctld/slurmd/
slurm-client): with ``--nodes 1`` slurmctld + slurmd on 127.0.0.1; with ``--nodes 2`` slurmctld
and two slurmd nodes, each in its own network namespace on a private bridge
(``slurm_cluster.nodes()``), the cells built on node ``rbcpu`` and validated on node ``rbgpu``
(``gpu_partition``: a second array, each task after its build task). Then runs --rounds
nightlies of --cells trivial cells (1 CPU each; `python -c` that notes its own start and end
and writes a result.json) through ``SlurmExecutor.run`` with its default poll interval (--poll).
Two views of the same runs, per step (build; validate with two nodes):
  * Slurm's clock (what the executor records in slurm.json; 1-second steps): StartTime - the
    submission, the collection - EndTime
  * the tasks' own clock (sub-second): the task's first instruction - the submission (includes
    the queue wait when there are more cells than CPUs, and Python's start), the collection -
    the task's last instruction

    PYTHONPATH=src python benchmarks/bench_slurm.py [--nodes 1|2] [--cells 4] [--rounds 3]
                                [--poll 2] [--grid 1x5:2 4x3:0.5 ...] [--json out.json]

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
import json, os, sys, time
t0 = time.time()
cell, result, times = sys.argv[1:4]
step = sys.argv[-1] if sys.argv[-2] == "--step" else "build"
done = {"cell": cell, "status": "success", "end": "completed"}
if step == "validate":  # the second array's task: its own result and clock beside the cell's
    result = os.path.join(os.path.dirname(result), "validate.json")
    times = times.replace(".json", "-validate.json")
    done["validation"] = "passed"
elif step == "build" and len(sys.argv) > 4:
    done["validation"] = "pending"
open(result, "w").write(json.dumps(done))
open(times, "w").write(json.dumps([t0, time.time()]))
"""

STEPS = ("build", "validate")


def one(tmp: Path, cells: int, rounds: int, poll: float,
        two: bool) -> list[dict[str, float | int | str]]:
    """``rounds`` nightlies of ``cells`` trivial cells; medians over all cells of all rounds,
    one row per step (``two``: build on rbcpu, validate on rbgpu)."""
    slurm_start: dict[str, list[float]] = {s: [] for s in STEPS}
    slurm_collect: dict[str, list[float]] = {s: [] for s in STEPS}
    own_start: dict[str, list[float]] = {s: [] for s in STEPS}
    own_collect: dict[str, list[float]] = {s: [] for s in STEPS}
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
        settings = (SlurmSettings(partition="cpu", gpu_partition="gpu",
                                  gpu_mem_bytes=64 << 20, poll_s=poll) if two
                    else SlurmSettings(poll_s=poll))
        ex = SlurmExecutor(settings, run_dir)
        t0 = time.perf_counter()
        outcomes = ex.run(tasks)
        walls.append(time.perf_counter() - t0)
        assert all(o.status.value == "success" for o in outcomes), outcomes
        data = json.loads((run_dir / "slurm.json").read_text())
        for t in ex.timings:
            assert t.submit_to_start_s is not None and t.end_to_collected_s is not None, t
            slurm_start[t.step].append(t.submit_to_start_s)
            slurm_collect[t.step].append(t.end_to_collected_s)
        for i in range(cells):
            for step in STEPS[:2 if two else 1]:
                name = "times.json" if step == "build" else "times-validate.json"
                start, end = json.loads((run_dir / f"cells/c{i}/{name}").read_text())
                own_start[step].append(start - data["submitted"])
                own_collect[step].append(data["collected"] - end)
    med = statistics.median
    return [{
        "step": step, "nodes": 2 if two else 1,
        "submit_to_start_slurm_s": med(slurm_start[step]),
        "end_to_collected_slurm_s": med(slurm_collect[step]),
        "submit_to_start_task_s": med(own_start[step]),
        "end_to_collected_task_s": med(own_collect[step]),
        "submit_to_start_task_max_s": max(own_start[step]), "run_wall_s": med(walls),
        "cells": cells, "rounds": rounds, "poll_s": poll,
    } for step in STEPS[:2 if two else 1]]


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
    ap.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                    help="1: one node on 127.0.0.1; 2: build and validate nodes in network "
                         "namespaces (default 1)")
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
    two = args.nodes == 2
    results: list[dict[str, float | int | str]] = []
    with (slurm_cluster.nodes() if two else slurm_cluster.cluster()) as c:
        tmp = Path(tempfile.mkdtemp(dir=c.shared)) if c.shared else Path(tempfile.mkdtemp())
        os.environ["SLURM_CONF"] = str(c.conf)
        print(f"cluster idle {c.started_s:.2f}s after slurmctld started", file=sys.stderr)
        for cells, rounds, poll in configs:
            for row in one(tmp, cells, rounds, poll, two):
                for k, v in row.items():
                    print(f"{k:30} {v:.3f}" if isinstance(v, float) else f"{k:30} {v}",
                          file=sys.stderr)
                results.append(row)
    where = ("the tests' private Slurm of two nodes in network namespaces (slurmctld, `rbcpu` "
             "builds, `rbgpu` validates: a second array, each task after its build task)"
             if two else "the tests' private single-node Slurm (127.0.0.1)")
    print(f"Each cell is a 1-CPU `python -c` that writes its result.json, run through "
          f"`SlurmExecutor.run` on {where}; medians over all cells of all rounds. The cluster "
          f"was idle {c.started_s:.2f} s after slurmctld started.")
    print()
    print("| cells x rounds, poll | step | submit -> start (Slurm clock / task's own clock) "
          "| end -> collected (Slurm clock / task's clock) | run() wall |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['cells']} x {r['rounds']}, {r['poll_s']:g} s | {r['step']} "
              f"| {r['submit_to_start_slurm_s']:.1f} s / {r['submit_to_start_task_s']:.1f} s "
              f"(max {r['submit_to_start_task_max_s']:.1f} s) "
              f"| {r['end_to_collected_slurm_s']:.1f} s / {r['end_to_collected_task_s']:.1f} s "
              f"| {r['run_wall_s']:.1f} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
