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
Beside it in this package: ``settings`` (nightly.toml's [executor], a task's shape),
``submission`` (slurm.json), ``status`` (what Slurm says of each task) and ``outcome`` (a
cell's outcome from that and the task's result.json).
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rocmbuild.artifacts.results import Status
from rocmbuild.core import log, run
from rocmbuild.core.errors import CommandFailed, ToolchainError, UsageError
from rocmbuild.core.fsutil import write_atomic
from rocmbuild.nightly import pending
from rocmbuild.nightly.model import CELL_ID, CellOutcome, End, Task, Validation
from rocmbuild.nightly.slurm.outcome import outcome, read_result
from rocmbuild.nightly.slurm.settings import Shape, SlurmSettings, shape_of
from rocmbuild.nightly.slurm.status import TERMINAL, TaskRecord, job_records, squeue_states
from rocmbuild.nightly.slurm.submission import (
    SLURM_JSON,
    ArrayJob,
    Submission,
    SubmittedCell,
    load_submission,
)

VALIDATE_RESULT = "validate.json"
VALIDATE_LOG = "validate.log"
_HINT_TOOLS = ("install Slurm's client commands on this machine (Debian: slurm-client) and "
               "point SLURM_CONF at the cluster's slurm.conf, or use --executor local")


@dataclass(frozen=True)
class CellTiming:
    """Slurm's overhead for one task of a cell, in seconds (Slurm's clock has 1 s steps)."""

    cell_id: str
    step: str
    """"build" (or the whole cell, without gpu_partition) or "validate"."""
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
        checks: list[SubmittedCell] = []
        split = bool(self.settings.gpu_partition)
        for k, (shape, group) in enumerate(groups.items()):
            if split:  # step 1 here, step 2 (validation) on the GPU partition after it
                group = [replace(t, argv=(*t.argv, "--step", "build")) for t in group]
            job = self._array(jobs, f"array{k}", shape, group, chdir, run_dir)
            cells += _submitted(job, group, run_dir)
            if split:
                vgroup = [validation_task(t, self.settings.gpu_mem_bytes) for t in group]
                vjob = self._array(jobs, f"validate{k}", shape_of(vgroup[0], self.settings),
                                   vgroup, chdir, run_dir, after=job.job_id)
                checks += _submitted(vjob, vgroup, run_dir)
        order = {t.cell_id: i for i, t in enumerate(tasks)}
        sub = Submission(submitted, tuple(jobs),
                         tuple(sorted(cells, key=lambda c: order[c.cell_id])),
                         tuple(sorted(checks, key=lambda c: order[c.cell_id])))
        write_atomic(run_dir / SLURM_JSON, json.dumps(sub.to_json(), indent=1) + "\n")
        return sub

    def _array(self, jobs: list[ArrayJob], name: str, shape: Shape, group: Sequence[Task],
               chdir: Path, run_dir: Path, after: str = "") -> ArrayJob:
        """Write ``slurm/<name>.sh`` and submit it as one array (``after``: each task i
        starts when task i of that array completed, and is cancelled when it did not); the job
        is appended to ``jobs``. A failed sbatch takes back what ``jobs`` holds."""
        script = run_dir / "slurm" / f"{name}.sh"
        write_atomic(script, batch_script(group))
        for t in group:
            t.log.parent.mkdir(parents=True, exist_ok=True)
            t.result.parent.mkdir(parents=True, exist_ok=True)
            t.result.unlink(missing_ok=True)  # a stale one must not pass for this run's
        dep = [f"--dependency=aftercorr:{after}", "--kill-on-invalid-dep=yes"] if after else []
        argv = ["sbatch", "--parsable", f"--array=0-{len(group) - 1}",
                f"--job-name={self.settings.job_name}", "--export=ALL", "--no-requeue",
                f"--chdir={chdir}", f"--output={run_dir}/slurm/{name}-%A_%a.out", *dep,
                *shape.sbatch_args(self.settings), *self.settings.extra_args, str(script)]
        try:
            job_id = _sbatch(argv)
        except CommandFailed:
            if jobs:  # no half-submitted night: what went in already is taken back
                run.run(["scancel", *(j.job_id for j in jobs)], check=False, timeout=60)
            raise
        log.info(f"slurm: submitted job {job_id}: {len(group)} cells"
                 + (" (validation)" if after else "") + ", "
                 + " ".join([*dep, *shape.sbatch_args(self.settings)]))
        job = ArrayJob(job_id, script.relative_to(run_dir).as_posix(), shape,
                       tuple(t.cell_id for t in group), after)
        jobs.append(job)
        return job

    # -- wait ------------------------------------------------------------------------------

    def wait(self, submission: Submission, timeout_s: float | None = None) -> None:
        """Poll squeue until every task of the submission has ended (or Slurm forgot it)."""
        _need("squeue")
        total = len(submission.cells) + len(submission.validations)
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
        for c in sub.cells:
            rec = records.get((c.job_id, c.task_index))
            if rec is not None and rec.state not in TERMINAL:
                raise UsageError(
                    f"Slurm task {c.job_id}_{c.task_index} (cell {c.cell_id}) is {rec.state}",
                    hint="wait for the array to end (squeue), then collect again")
            result, problem = read_result(run_dir / c.result, c.cell_id)
            outcomes.append(outcome(c, rec, result, problem))
        self.timings = [
            _timing(c, step, records.get((c.job_id, c.task_index)), sub.submitted, collected)
            for step, cs in (("build", sub.cells), ("validate", sub.validations)) for c in cs]
        checks = {v.cell_id: v for v in sub.validations}
        for i, o in enumerate(outcomes):
            v = checks.get(o.cell_id)
            if v is not None and o.pending:
                vrec = records.get((v.job_id, v.task_index))
                if vrec is not None and vrec.state not in TERMINAL:
                    raise UsageError(
                        f"Slurm task {v.job_id}_{v.task_index} (validation of {v.cell_id}) is "
                        f"{vrec.state}", hint="wait for the array to end (squeue), then "
                        "collect again")
                outcomes[i] = validated(o, v, vrec, read_result(run_dir / v.result,
                                                                v.cell_id)[0])
        data = sub.to_json()
        data["collected"] = collected
        data["tasks"] = [{"cell": t.cell_id, "step": t.step, "state": t.state,
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


def _timing(c: SubmittedCell, step: str, rec: TaskRecord | None, submitted: float,
            collected: float) -> CellTiming:
    return CellTiming(
        c.cell_id, step, rec.state if rec else "UNKNOWN",
        None if rec is None or rec.start is None else round(max(0.0, rec.start - submitted), 3),
        None if rec is None or rec.end is None else round(max(0.0, collected - rec.end), 3))


def validation_task(t: Task, mem_bytes: int) -> Task:
    """Step 2 of a cell on the GPU partition: ``--step validate`` of the same command (the argv
    of step 1 with its last two words replaced), its own result and log beside the cell's, one
    CPU and ``mem_bytes``."""
    d = t.result.parent
    return replace(t, argv=(*t.argv[:-2], "--step", "validate"), result=d / VALIDATE_RESULT,
                   log=d / VALIDATE_LOG, cpus=1, mem_bytes=mem_bytes, gpus=1)


def _submitted(job: ArrayJob, group: Sequence[Task], run_dir: Path) -> list[SubmittedCell]:
    return [SubmittedCell(t.cell_id, job.job_id, i,
                          t.result.resolve().relative_to(run_dir).as_posix(),
                          t.log.resolve().relative_to(run_dir).as_posix())
            for i, t in enumerate(group)]


def validated(built: CellOutcome, v: SubmittedCell, rec: TaskRecord | None,
              result: CellOutcome | None) -> CellOutcome:
    """A built (pending) cell with what its validation task said: passed (promoted then),
    failed (the cell fails), or, when the task wrote nothing (cancelled, its node failed),
    still pending (``nightly --validate-pending`` can do it later)."""
    if result is None or result.validation not in (Validation.PASSED, Validation.FAILED):
        state = rec.state if rec is not None else "unknown to Slurm"
        why = result.reason if result is not None else f"wrote no result ({state})"
        return replace(built, reason=f"{pending.built_part(built.reason)}"
                       f"{pending.NOT_VALIDATED} (pending): validation task "
                       f"{v.job_id}_{v.task_index}: "
                       f"{why}; validate it on a host that can: rocmbuild nightly "
                       "--validate-pending"[:500])
    failed = result.validation is Validation.FAILED
    return replace(built, validation=result.validation,
                   status=Status.FAILED if failed else built.status,
                   end=End.FAILED if failed else built.end,
                   exit_code=result.exit_code if failed
                   else built.exit_code, tflops=result.tflops,
                   reason=f"{pending.built_part(built.reason)}; {result.reason}"[:500])


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
