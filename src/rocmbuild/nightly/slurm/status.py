"""What Slurm says about a job's tasks: squeue's state counts while they run, and per task the
state, exit code, times and node from ``scontrol -o show job`` (when slurmctld no longer knows
the job: ``sacct`` where accounting exists, then the cluster's jobcomp/filetxt file)."""

from __future__ import annotations

import datetime
import re
import shutil
from dataclasses import dataclass

from rocmbuild.core import run
from rocmbuild.core.errors import CommandFailed

TERMINAL = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
})
"""Job states after which a task runs no more (squeue's and scontrol's JobState)."""


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
