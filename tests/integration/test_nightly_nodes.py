"""The nightly on a Slurm cluster of more than one node, for real: slurmctld and two slurmd nodes
of Debian's slurm-wlm, each in its own network namespace with its own hostname on a private
bridge (``slurm_cluster.nodes()``): ``rbcpu`` in partition ``cpu`` builds, ``rbgpu`` in partition
``gpu`` (one GPU GRES without a device: Slurm counts it, binds nothing) validates. The nodes see
one shared directory of the cluster's (a bind mount in each node's mount namespace); everything
the nightly reads and writes lives there.

One matrix ends four ways: a green cell (built on rbcpu, validated on rbgpu, promoted), a build
that fails, a build cancelled with ``scancel`` while it runs, and a build on a node that dies
(``kill -9`` of rbcpu's slurmd, the init of the node's PID namespace: the node and its tasks end
as in a power cut; Slurm marks the node DOWN and the task NODE_FAIL). Only the green cell is
promoted, and the report tells the four ends apart. No GPU here: the kernel gate is SKIPPED."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocmbuild.nightly.slurm.status import fields
from tests.integration import slurm_cluster
from tests.integration.test_nightly import _path_recipe
from tests.integration.test_nightly_pending import _recipe

GREEN = "green.default.default.gfx942"
FAILS = "fails.default.default.gfx942"
HELD = "held.default.default.gfx942"
LOST = "lost.default.default.gfx942"


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[slurm_cluster.Cluster]:
    yield from slurm_cluster.serve(slurm_cluster.nodes)


def _until(what: str, pred: Callable[[], object], timeout: float, why: Callable[[], str]) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not after {timeout:g} s: {why()}")
        time.sleep(0.3)


def test_the_nodes_are_apart_but_for_the_shared_directory(
        two_nodes: slurm_cluster.Cluster) -> None:
    """Each node has its own hostname and address; of the cluster's directory a node sees the
    shared directory (what a task writes there, the host reads) and nothing of the controller's
    state; the host reaches slurmctld over the bridge."""
    c = two_nodes
    assert c.shared is not None
    probe = (f"hostname; hostname -I; echo $(ls -A {c.dir}) $(ls -A {c.dir}/node); "
             f"echo seen > {c.shared}/from-$(hostname)")
    for part, node in (("cpu", "rbcpu"), ("gpu", "rbgpu")):
        out = c.shared / f"{node}.out"
        c.sh("sbatch", "--wait", f"--partition={part}", f"--output={out}", f"--chdir={c.shared}",
             *(["--gres=gpu:1"] if part == "gpu" else []), f"--wrap={probe}")
        name, addr, seen = out.read_text().split("\n")[:3]
        assert name == node
        assert addr.strip().startswith("10.") and addr.strip() not in c.sh("hostname", "-I")
        # neither the controller's state nor the other node's spool: the node's own and the
        # shared directory
        assert seen == f"etc node shared {node}", seen
        assert (c.shared / f"from-{node}").read_text() == "seen\n"
    assert sorted(p.name for p in c.dir.iterdir()) == ["ctl", "etc", "node", "shared"]


def _slurm_json(run_dirs: Path) -> dict:
    for p in run_dirs.glob("*/slurm.json"):
        return json.loads(p.read_text())
    return {}


def test_four_ends_on_two_nodes(two_nodes: slurm_cluster.Cluster) -> None:
    c = two_nodes
    assert c.shared is not None
    d = c.shared / "night"
    d.mkdir()
    _recipe(d, "green", "")
    _path_recipe(d, "fails", "raise SystemExit('boom: this cell fails on purpose')")
    for name in ("held", "lost"):  # builds that run until they are stopped
        _path_recipe(d, name, "import time; print('building', flush=True); time.sleep(600)")
    (d / "nightly.toml").write_text(f"""[[matrix]]
recipes = ["green.toml", "fails.toml", "held.toml", "lost.toml"]
archs = ["gfx942"]
timeout = "10m"
[publish]
index = "index"
[reports]
dir = "reports"
[executor]
kind = "slurm"
shared_dir = "{c.shared}"
partition = "cpu"
gpu_partition = "gpu"
gpu_mem = "1G"
poll = "0.3s"
""")
    env = {**c.env, "COLUMNS": "200", "PIP_NO_INDEX": "1"}
    night = subprocess.Popen([sys.executable, "-m", "rocmbuild", "nightly", "--config",
                              str(d / "nightly.toml"), "--json"], cwd=d, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def state(cell: str) -> str:
            sub = _slurm_json(d / "reports")
            task = next(f"{x['job_id']}_{x['task']}" for x in sub["cells"] if x["cell"] == cell)
            line = c.sh("scontrol", "-o", "show", "job", task, check=False)
            return fields(line).get("JobState", "")

        def states() -> str:
            return str({cell: state(cell) for cell in (GREEN, FAILS, HELD, LOST)})

        _until("the submission", lambda: _slurm_json(d / "reports"), 120,
               lambda: night.stderr.read() if night.poll() is not None else "still running")
        _until("the green and failing builds ended, the other two running",
               lambda: (state(GREEN), state(FAILS), state(HELD), state(LOST)) == (
                   "COMPLETED", "FAILED", "RUNNING", "RUNNING"), 180, states)
        held = next(f"{x['job_id']}_{x['task']}" for x in _slurm_json(d / "reports")["cells"]
                    if x["cell"] == HELD)
        c.sh("scancel", held)
        _until("the cancel", lambda: state(HELD) == "CANCELLED", 30, states)
        c.kill_node("rbcpu")  # mid-task: LOST's build is still sleeping
        out, err = night.communicate(timeout=240)
    finally:
        if night.poll() is None:
            night.kill()
            night.wait()
    assert night.returncode == 14, err[-3000:]  # failed cells
    cells = {x["cell"]: x for x in json.loads(out)["cells"]}
    green, fails, held_c, lost = (cells[k] for k in (GREEN, FAILS, HELD, LOST))
    assert (green["status"], green["end"], green["validation"], green["promoted"]) == (
        "success", "completed", "passed", True), green
    assert "validation passed on rbgpu" in green["reason"], green
    assert (fails["status"], fails["end"], fails["promoted"]) == ("failed", "failed", False)
    assert "boom" in fails["reason"] or "failed on rbcpu" in fails["reason"], fails
    assert (held_c["end"], held_c["promoted"]) == ("cancelled", False), held_c
    assert "cancelled while running on rbcpu" in held_c["reason"], held_c
    assert (lost["end"], lost["promoted"]) == ("node_fail", False), lost
    assert "node failure on rbcpu" in lost["reason"] and "NODE_FAIL" in lost["reason"], lost
    # only the green cell's wheel is in the stable stage
    stable = {f["filename"] for j in (d / "index" / "stable" / "simple").glob("*/index.json")
              for f in json.loads(j.read_text())["files"]}
    assert stable == {green["wheel"]}
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    sub = json.loads((run_dir / "slurm.json").read_text())
    # the validations of the three builds that did not complete never ran: Slurm cancelled them
    checks = {x["cell"]: f"{x['job_id']}_{x['task']}" for x in sub["validations"]}
    for cell in (FAILS, HELD, LOST):
        shown = c.sh("scontrol", "-o", "show", "job", checks[cell])
        assert fields(shown).get("JobState") == "CANCELLED", shown
        assert not (run_dir / "cells" / cell / "validate.json").exists()
    shown = c.sh("scontrol", "-o", "show", "job", checks[GREEN])
    assert "BatchHost=rbgpu" in shown and "MinMemoryNode=1G" in shown, shown
    # the per-task overhead of both steps is recorded
    timed = {(t["cell"], t["step"]): t for t in sub["tasks"]}
    assert set(timed) == {(x, s) for x in (GREEN, FAILS, HELD, LOST)
                          for s in ("build", "validate")}
    assert timed[(GREEN, "validate")]["state"] == "COMPLETED"
    assert timed[(LOST, "build")]["state"] == "NODE_FAIL"
    # the report: each end in its own row, apart
    summary = (run_dir / "summary.md").read_text()
    for cell, end in ((GREEN, "completed"), (FAILS, "failed"), (HELD, "cancelled"),
                      (LOST, "node_fail")):
        row = next(ln for ln in summary.splitlines() if ln.startswith(f"| {cell} |"))
        assert f"| {end} |" in row, row

