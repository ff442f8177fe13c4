"""The Slurm executor's pure parts: resource shapes, the batch script, Slurm's answers
(``scontrol -o show job`` lines as Slurm 22.05 printed them on the test cluster, cut to the
fields that matter; ``sacct -P`` lines in its documented format: accounting needs slurmdbd and a
database, which the test cluster does not run), the mapping of states to ends, and the checks of
the untrusted result.json and slurm.json. The real cluster runs in
tests/integration/test_slurm.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import ToolchainError, UsageError
from rocmbuild.nightly.model import CellOutcome, End, Task, Validation
from rocmbuild.nightly.slurm.executor import (
    SlurmExecutor,
    batch_script,
    validated,
    validation_task,
)
from rocmbuild.nightly.slurm.outcome import outcome, read_result
from rocmbuild.nightly.slurm.settings import SlurmSettings, settings_from_table, shape_of
from rocmbuild.nightly.slurm.status import TaskRecord, parse_sacct, parse_scontrol, task_ids
from rocmbuild.nightly.slurm.submission import SLURM_JSON, SubmittedCell, load_submission

PENDING_CANCELLED = (
    "JobId=1 ArrayJobId=1 ArrayTaskId=0-2 JobName=wrap UserId=root(0) JobState=CANCELLED "
    "Reason=None ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED "
    "SubmitTime=2026-11-30T16:02:29 StartTime=2026-11-30T16:02:29 "
    "EndTime=2026-11-30T16:02:29 AllocNode:Sid=vm:2720 NodeList= NumNodes=1 "
    "WorkDir=/work/wt-n-slurm StdOut=/dev/null Power= ")
RUNNING_CANCELLED = (
    "JobId=3 ArrayJobId=2 ArrayTaskId=0 JobName=wrap JobState=CANCELLED Reason=None "
    "ExitCode=0:15 RunTime=00:00:02 TimeLimit=UNLIMITED SubmitTime=2026-11-30T16:02:30 "
    "StartTime=2026-11-30T16:02:31 EndTime=2026-11-30T16:02:33 NodeList=vm BatchHost=vm "
    "Command=/tmp/a b/JobState=COMPLETED")
TIMED_OUT = (  # `--time=1` on the test cluster, run by hand once (90 s: too slow for CI)
    "JobId=1 ArrayJobId=1 ArrayTaskId=0 JobName=rocmbuild-nightly JobState=TIMEOUT "
    "Reason=TimeLimit ExitCode=0:15 RunTime=00:01:26 TimeLimit=00:01:00 "
    "SubmitTime=2026-11-30T16:13:53 StartTime=2026-11-30T16:13:55 EndTime=2026-11-30T16:15:21 "
    "NodeList=vm BatchHost=vm Command=/tmp/tmp7um6re71/run/slurm/array0.sh")
FAILED = RUNNING_CANCELLED.replace("JobId=3 ", "JobId=4 ").replace(
    "ArrayTaskId=0", "ArrayTaskId=1").replace("JobState=CANCELLED", "JobState=FAILED").replace(
    "ExitCode=0:15", "ExitCode=1:0")


def task(tmp: Path, cell: str, cpus: int = 2, mem: int = 3 << 30, gpus: int = 0,
         time_s: int = 3600) -> Task:
    return Task(cell, ("python", "-m", "rocmbuild", "nightly", "--cell", cell, "it's"),
                tmp / "cells" / cell / "result.json", tmp / "cells" / cell / "log.txt",
                cpus=cpus, mem_bytes=mem, gpus=gpus, time_s=time_s)


def test_shape_resources_and_partitions(tmp_path: Path) -> None:
    s = SlurmSettings(partition="cpu", gpu_partition="mi300", account="proj1",
                      max_time_s=2 * 3600)
    cpu = shape_of(task(tmp_path, "a", cpus=8, mem=(5 << 30) + 1, time_s=90), s)
    assert cpu.sbatch_args(s) == ["--cpus-per-task=8", "--time=2", "--mem=5121M",
                                  "--partition=cpu", "--account=proj1"]
    gpu = shape_of(task(tmp_path, "b", gpus=1, time_s=6 * 3600), s)
    assert gpu.sbatch_args(s) == ["--cpus-per-task=2", "--time=120", "--mem=3072M",
                                  "--gres=gpu:1", "--partition=mi300", "--account=proj1"]
    bare = shape_of(task(tmp_path, "c", cpus=0, mem=0), SlurmSettings())
    assert bare.sbatch_args(SlurmSettings()) == ["--cpus-per-task=1", "--time=60"]
    assert shape_of(task(tmp_path, "d", gpus=2), SlurmSettings(partition="p")).partition == "p"


def test_batch_script_quotes_and_maps_tasks(tmp_path: Path) -> None:
    text = batch_script([task(tmp_path, "a"), task(tmp_path, "b")])
    assert "  1)  # b\n    exec python -m rocmbuild nightly --cell b 'it'\"'\"'s' >" in text
    assert f">{tmp_path}/cells/b/log.txt 2>&1 ;;" in text
    assert text == batch_script([task(tmp_path, "a"), task(tmp_path, "b")])


@pytest.mark.parametrize(("text", "ids"), [
    ("3", [3]), ("2-3", [2, 3]), ("[0-2,5]", [0, 1, 2, 5]), ("0-3%2", [0, 1, 2, 3]),
    ("", []), ("N/A", []),
])
def test_task_ids(text: str, ids: list[int]) -> None:
    assert task_ids(text) == ids


def test_parse_scontrol_expands_ranges_and_ignores_values_with_spaces() -> None:
    recs = parse_scontrol(PENDING_CANCELLED + "\n", "1")
    assert [(r.task_index, r.state, r.start, r.node) for r in recs] == [
        (0, "CANCELLED", None, ""), (1, "CANCELLED", None, ""), (2, "CANCELLED", None, "")]
    [ran] = parse_scontrol(RUNNING_CANCELLED, "2")
    assert (ran.state, ran.exit_code, ran.signal, ran.node) == ("CANCELLED", 0, 15, "vm")
    assert ran.end is not None and ran.start is not None and ran.end - ran.start == 2
    assert parse_scontrol(RUNNING_CANCELLED, "1") == []  # another job's line


def test_a_real_timeout() -> None:
    [r] = parse_scontrol(TIMED_OUT, "1")
    o = outcome(SubmittedCell("slow", "1", 0, "cells/slow/result.json", "cells/slow/log.txt"),
                r, None, "no result.json")
    assert (o.status, o.end, o.duration_s) == (Status.FAILED, End.TIMEOUT, 86)
    assert o.reason == "Slurm task 1_0 reached its Slurm time limit (00:01:00) after 86s on vm"


def test_parse_sacct() -> None:
    text = ("7_0|COMPLETED|0:0|2026-11-30T16:00:00|2026-11-30T16:00:05|n1\n"
            "7_[2-3]|CANCELLED by 0|0:0|None|2026-11-30T16:00:06|None assigned\n"
            "7_1|TIMEOUT|0:15|2026-11-30T16:00:00|2026-11-30T17:00:00|n2\n")
    recs = {r.task_index: r for r in parse_sacct(text, "7")}
    assert sorted(recs) == [0, 1, 2, 3]
    assert recs[3].state == "CANCELLED" and recs[3].start is None
    assert (recs[1].state, recs[1].signal) == ("TIMEOUT", 15)


def rec(state: str, code: int | None = 0, sig: int | None = 0, started: bool = True,
        limit: str = "01:00:00") -> TaskRecord:
    return TaskRecord("5", 1, state, code, sig, 100.0 if started else None, 130.0,
                      "n1" if started else "", "", limit)


CELL = SubmittedCell("c1", "5", 1, "cells/c1/result.json", "cells/c1/log.txt")


@pytest.mark.parametrize(("record", "end", "words"), [
    (rec("TIMEOUT", 0, 15), End.TIMEOUT, "reached its Slurm time limit (01:00:00) after 30s"),
    (rec("NODE_FAIL"), End.NODE_FAIL, "node failure on n1"),
    (rec("OUT_OF_MEMORY", 0, 9), End.OUT_OF_MEMORY, "ran out of its --mem"),
    (rec("CANCELLED", 0, 15), End.CANCELLED, "cancelled while running on n1 after 30s"),
    (rec("CANCELLED", started=False), End.CANCELLED, "cancelled before it started"),
    (rec("FAILED", 0, 9), End.FAILED, "killed by signal 9"),
    (rec("FAILED", 3, 0), End.FAILED, "exit code 3"),
    (rec("PREEMPTED"), End.KILLED, "ended PREEMPTED"),
    (rec("COMPLETED"), End.FAILED, "exited 0 but no result.json"),
])
def test_ends_are_told_apart(record: TaskRecord, end: End, words: str) -> None:
    o = outcome(CELL, record, None, "no result.json")
    assert (o.cell_id, o.status, o.end, o.log) == ("c1", Status.FAILED, end, "cells/c1/log.txt")
    assert words in o.reason and o.reason.startswith("Slurm task 5_1"), o.reason


def test_result_json_is_checked(tmp_path: Path) -> None:
    p = tmp_path / "result.json"
    good = {"cell": "c1", "status": "success", "end": "completed", "duration_s": 3,
            "wheel": "w.whl", "wheel_size": 9, "log": "../../etc/passwd"}
    p.write_text(json.dumps(good))
    res, why = read_result(p, "c1")
    assert res is not None and why == "" and res.wheel_size == 9
    done = outcome(CELL, rec("COMPLETED"), res, why)
    assert (done.status, done.end, done.log, done.duration_s) == (
        Status.SUCCESS, End.COMPLETED, "cells/c1/log.txt", 3)  # the log is the executor's
    lied = outcome(CELL, rec("FAILED", 2), res, why)  # exit 2 after a successful result
    assert (lied.status, lied.end, lied.exit_code) == (Status.FAILED, End.FAILED, 2)
    for bad, words in [
        ({**good, "cell": "c2"}, "is for cell 'c2', not c1"),
        ({**good, "status": "great"}, "result.json: 'great' is not a valid Status"),
        ({**good, "wheel_size": "9"}, "wheel_size is not int"),
        ({**good, "wheel_size": True}, "wheel_size is not int"),
        ([1], "not a JSON object"),
    ]:
        p.write_text(json.dumps(bad))
        res, why = read_result(p, "c1")
        assert res is None and words in why, why
    p.write_text("{,}")
    assert read_result(p, "c1")[1].startswith("result.json unreadable: not valid JSON")
    p.write_text(" " * ((1 << 20) + 1))
    assert "larger than" in read_result(p, "c1")[1]
    p.unlink()
    assert read_result(p, "c1") == (None, "no result.json")
    p.symlink_to(tmp_path / "elsewhere.json")  # never followed
    assert "symbolic link" in read_result(p, "c1")[1]


def test_slurm_json_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file: this run was not submitted to Slurm"):
        load_submission(tmp_path)
    doc = {"version": 1, "submitted": 1.5,
           "jobs": [{"job_id": "12", "script": "slurm/array0.sh", "cells": ["a"], "cpus": 1,
                     "mem_mb": 0, "gpus": 0, "time_min": 5, "partition": None}],
           "cells": [{"cell": "a", "job_id": "12", "task": 0, "result": "cells/a/result.json",
                      "log": "cells/a/log.txt"}]}
    (tmp_path / SLURM_JSON).write_text(json.dumps(doc))
    assert load_submission(tmp_path).cells[0].job_id == "12"
    for path, value, words in [
        (("cells", 0, "result"), "../x", "is not inside the run directory"),
        (("cells", 0, "log"), "/etc/passwd", "is not inside the run directory"),
        (("jobs", 0, "job_id"), "12; rm", "job id '12; rm' is not a number"),
        (("cells", 0, "cell"), "../a", "cell id '../a'"),
    ]:
        broken = json.loads(json.dumps(doc))
        broken[path[0]][path[1]][path[2]] = value
        (tmp_path / SLURM_JSON).write_text(json.dumps(broken))
        with pytest.raises(UsageError, match="not a Slurm submission") as info:
            load_submission(tmp_path)
        assert words in info.value.message and "\n" not in info.value.message
    (tmp_path / SLURM_JSON).write_text("[,]")
    with pytest.raises(UsageError, match=r"\(not valid JSON"):
        load_submission(tmp_path)


def test_missing_sbatch_is_a_toolchain_error(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError) as info:
        SlurmExecutor(SlurmSettings(), tmp_path / "run").submit([task(tmp_path, "a")])
    assert info.value.message == "sbatch: command not found (the Slurm executor needs it)"
    assert info.value.hint is not None and "slurm-client" in info.value.hint


def test_bad_tasks_are_refused_before_submitting(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "sbatch"  # only found on PATH, never run: the checks come first
    fake.write_text("#!/bin/sh\nexit 99\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    run_dir = tmp_path / "run"
    ex = SlurmExecutor(SlurmSettings(shared_dir=tmp_path / "shared"), run_dir)
    with pytest.raises(UsageError, match="is not under the Slurm shared_dir"):
        ex.submit([task(run_dir, "a")])
    ex = SlurmExecutor(SlurmSettings(), run_dir)
    with pytest.raises(UsageError, match="bad or repeated cell id 'a'"):
        ex.submit([task(run_dir, "a"), task(run_dir, "a")])
    with pytest.raises(UsageError, match="is not under the run directory"):
        ex.submit([task(tmp_path / "other", "a")])


def test_executor_keys_are_the_models() -> None:
    """The [executor] keys the config accepts and the order they are checked in are the keys
    SlurmSettings declares (settings.setting), each once."""
    from rocmbuild.core import settings
    from rocmbuild.nightly.slurm.settings import _CHECKED, SETTING_KEYS

    declared = settings.keys(SlurmSettings)
    assert sorted(SETTING_KEYS) == sorted(_CHECKED) == sorted(declared)
    assert len(set(declared)) == len(declared) == 10


def test_settings_from_the_executor_table(tmp_path: Path) -> None:
    s = settings_from_table({"kind": "slurm", "partition": "cpu", "gpu_partition": "mi300x",
                             "account": "proj_1", "sbatch_args": ["--qos=normal"],
                             "time": "12h", "shared_dir": "shared", "poll": "500"},
                            "nightly.toml: executor", tmp_path)
    assert s == SlurmSettings("cpu", "mi300x", "proj_1", ("--qos=normal",), 12 * 3600,
                              tmp_path / "shared", 500.0)
    assert settings_from_table({}, "x", tmp_path) == SlurmSettings()
    g = settings_from_table({"gpu_partition": "mi300x", "gpu_gres": "gpu:mi300x:2"}, "x",
                            tmp_path)
    assert (g.gpu_partition, g.gpu_gres, g.gpu_mem_bytes) == ("mi300x", "gpu:mi300x:2", 16 << 30)
    assert settings_from_table({"gpu_partition": "g", "gpu_mem": "64G"}, "x",
                               tmp_path).gpu_mem_bytes == 64 << 30
    gpu = shape_of(task(tmp_path, "v", gpus=1), g)
    assert "--gres=gpu:mi300x:2" in gpu.sbatch_args(g) and gpu.partition == "mi300x"
    assert settings_from_table({"time": 90, "poll": "0.5s", "shared_dir": "/lustre/n"},
                               "x", tmp_path) == SlurmSettings(
        max_time_s=90, poll_s=0.5, shared_dir=Path("/lustre/n"))


@pytest.mark.parametrize(("table", "words"), [
    ({"partition": "a b"}, "nightly.toml: executor.partition: 'a b' is not a Slurm name"),
    ({"account": 3}, "nightly.toml: executor.account: '3' is not a Slurm name"),
    ({"time": "soon"}, "nightly.toml: executor.time: 'soon' is not a duration"),
    ({"time": 0}, "nightly.toml: executor.time: '0' is out of range"),
    ({"poll": True}, "nightly.toml: executor.poll: 'True' is not a duration"),
    ({"sbatch_args": "--qos=x"}, "executor.sbatch_args: must be a list of sbatch options"),
    ({"sbatch_args": ["--array=0-3"]}, "executor.sbatch_args: sbatch reads '--array=0-3' as "
     "--array, which the executor sets itself"),
    ({"shared_dir": ""}, "nightly.toml: executor.shared_dir: must be a path"),
    ({"gpu_partition": "g", "gpu_gres": "gpu:0"}, "executor.gpu_gres: 'gpu:0' is not a GRES"),
    ({"gpu_partition": "g", "gpu_gres": "gpu"}, "executor.gpu_gres: 'gpu' is not a GRES"),
    ({"gpu_partition": "g", "gpu_gres": "gpu:1,x"}, "'gpu:1,x' is not a GRES"),
    ({"gpu_partition": "g", "gpu_gres": 1}, "executor.gpu_gres: '1' is not a GRES"),
    ({"gpu_gres": "gpu:1"}, "executor.gpu_gres: is set without gpu_partition"),
    ({"gpu_mem": "8G"}, "executor.gpu_mem: is set without gpu_partition"),
    ({"gpu_partition": "g", "gpu_mem": "lots"}, "executor.gpu_mem: 'lots' is not a size"),
    ({"gpu_partition": "g", "gpu_mem": 1000}, "executor.gpu_mem: 1000 bytes is less than"),
])
def test_bad_executor_keys_are_one_line(tmp_path: Path, table: dict[str, object],
                                        words: str) -> None:
    with pytest.raises(UsageError) as info:
        settings_from_table(table, "nightly.toml: executor", tmp_path)
    assert info.value.message == words or words in info.value.message, info.value.message
    assert "\n" not in info.value.message and info.value.hint


# ----------------------------------------------------------------------------- build, then validate


def test_validation_task_is_step_two_of_the_same_command(tmp_path: Path) -> None:
    built = replace(task(tmp_path, "a", cpus=8), argv=(*task(tmp_path, "a").argv, "--step",
                                                        "build"))
    s = SlurmSettings(partition="cpu", gpu_partition="gpu")
    v = validation_task(built, s.gpu_mem_bytes)
    assert v.argv == (*task(tmp_path, "a").argv, "--step", "validate")
    assert v.result == tmp_path / "cells" / "a" / "validate.json"
    assert v.log == tmp_path / "cells" / "a" / "validate.log"
    assert (v.gpus, v.cpus, v.mem_bytes, v.time_s) == (1, 1, 16 << 30, built.time_s)
    assert shape_of(v, s).sbatch_args(s) == ["--cpus-per-task=1", "--time=60", "--mem=16384M",
                                             "--gres=gpu:1", "--partition=gpu"]


def test_validated_merges_the_validation_task(tmp_path: Path) -> None:
    """The state machine of a split cell: built (pending) + the validation task's result ->
    passed (promotable), failed (the cell fails, exit 8), or still pending (no result: the task
    was cancelled or its node failed; or the node could not validate either)."""
    built = CellOutcome("a", Status.SUCCESS, End.COMPLETED, validation=Validation.PENDING,
                        reason="built, NOT VALIDATED (pending, never promoted until it is): x",
                        exit_code=0, wheel="a-1-py3-none-any.whl")
    v = SubmittedCell("a", "7", 0, "cells/a/validate.json", "cells/a/validate.log")
    rec = TaskRecord("7", 0, "COMPLETED", 0, None, 1.0, 2.0, node="gpu1")
    ok = validated(built, v, rec, CellOutcome("a", Status.SUCCESS, End.COMPLETED,
                                              validation=Validation.PASSED,
                                              reason="validation passed on gpu1", tflops=3.5))
    assert (ok.status, ok.validation, ok.tflops) == (Status.SUCCESS, Validation.PASSED, 3.5)
    assert ok.reason == "built; validation passed on gpu1" and not ok.pending
    bad = validated(built, v, rec, CellOutcome("a", Status.FAILED, End.FAILED, exit_code=8,
                                               validation=Validation.FAILED,
                                               reason="validation failed"))
    assert (bad.status, bad.end, bad.validation, bad.exit_code) == (
        Status.FAILED, End.FAILED, Validation.FAILED, 8)
    gone = validated(built, v, replace(rec, state="CANCELLED"), None)
    assert gone.pending and gone.status is Status.SUCCESS
    assert gone.reason.startswith("built, NOT VALIDATED (pending): validation task 7_0: wrote "
                                  "no result (CANCELLED); validate it on a host that can: "
                                  "rocmbuild nightly --validate-pending"), gone.reason
    unknown = validated(built, v, None, None)
    assert "unknown to Slurm" in unknown.reason and unknown.pending
    cannot = validated(built, v, rec, CellOutcome("a", Status.FAILED, End.FAILED, exit_code=10,
                                                  validation=Validation.PENDING,
                                                  reason="still pending: no triton"))
    assert cannot.pending and "still pending: no triton" in cannot.reason


def test_submission_with_validations_round_trips(tmp_path: Path) -> None:
    from rocmbuild.nightly.slurm.settings import Shape
    from rocmbuild.nightly.slurm.submission import ArrayJob, Submission

    shape = Shape(1, 0, 0, 60, "cpu")
    sub = Submission(1.5, (ArrayJob("7", "slurm/array0.sh", shape, ("a",)),
                           ArrayJob("8", "slurm/validate0.sh", replace(shape, gpus=1,
                                                                         partition="gpu"),
                                    ("a",), after="7")),
                     (SubmittedCell("a", "7", 0, "cells/a/result.json", "cells/a/log.txt"),),
                     (SubmittedCell("a", "8", 0, "cells/a/validate.json",
                                    "cells/a/validate.log"),))
    (tmp_path / SLURM_JSON).write_text(json.dumps(sub.to_json()))
    assert load_submission(tmp_path) == sub
    data = sub.to_json()
    data["jobs"][1]["after"] = "7; rm -rf /"
    (tmp_path / SLURM_JSON).write_text(json.dumps(data))
    with pytest.raises(UsageError, match="is not a number"):
        load_submission(tmp_path)
    data = sub.to_json()
    data["validations"][0]["result"] = "../../x"
    (tmp_path / SLURM_JSON).write_text(json.dumps(data))
    with pytest.raises(UsageError, match="not inside the run directory"):
        load_submission(tmp_path)
