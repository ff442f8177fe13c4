"""The Slurm executor against a real single-node Slurm (slurmctld + slurmd from Debian's
slurm-wlm, started once per session by ``slurm_cluster``): arrays submitted with sbatch, waited
for with squeue, collected with scontrol, a task cancelled with scancel while it runs, pending
tasks cancelled as one range record. The tasks are small ``python -c`` programs that write a
result.json as the nightly's cell command does (that command is wired by the controller); no
part of Slurm is faked."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import CommandFailed, UsageError
from rocmbuild.nightly.model import End, Task
from rocmbuild.nightly.slurm.executor import SlurmExecutor
from rocmbuild.nightly.slurm.settings import SlurmSettings
from rocmbuild.nightly.slurm.status import jobcomp_records
from rocmbuild.nightly.slurm.submission import SLURM_JSON
from tests.integration import slurm_cluster

SECRET = "ROCMBUILD_TEST_SLURM_TOKEN"
SECRET_VALUE = "s3cr3t-value"

WRITE_RESULT = """
import hashlib, json, os, sys
cell, result, token, digest = sys.argv[1:5]
print("cell", cell, "on", os.uname().nodename, flush=True)
ok = hashlib.sha256(os.environ.get(token, "").encode()).hexdigest() == digest
open(result, "w").write(json.dumps({"cell": cell, "status": "success", "end": "completed",
    "reason": "token passed" if ok else "token missing", "duration_s": 0.1,
    "wheel": "x-1.0-py3-none-any.whl", "wheel_size": 10}))
"""


@pytest.fixture(scope="module")
def slurm() -> Iterator[slurm_cluster.Cluster]:
    """One cluster per session in effect: this module is its only user. (A session-scoped
    fixture would be torn down in whichever test runs last, maybe a unit test, whose guard
    forbids processes.)"""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET, SECRET_VALUE)  # the tasks must get it through --export=ALL
        yield from slurm_cluster.serve(slurm_cluster.cluster)


def task(run_dir: Path, cell: str, code: str, *args: str, cpus: int = 1) -> Task:
    d = run_dir / "cells" / cell
    return Task(cell, (sys.executable, "-c", code, *args), d / "result.json", d / "log.txt",
                cpus=cpus, mem_bytes=64 << 20, time_s=600)


def ok_task(run_dir: Path, cell: str, cpus: int = 1) -> Task:
    d = run_dir / "cells" / cell
    return task(run_dir, cell, WRITE_RESULT, cell, str(d / "result.json"), SECRET,
                hashlib.sha256(SECRET_VALUE.encode()).hexdigest(), cpus=cpus)


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not after {timeout}s")
        time.sleep(0.1)


def test_no_wait_then_collect_ok_failed_cancelled(slurm: slurm_cluster.Cluster,
                                                  tmp_path: Path) -> None:
    """Three cells in one array: one succeeds, one exits 1, one is cancelled with scancel
    while it runs; submitted, then collected by a second executor as `--collect` does."""
    run_dir = tmp_path / "run"
    settings = SlurmSettings(poll_s=0.2, shared_dir=tmp_path)
    tasks = [ok_task(run_dir, "ok"),
             task(run_dir, "fails", "print('about to fail', flush=True); raise SystemExit(1)"),
             task(run_dir, "sleeps", "import time; print('sleeping', flush=True); "
                                     "time.sleep(300)")]
    sub = SlurmExecutor(settings, run_dir).submit(tasks)
    assert len(sub.jobs) == 1 and sub.jobs[0].cells == ("ok", "fails", "sleeps")
    job = sub.jobs[0].job_id
    script = (run_dir / sub.jobs[0].script).read_text()
    saved = (run_dir / SLURM_JSON).read_text()
    assert SECRET_VALUE not in script + saved  # the environment goes with --export, not in files
    assert json.loads(saved)["cells"][2] == {
        "cell": "sleeps", "job_id": job, "task": 2, "result": "cells/sleeps/result.json",
        "log": "cells/sleeps/log.txt"}

    sleeps_log = run_dir / "cells/sleeps/log.txt"
    wait_for("the sleeping task runs", lambda: sleeps_log.is_file()
             and "sleeping" in sleeps_log.read_text())
    with pytest.raises(UsageError, match=rf"task {job}_2 \(cell sleeps\) is RUNNING"):
        SlurmExecutor(settings, run_dir).collect(run_dir, wait=False)
    slurm.sh("scancel", f"{job}_2")

    later = SlurmExecutor(settings, tmp_path / "elsewhere")
    by = {o.cell_id: o for o in later.collect(run_dir)}
    assert list(by) == ["ok", "fails", "sleeps"]
    ok, fails, sleeps = by["ok"], by["fails"], by["sleeps"]
    assert (ok.status, ok.end, ok.exit_code) == (Status.SUCCESS, End.COMPLETED, 0)
    assert ok.reason == "token passed" and ok.wheel == "x-1.0-py3-none-any.whl"
    assert (fails.status, fails.end, fails.exit_code) == (Status.FAILED, End.FAILED, 1)
    assert f"Slurm task {job}_1 failed" in fails.reason and "exit code 1" in fails.reason
    assert (sleeps.status, sleeps.end) == (Status.FAILED, End.CANCELLED)
    assert "cancelled while running" in sleeps.reason, sleeps.reason
    for o in (ok, fails, sleeps):
        assert o.log == f"cells/{o.cell_id}/log.txt"
    assert "cell ok on" in (run_dir / ok.log).read_text()
    assert "about to fail" in (run_dir / fails.log).read_text()

    data = json.loads((run_dir / SLURM_JSON).read_text())
    states = {t["cell"]: t["state"] for t in data["tasks"]}
    assert states == {"ok": "COMPLETED", "fails": "FAILED", "sleeps": "CANCELLED"}
    for t in data["tasks"]:
        assert t["submit_to_start_s"] is not None and t["end_to_collected_s"] is not None
    assert [t.cell_id for t in later.timings] == ["ok", "fails", "sleeps"]
    # After MinJobAge slurmctld forgets the job; the jobcomp file still has every task.
    # (It writes a cancelled task's line before the signal is known: ExitCode=0:0.)
    from_file = {r.task_index: (r.state, r.exit_code, r.start is not None)
                 for r in jobcomp_records(job)}
    assert from_file == {0: ("COMPLETED", 0, True), 1: ("FAILED", 1, True),
                         2: ("CANCELLED", 0, True)}


def test_run_two_shapes_and_untrusted_results(slurm: slurm_cluster.Cluster,
                                              tmp_path: Path) -> None:
    """run() submits one array per resource shape (1 and 2 CPUs), waits and collects; a task
    that writes another cell's result.json, or none, is failed with the reason."""
    run_dir = tmp_path / "run"
    liar = ("import json, sys; open(sys.argv[1], 'w').write(json.dumps("
            "{'cell': 'ok1', 'status': 'success', 'end': 'completed'}))")
    tasks = [ok_task(run_dir, "ok1"),
             task(run_dir, "liar", liar, str(run_dir / "cells/liar/result.json")),
             ok_task(run_dir, "ok2", cpus=2),
             task(run_dir, "silent", "pass", cpus=2)]
    ex = SlurmExecutor(SlurmSettings(poll_s=0.2), run_dir)
    by = {o.cell_id: o for o in ex.run(tasks)}
    assert list(by) == ["ok1", "liar", "ok2", "silent"]
    assert by["ok1"].status == by["ok2"].status == Status.SUCCESS
    assert (by["liar"].status, by["liar"].end) == (Status.FAILED, End.FAILED)
    assert "result.json is for cell 'ok1', not liar" in by["liar"].reason
    assert "exited 0 but no result.json" in by["silent"].reason
    data = json.loads((run_dir / SLURM_JSON).read_text())
    assert [(j["cells"], j["cpus"], j["mem_mb"]) for j in data["jobs"]] == [
        (["ok1", "liar"], 1, 64), (["ok2", "silent"], 2, 64)]
    script = (run_dir / data["jobs"][1]["script"]).read_text()
    assert "--cpus-per-task" not in script and "  1)  # silent" in script


def test_pending_tasks_cancelled_as_one_range(slurm: slurm_cluster.Cluster,
                                              tmp_path: Path) -> None:
    """Tasks cancelled before they start share one scontrol record (ArrayTaskId=0-2): each
    cell still gets its own CANCELLED outcome. extra_args reach sbatch (--begin holds them)."""
    run_dir = tmp_path / "run"
    settings = SlurmSettings(poll_s=0.2, extra_args=("--begin=now+3600",))
    ex = SlurmExecutor(settings, run_dir)
    sub = ex.submit([ok_task(run_dir, f"c{i}") for i in range(3)])
    job = sub.jobs[0].job_id
    assert "0-2" in slurm.sh("scontrol", "-o", "show", "job", job)
    slurm.sh("scancel", job)
    outcomes = ex.collect(run_dir)
    assert [(o.cell_id, o.end) for o in outcomes] == [(f"c{i}", End.CANCELLED) for i in range(3)]
    assert all("cancelled before it started" in o.reason for o in outcomes)
    assert [t.submit_to_start_s for t in ex.timings] == [None] * 3



def test_sbatch_refusal_is_one_line(slurm: slurm_cluster.Cluster, tmp_path: Path) -> None:
    """A GPU cell on a cluster without GPUs: the CPU array goes in first, then sbatch
    refuses the GPU one; its own reason in one line with a hint, the CPU array is taken back
    (scancel) and no slurm.json is written."""
    run_dir = tmp_path / "run"
    gpu = ok_task(run_dir, "gpu")
    gpu = Task(gpu.cell_id, gpu.argv, gpu.result, gpu.log, 1, gpu.mem_bytes, gpus=1)
    ex = SlurmExecutor(SlurmSettings(gpu_partition="debug", job_name="refused"), run_dir)
    with pytest.raises(CommandFailed) as info:
        ex.submit([ok_task(run_dir, "cpu"), gpu])
    assert info.value.message.startswith("sbatch exited with code 1")
    assert "Invalid generic resource (gres) specification" in info.value.message  # no GPUs
    assert "\n" not in info.value.message and "[executor]" in (info.value.hint or "")
    assert not (run_dir / SLURM_JSON).exists()
    states = slurm.sh("squeue", "-h", "-t", "all", "-n", "refused", "-o", "%T").split()
    assert states and set(states) == {"CANCELLED"}, states
