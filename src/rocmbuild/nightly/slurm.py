"""The Slurm executor: the cells of a nightly as ``sbatch --array`` jobs, one task per cell.

``SlurmExecutor(settings, run_dir)``:

- ``submit(tasks)``: groups the tasks by resource shape (cpus, memory, GPUs, time), writes one
  batch script per group (``<run_dir>/slurm/array<k>.sh``: the array task id picks the cell, whose
  ``python -m rocmbuild ...`` argv it execs with output to the cell's log) and submits each with
  ``sbatch --parsable --array=0-N``. The job ids and which task is which cell go to
  ``<run_dir>/slurm.json`` (a ``Submission``), so ``collect`` works from a later process.
- ``wait(submission)``: polls ``squeue`` until every task has ended, with a progress line.
- ``collect(run_dir)``: per task the state and exit code from ``scontrol -o show job`` (when
  slurmctld no longer knows the job: ``sacct`` where accounting exists, then the cluster's
  jobcomp/filetxt file), and the task's ``result.json``
  (untrusted: it must parse into a CellOutcome of that cell). Slurm's ends (COMPLETED, FAILED,
  CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...) map to ``End``; the reason says which and
  why. The overhead per cell (submit -> start, end -> collected) is written back to slurm.json.
- ``run(tasks)``: submit, wait, collect.

The environment goes to the tasks with ``--export=ALL``; the scripts hold argv and paths only.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.core import log, run
from rocmbuild.core.errors import CommandFailed, ToolchainError, UsageError
from rocmbuild.core.fsutil import write_atomic
from rocmbuild.nightly.model import CELL_ID, CellOutcome, End, Task

SLURM_JSON = "slurm.json"
RESULT_CAP = 1 << 20
"""A result.json larger than this is not read (it is written by a task: untrusted)."""

TERMINAL = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
})
"""Job states after which a task runs no more (squeue's and scontrol's JobState)."""

_ENDS: dict[str, End] = {
    "COMPLETED": End.COMPLETED, "FAILED": End.FAILED, "CANCELLED": End.CANCELLED,
    "TIMEOUT": End.TIMEOUT, "DEADLINE": End.TIMEOUT, "NODE_FAIL": End.NODE_FAIL,
    "BOOT_FAIL": End.NODE_FAIL, "OUT_OF_MEMORY": End.OUT_OF_MEMORY,
    "PREEMPTED": End.KILLED, "REVOKED": End.KILLED, "SPECIAL_EXIT": End.FAILED,
}

_HINT_TOOLS = ("install Slurm's client commands on this machine (Debian: slurm-client) and "
               "point SLURM_CONF at the cluster's slurm.conf, or use --executor local")


@dataclass(frozen=True)
class SlurmSettings:
    """``[executor]`` of nightly.toml when ``kind = "slurm"``."""

    partition: str | None = None
    """Partition for cells without GPUs (None: the cluster's default)."""
    gpu_partition: str | None = None
    """Partition for cells that need GPUs (validation); None: ``partition``."""
    account: str | None = None
    """``--account``, where the site charges jobs to one."""
    extra_args: tuple[str, ...] = ()
    """More sbatch arguments, as they are (``--qos=normal``, ``--constraint=mi300x``)."""
    max_time_s: int | None = None
    """The partition's time limit: no task asks for more, whatever its cell's timeout."""
    shared_dir: Path | None = None
    """A path every node sees (the run directory, workspace and cache live under it); tasks
    start in it."""
    poll_s: float = 2.0
    """How often ``wait`` asks squeue."""
    job_name: str = "rocmbuild-nightly"


SETTING_KEYS = ("partition", "gpu_partition", "account", "sbatch_args", "time", "shared_dir",
                "poll", "job_name")
"""The keys of nightly.toml's ``[executor]`` table that ``settings_from_table`` reads."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def settings_from_table(table: Mapping[str, Any], where: str, base: Path) -> SlurmSettings:
    """SlurmSettings from nightly.toml's ``[executor]`` table (``where`` names it in errors,
    e.g. ``nightly.toml: executor``; a relative ``shared_dir`` is taken from ``base``, the
    config file's directory). Keys not in SETTING_KEYS are left to the caller."""
    def bad(key: str, what: str, hint: str) -> UsageError:
        return UsageError(f"{where}.{key}: {what}", hint=hint)

    def name(key: str) -> str | None:
        v = table.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not _NAME.fullmatch(v):
            raise bad(key, f"{str(v)[:60]!r} is not a Slurm name",
                      "letters, digits and . _ : + - (a partition, account or job name)")
        return v

    def span(key: str) -> float | None:
        v = table.get(key)
        if v is None:
            return None
        m = _SPAN.fullmatch(v.strip()) if isinstance(v, str) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            secs = float(v)
        elif m:
            secs = float(m.group(1)) * _UNIT[m.group(2)]
        else:
            raise bad(key, f"{str(v)[:60]!r} is not a duration",
                      'seconds, or a number with s, m, h or d: "90m", "12h"')
        if not 0 < secs <= 366 * 86400:
            raise bad(key, f"{v!r} is out of range", "more than 0 s, at most a year")
        return secs

    args = table.get("sbatch_args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) and a.startswith("-")
                                             for a in args):
        raise bad("sbatch_args", "must be a list of sbatch options",
                  'e.g. sbatch_args = ["--qos=normal", "--constraint=mi300x"]')
    taken = [a for a in args if a.split("=")[0] in (
        "--array", "-a", "--parsable", "--output", "-o", "--chdir", "-D", "--wrap",
        "--export")]
    if taken:
        raise bad("sbatch_args", f"{taken[0].split('=')[0]} is the executor's own",
                  "the executor sets --array, --output, --chdir and --export itself")
    shared = table.get("shared_dir")
    if shared is not None and (not isinstance(shared, str) or not shared.strip()):
        raise bad("shared_dir", "must be a path", "a directory every node mounts")
    limit, poll = span("time"), span("poll")
    return SlurmSettings(
        partition=name("partition"), gpu_partition=name("gpu_partition"),
        account=name("account"), extra_args=tuple(args),
        max_time_s=None if limit is None else math.ceil(limit),
        shared_dir=None if shared is None else base / Path(shared).expanduser(),
        poll_s=2.0 if poll is None else poll,
        job_name=name("job_name") or SlurmSettings.job_name,
    )


@dataclass(frozen=True)
class Shape:
    """What one array asks for, per task."""

    cpus: int
    mem_mb: int
    """0: no ``--mem`` (the partition's default)."""
    gpus: int
    time_min: int
    partition: str | None

    def sbatch_args(self, settings: SlurmSettings) -> list[str]:
        args = [f"--cpus-per-task={self.cpus}", f"--time={self.time_min}"]
        if self.mem_mb:
            args.append(f"--mem={self.mem_mb}M")
        if self.gpus:
            args.append(f"--gres=gpu:{self.gpus}")
        if self.partition:
            args.append(f"--partition={self.partition}")
        if settings.account:
            args.append(f"--account={settings.account}")
        return args


def shape_of(task: Task, settings: SlurmSettings) -> Shape:
    """The resources a task asks for: ``--cpus-per-task`` = cpus, ``--mem`` = its memory in MiB
    (rounded up), ``--gres=gpu:N`` on the GPU partition when it needs GPUs, ``--time`` = its
    timeout in minutes (rounded up, at most ``max_time_s``)."""
    time_s = task.time_s if settings.max_time_s is None else min(task.time_s,
                                                                 settings.max_time_s)
    gpus = max(0, task.gpus)
    return Shape(
        cpus=max(1, task.cpus),
        mem_mb=math.ceil(max(0, task.mem_bytes) / (1 << 20)),
        gpus=gpus,
        time_min=max(1, math.ceil(time_s / 60)),
        partition=(settings.gpu_partition or settings.partition) if gpus else settings.partition,
    )


@dataclass(frozen=True)
class SubmittedCell:
    cell_id: str
    job_id: str
    """The array job's id."""
    task_index: int
    """``SLURM_ARRAY_TASK_ID`` of the cell's task; the task's own id is ``<job_id>_<index>``."""
    result: str
    """The cell's result.json, relative to the run directory."""
    log: str
    """The cell's log, relative to the run directory."""


@dataclass(frozen=True)
class ArrayJob:
    job_id: str
    script: str
    """The batch script, relative to the run directory."""
    shape: Shape
    cells: tuple[str, ...]
    """Cell ids by array task index."""


@dataclass(frozen=True)
class Submission:
    """What ``submit`` did: written to ``<run_dir>/slurm.json``."""

    submitted: float
    """Unix time just before the first sbatch."""
    jobs: tuple[ArrayJob, ...]
    cells: tuple[SubmittedCell, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "submitted": self.submitted,
            "jobs": [{"job_id": j.job_id, "script": j.script, "cells": list(j.cells),
                      "cpus": j.shape.cpus, "mem_mb": j.shape.mem_mb, "gpus": j.shape.gpus,
                      "time_min": j.shape.time_min, "partition": j.shape.partition}
                     for j in self.jobs],
            "cells": [{"cell": c.cell_id, "job_id": c.job_id, "task": c.task_index,
                       "result": c.result, "log": c.log} for c in self.cells],
        }


@dataclass(frozen=True)
class TaskRecord:
    """One task as Slurm reports it."""

    job_id: str
    task_index: int
    state: str
    exit_code: int | None
    signal: int | None
    start: float | None
    end: float | None
    node: str = ""
    reason: str = ""
    time_limit: str = ""


@dataclass(frozen=True)
class CellTiming:
    """Slurm's overhead for one cell, in seconds (Slurm's clock has 1 s steps)."""

    cell_id: str
    state: str
    submit_to_start_s: float | None
    end_to_collected_s: float | None


class SlurmExecutor:
    """Runs a nightly's tasks as Slurm array jobs (see the module's doc)."""

    def __init__(self, settings: SlurmSettings, run_dir: Path) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.timings: list[CellTiming] = []
        """Filled by ``collect``."""

    # -- submit ----------------------------------------------------------------------------

    def submit(self, tasks: Sequence[Task]) -> Submission:
        """Write the batch scripts, submit one array per resource shape, write slurm.json."""
        _need("sbatch")
        run_dir = self.run_dir.resolve()
        chdir = self.settings.shared_dir.resolve() if self.settings.shared_dir else run_dir
        if self.settings.shared_dir is not None and not run_dir.is_relative_to(chdir):
            raise UsageError(
                f"the run directory {run_dir} is not under the Slurm shared_dir {chdir}",
                hint="put the nightly's reports dir (and workspace, cache) under shared_dir: "
                     "the nodes read and write them there")
        groups: dict[Shape, list[Task]] = {}
        seen: set[str] = set()
        for task in tasks:
            if not CELL_ID.fullmatch(task.cell_id) or task.cell_id in seen:
                raise UsageError(f"Slurm executor: bad or repeated cell id {task.cell_id!r}",
                                 hint="cell ids are unique, [a-z0-9][a-z0-9._-]*")
            seen.add(task.cell_id)
            for p in (task.result, task.log):
                if not p.resolve().is_relative_to(run_dir):
                    raise UsageError(f"Slurm executor: {p} of cell {task.cell_id} is not under "
                                     f"the run directory {run_dir}",
                                     hint="a cell's result.json and log live in the run dir")
            groups.setdefault(shape_of(task, self.settings), []).append(task)
        (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
        submitted = time.time()
        jobs: list[ArrayJob] = []
        cells: list[SubmittedCell] = []
        for k, (shape, group) in enumerate(groups.items()):
            script = run_dir / "slurm" / f"array{k}.sh"
            write_atomic(script, batch_script(group))
            for t in group:
                t.log.parent.mkdir(parents=True, exist_ok=True)
                t.result.parent.mkdir(parents=True, exist_ok=True)
                t.result.unlink(missing_ok=True)  # a stale one must not pass for this run's
            argv = ["sbatch", "--parsable", f"--array=0-{len(group) - 1}",
                    f"--job-name={self.settings.job_name}", "--export=ALL",
                    f"--chdir={chdir}", f"--output={run_dir}/slurm/array{k}-%A_%a.out",
                    *shape.sbatch_args(self.settings), *self.settings.extra_args, str(script)]
            try:
                job_id = _sbatch(argv)
            except CommandFailed:
                if jobs:  # no half-submitted night: what went in already is taken back
                    run.run(["scancel", *(j.job_id for j in jobs)], check=False, timeout=60)
                raise
            log.info(f"slurm: submitted job {job_id}: {len(group)} cells, "
                     + " ".join(shape.sbatch_args(self.settings)))
            jobs.append(ArrayJob(job_id, script.relative_to(run_dir).as_posix(), shape,
                                 tuple(t.cell_id for t in group)))
            cells += [SubmittedCell(t.cell_id, job_id, i,
                                    t.result.resolve().relative_to(run_dir).as_posix(),
                                    t.log.resolve().relative_to(run_dir).as_posix())
                      for i, t in enumerate(group)]
        order = {t.cell_id: i for i, t in enumerate(tasks)}
        sub = Submission(submitted, tuple(jobs),
                         tuple(sorted(cells, key=lambda c: order[c.cell_id])))
        write_atomic(run_dir / SLURM_JSON, json.dumps(sub.to_json(), indent=1) + "\n")
        return sub

    # -- wait ------------------------------------------------------------------------------

    def wait(self, submission: Submission, timeout_s: float | None = None) -> None:
        """Poll squeue until every task of the submission has ended (or Slurm forgot it)."""
        _need("squeue")
        total = len(submission.cells)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last = ""
        while True:
            counts = {"pending": 0, "running": 0, "done": 0}
            for job in submission.jobs:
                states = squeue_states(job.job_id)
                if not states:  # purged (or nothing listed): ended long ago
                    counts["done"] += len(job.cells)
                    continue
                for state, n in states.items():
                    key = ("done" if state in TERMINAL
                           else "pending" if state == "PENDING" else "running")
                    counts[key] += n
            line = (f"slurm: {total} tasks: {counts['pending']} pending, "
                    f"{counts['running']} running, {counts['done']} done")
            if line != last:
                log.info(line)
                last = line
            if counts["done"] >= total and counts["pending"] == counts["running"] == 0:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise CommandFailed(f"Slurm tasks still running after {timeout_s:g}s: {line}",
                                    hint="collect later with `nightly --collect RUN`")
            time.sleep(self.settings.poll_s)

    # -- collect ---------------------------------------------------------------------------

    def collect(self, run_dir: Path | None = None, wait: bool = True) -> list[CellOutcome]:
        """The outcome of every cell of the submission in ``run_dir`` (default: this
        executor's), after waiting for the tasks to end (``wait``; else a task still pending or
        running is an error)."""
        run_dir = (run_dir or self.run_dir).resolve()
        sub = load_submission(run_dir)
        if wait:
            self.wait(sub)
        _need("scontrol")
        records: dict[tuple[str, int], TaskRecord] = {}
        for job in sub.jobs:
            for r in job_records(job.job_id):
                records[(r.job_id, r.task_index)] = r
        collected = time.time()
        outcomes: list[CellOutcome] = []
        self.timings = []
        for c in sub.cells:
            rec = records.get((c.job_id, c.task_index))
            if rec is not None and rec.state not in TERMINAL:
                raise UsageError(
                    f"Slurm task {c.job_id}_{c.task_index} (cell {c.cell_id}) is {rec.state}",
                    hint="wait for the array to end (squeue), then collect again")
            result, problem = read_result(run_dir / c.result, c.cell_id)
            outcomes.append(outcome(c, rec, result, problem))
            self.timings.append(CellTiming(
                c.cell_id, rec.state if rec else "UNKNOWN",
                None if rec is None or rec.start is None
                else round(max(0.0, rec.start - sub.submitted), 3),
                None if rec is None or rec.end is None
                else round(max(0.0, collected - rec.end), 3)))
        data = sub.to_json()
        data["collected"] = collected
        data["tasks"] = [{"cell": t.cell_id, "state": t.state,
                          "submit_to_start_s": t.submit_to_start_s,
                          "end_to_collected_s": t.end_to_collected_s} for t in self.timings]
        write_atomic(run_dir / SLURM_JSON, json.dumps(data, indent=1) + "\n")
        return outcomes

    def run(self, tasks: Sequence[Task]) -> list[CellOutcome]:
        """Submit, wait for and collect ``tasks``; outcomes in the tasks' order."""
        if not tasks:
            return []
        self.wait(self.submit(tasks))
        return self.collect(self.run_dir, wait=False)


# -- the batch script ---------------------------------------------------------------------

def batch_script(tasks: Sequence[Task]) -> str:
    """The array's batch script: array task i execs task i's argv, output to its log."""
    lines = [
        "#!/bin/bash",
        "# Generated by rocmbuild nightly (Slurm executor). The array task id picks the cell;",
        "# the environment comes with sbatch --export, nothing secret is written here.",
        'case "${SLURM_ARRAY_TASK_ID:-}" in',
    ]
    for i, t in enumerate(tasks):
        lines.append(f"  {i})  # {t.cell_id}")
        lines.append(f"    exec {run.quote(t.argv)} >{shlex.quote(str(t.log.resolve()))} 2>&1 ;;")
    lines += [
        '  *) echo "rocmbuild: no cell for array task ${SLURM_ARRAY_TASK_ID:-?}" >&2; exit 2 ;;',
        "esac",
        "",
    ]
    return "\n".join(lines)


# -- Slurm's answers ----------------------------------------------------------------------

def _sbatch(argv: Sequence[str]) -> str:
    """Submit; the job id sbatch --parsable printed (``12`` or ``12;cluster``)."""
    res = run.run(argv, capture=True, timeout=120, hint=(
        "read sbatch's message: a partition, account or resource request the cluster does not "
        "accept (set them in nightly.toml's [executor])"))
    lines = res.output.strip().splitlines()
    job_id = lines[-1].split(";")[0].strip() if lines else ""
    if not job_id.isdigit():
        raise CommandFailed(f"sbatch printed no job id: {res.output.strip()[:200]!r}",
                            hint="check that this sbatch is Slurm's (it must know --parsable)")
    return job_id


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        raise ToolchainError(f"{tool}: command not found (the Slurm executor needs it)",
                             hint=_HINT_TOOLS)


def task_ids(text: str) -> list[int]:
    """Expand an ArrayTaskId as Slurm prints it: ``3``, ``2-3``, ``[0-2,5]``, ``0-7%2``."""
    text = text.strip().strip("[]").split("%")[0]
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def squeue_states(job_id: str) -> dict[str, int] | None:
    """Count of tasks per state of array job ``job_id``; None when Slurm no longer knows it."""
    res = run.run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%K|%T"], capture=True,
                  check=False, timeout=60)
    if res.returncode != 0:
        if "Invalid job id" in res.output:
            return None
        raise CommandFailed(f"squeue exited with code {res.returncode}: {res.cause}",
                            hint="check that slurmctld answers (scontrol ping); the tasks keep "
                                 "running in Slurm: collect them later with "
                                 "`nightly --collect RUN`")
    counts: dict[str, int] = {}
    for line in res.output.splitlines():
        ids, _, state = line.partition("|")
        state = state.strip().split(" ")[0]
        if state:
            counts[state] = counts.get(state, 0) + max(1, len(task_ids(ids)))
    return counts


_FIELD = re.compile(r"(?:^|\s)([A-Za-z]+)=(\S*)")


def fields(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one ``scontrol -o`` line (the first of each key)."""
    out: dict[str, str] = {}
    for key, value in _FIELD.findall(line):
        out.setdefault(key, value)
    return out


def _when(text: str) -> float | None:
    """Slurm's local time (``2026-11-30T16:20:01``) as Unix time; None for Unknown/None."""
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


def parse_scontrol(text: str, job_id: str) -> list[TaskRecord]:
    """Task records of array job ``job_id`` from ``scontrol -o show job`` (one line per task;
    tasks cancelled while pending share one line whose ArrayTaskId is a range) or from a
    ``jobcomp/filetxt`` file (the same ``Key=value`` lines)."""
    out: list[TaskRecord] = []
    for line in text.splitlines():
        f = fields(line)
        if f.get("ArrayJobId", f.get("JobId")) != job_id or "JobState" not in f:
            continue
        code, sig = _exit(f.get("ExitCode", ""))
        host = f.get("BatchHost") or f.get("NodeList", "")
        host = "" if host in ("(null)", "None") else host
        # A task cancelled while pending has StartTime = EndTime = the cancel, and no node.
        start = _when(f.get("StartTime", "")) if host else None
        for i in task_ids(f.get("ArrayTaskId", "0")):
            out.append(TaskRecord(job_id, i, f["JobState"], code, sig, start,
                                  _when(f.get("EndTime", "")), host, f.get("Reason", ""),
                                  f.get("TimeLimit", "")))
    return out


def parse_sacct(text: str, job_id: str) -> list[TaskRecord]:
    """Task records from ``sacct -n -P -X -o JobID,State,ExitCode,Start,End,NodeList``
    (``12_0|COMPLETED|0:0|...``, ``12_[2-3]|CANCELLED by 0|0:0|...``)."""
    out: list[TaskRecord] = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 6:
            continue
        jid, _, ids = parts[0].partition("_")
        if jid != job_id or not ids:
            continue
        code, sig = _exit(parts[2])
        for i in task_ids(ids):
            out.append(TaskRecord(job_id, i, parts[1].split(" ")[0], code, sig,
                                  _when(parts[3]), _when(parts[4]), parts[5]))
    return out


def job_records(job_id: str) -> list[TaskRecord]:
    """Every task of ``job_id``: scontrol while slurmctld keeps the job (MinJobAge), then
    sacct where accounting works, then the jobcomp/filetxt file where the cluster writes one;
    [] when none knows it."""
    res = run.run(["scontrol", "-o", "show", "job", job_id], capture=True, check=False,
                  timeout=60)
    if res.returncode == 0:
        return parse_scontrol(res.output, job_id)
    if shutil.which("sacct") is not None:
        acct = run.run(["sacct", "-n", "-P", "-X", "-j", job_id,
                        "-o", "JobID,State,ExitCode,Start,End,NodeList"],
                       capture=True, check=False, timeout=60)
        if acct.returncode == 0 and (recs := parse_sacct(acct.output, job_id)):
            return recs
    return jobcomp_records(job_id)


def jobcomp_records(job_id: str) -> list[TaskRecord]:
    """The tasks of ``job_id`` in the cluster's ``jobcomp/filetxt`` file (``scontrol show
    config``: JobCompType, JobCompLoc), which outlives slurmctld's memory; [] without one. The
    last line of a task wins (job ids start again at 1 on a new cluster)."""
    res = run.run(["scontrol", "show", "config"], capture=True, check=False, timeout=60)
    conf = dict(ln.split("=", 1) for ln in res.output.splitlines() if " = " in ln)
    conf = {k.strip(): v.strip() for k, v in conf.items()}
    if res.returncode != 0 or conf.get("JobCompType") != "jobcomp/filetxt":
        return []
    mark = f" ArrayJobId={job_id} "
    try:
        with open(conf.get("JobCompLoc", ""), encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f if mark in ln]
    except OSError:
        return []
    return parse_scontrol("".join(lines), job_id)


# -- outcomes -----------------------------------------------------------------------------

def read_result(path: Path, cell_id: str) -> tuple[CellOutcome | None, str]:
    """The CellOutcome a task wrote, or None and why not (missing, too large, not JSON, another
    cell's, a bad field)."""
    try:
        if path.is_symlink() or not path.is_file():
            return None, "no result.json"
        if path.stat().st_size > RESULT_CAP:
            return None, f"result.json larger than {RESULT_CAP} bytes"
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"result.json unreadable: {type(exc).__name__}"
    if not isinstance(data, dict):
        return None, "result.json is not a JSON object"
    if data.get("cell") != cell_id:
        return None, f"result.json is for cell {str(data.get('cell'))[:80]!r}, not {cell_id}"
    try:
        return outcome_from_json(data), ""
    except (TypeError, ValueError) as exc:
        return None, f"result.json: {str(exc)[:200]}"


def _opt(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    v = data.get(key)
    if v is None:
        return None
    if isinstance(v, bool) and kind is not bool or not isinstance(v, kind):
        raise TypeError(f"{key} is not {getattr(kind, '__name__', kind)}")
    return v


def outcome_from_json(data: Mapping[str, Any]) -> CellOutcome:
    """A CellOutcome from its ``to_json`` form, every field checked."""
    num = (int, float)
    return CellOutcome(
        cell_id=str(data["cell"]),
        status=Status(data.get("status")),
        end=End(data.get("end")),
        reason=_opt(data, "reason", str) or "",
        duration_s=float(_opt(data, "duration_s", num) or 0.0),
        peak_rss_bytes=_opt(data, "peak_rss_bytes", int),
        disk_bytes=_opt(data, "disk_bytes", int),
        wheel=_opt(data, "wheel", str),
        wheel_size=_opt(data, "wheel_size", int),
        version=_opt(data, "version", str),
        project=_opt(data, "project", str),
        cache_hit_rate=_opt(data, "cache_hit_rate", num),
        tflops=_opt(data, "tflops", num),
        exit_code=_opt(data, "exit_code", int),
        log=_opt(data, "log", str) or "",
        promoted=bool(_opt(data, "promoted", bool)),
    )


def _slurm_reason(c: SubmittedCell, rec: TaskRecord) -> str:
    task = f"Slurm task {c.job_id}_{c.task_index}"
    on = f" on {rec.node}" if rec.node and rec.node != "(null)" else ""
    ran = (f" after {rec.end - rec.start:.0f}s" if rec.start is not None and rec.end is not None
           else "")
    if rec.state == "CANCELLED":
        if rec.start is None:
            return f"{task} cancelled before it started (scancel)"
        sig = f", signal {rec.signal}" if rec.signal else ""
        return f"{task} cancelled while running{on}{ran} (scancel{sig})"
    if rec.state in ("TIMEOUT", "DEADLINE"):
        limit = f" ({rec.time_limit})" if rec.time_limit else ""
        return f"{task} reached its Slurm time limit{limit}{ran}{on}"
    if rec.state in ("NODE_FAIL", "BOOT_FAIL"):
        return f"{task}: node failure{on}{ran} ({rec.state})"
    if rec.state == "OUT_OF_MEMORY":
        return f"{task} ran out of its --mem{on}{ran} (OUT_OF_MEMORY)"
    if rec.state == "FAILED":
        how = (f"killed by signal {rec.signal}" if rec.signal
               else f"exit code {rec.exit_code}")
        return f"{task} failed{on}{ran}: {how}"
    return f"{task} ended {rec.state}{on}{ran}"


def outcome(c: SubmittedCell, rec: TaskRecord | None, result: CellOutcome | None,
            problem: str) -> CellOutcome:
    """One cell's outcome from Slurm's record and the task's own result.json."""
    if rec is None:
        if result is not None:
            return _with(result, c, None, result.reason)
        return CellOutcome(c.cell_id, Status.FAILED, End.FAILED,
                           f"Slurm no longer knows task {c.job_id}_{c.task_index} (purged, no "
                           f"accounting) and {problem}", log=c.log)
    end = _ENDS.get(rec.state, End.KILLED)
    if rec.state == "COMPLETED":
        if result is not None:
            return _with(result, c, rec, result.reason)
        return CellOutcome(c.cell_id, Status.FAILED, End.FAILED,
                           f"Slurm task {c.job_id}_{c.task_index} exited 0 but {problem}",
                           duration_s=_ran(rec), exit_code=rec.exit_code, log=c.log)
    why = _slurm_reason(c, rec)
    if result is not None and rec.state == "FAILED":
        if result.status == Status.FAILED:
            return _with(result, c, rec, f"{result.reason}; {why}" if result.reason else why)
        return _with(result, c, rec, f"{why} after writing a {result.status.value} result",
                     failed=True)
    return CellOutcome(c.cell_id, Status.FAILED, end, why, duration_s=_ran(rec),
                       exit_code=rec.exit_code, log=c.log)


def _ran(rec: TaskRecord) -> float:
    return max(0.0, rec.end - rec.start) if rec.start is not None and rec.end is not None else 0.0


def _with(result: CellOutcome, c: SubmittedCell, rec: TaskRecord | None, reason: str,
          failed: bool = False) -> CellOutcome:
    # Promotion is the controller's, after collecting: a task's word for it does not count.
    return replace(result, reason=reason, log=c.log, promoted=False,
                   exit_code=rec.exit_code if rec is not None else result.exit_code,
                   duration_s=result.duration_s or (_ran(rec) if rec else 0.0),
                   status=Status.FAILED if failed else result.status,
                   end=End.FAILED if failed else result.end)


# -- slurm.json ---------------------------------------------------------------------------

def load_submission(run_dir: Path) -> Submission:
    """``<run_dir>/slurm.json``, checked: job ids are numbers, cell ids cell ids, paths inside
    the run directory."""
    path = run_dir / SLURM_JSON
    bad = f"{path}: not a Slurm submission of rocmbuild nightly"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file: this run was not submitted to Slurm",
                         hint="collect a run that ran with --executor slurm") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{bad} ({type(exc).__name__})",
                         hint="was it edited? resubmit the run") from None
    try:
        jobs = tuple(ArrayJob(
            _digits(j["job_id"]), _inside(run_dir, j["script"]),
            Shape(int(j["cpus"]), int(j["mem_mb"]), int(j["gpus"]), int(j["time_min"]),
                  None if j.get("partition") is None else str(j["partition"])),
            tuple(_cell(x) for x in j["cells"])) for j in data["jobs"])
        cells = tuple(SubmittedCell(_cell(c["cell"]), _digits(c["job_id"]), int(c["task"]),
                                    _inside(run_dir, c["result"]), _inside(run_dir, c["log"]))
                      for c in data["cells"])
        submitted = float(data["submitted"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{bad}: {str(exc)[:200]}",
                         hint="was it edited? resubmit the run") from None
    return Submission(submitted, jobs, cells)


def _digits(v: object) -> str:
    if not isinstance(v, str) or not v.isdigit():
        raise ValueError(f"job id {str(v)[:40]!r} is not a number")
    return v


def _cell(v: object) -> str:
    if not isinstance(v, str) or not CELL_ID.fullmatch(v):
        raise ValueError(f"cell id {str(v)[:40]!r}")
    return v


def _inside(run_dir: Path, v: object) -> str:
    if not isinstance(v, str) or not v or Path(v).is_absolute() or ".." in Path(v).parts:
        raise ValueError(f"path {str(v)[:80]!r} is not inside the run directory")
    return v

