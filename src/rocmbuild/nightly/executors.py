"""Executors run one ``Task`` per cell and hand back a ``CellOutcome`` each. ``Local`` runs them
here, one after another (each build plans its own parallelism from the whole machine). The Slurm
executor (``nightly/slurm/executor.py``) has the same shape: ``run(tasks) -> list[CellOutcome]``.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from rocmbuild.artifacts.results import Status
from rocmbuild.core import log, run
from rocmbuild.core.errors import CommandFailed
from rocmbuild.nightly import cell
from rocmbuild.nightly.model import CellOutcome, End, Task


def _children_maxrss() -> int:
    """The largest RSS of any child reaped so far (the kernel keeps one maximum for all)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


class Local:
    """Each task's argv as a child of this process (``run.run``: its own process group, killed
    with all it started at the cell's timeout), its output in the cell's ``log.txt``."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def run(self, tasks: Sequence[Task]) -> list[CellOutcome]:
        return [self.run_one(t) for t in tasks]

    def run_one(self, task: Task) -> CellOutcome:
        start, rss_before = time.monotonic(), _children_maxrss()
        log.info(escape(f"cell {task.cell_id}: started (timeout {task.time_s}s, log {task.log})"))
        rel_log = str(task.log.relative_to(self.run_dir)) if task.log.is_relative_to(
            self.run_dir) else str(task.log)
        try:
            done = run.run(task.argv, log_path=task.log, timeout=task.time_s, check=False)
            rc: int | None = done.returncode
            timed_out, cause = done.timed_out, done.cause
        except CommandFailed as exc:  # the interpreter could not start
            rc, timed_out, cause = exc.returncode, False, exc.message
        duration = time.monotonic() - start
        # this task's peak only when it raised the maximum (else an earlier cell's would show;
        # a task that writes result.json reports its own)
        top = _children_maxrss()
        rss = top if top > rss_before else None
        disk = cell.disk_use(task.log.parent)
        found = cell.read_result(task.result, task.cell_id)
        if timed_out:
            out = CellOutcome(task.cell_id, Status.FAILED, End.TIMEOUT,
                              reason=f"killed after its timeout of {task.time_s}s",
                              duration_s=duration, peak_rss_bytes=rss, disk_bytes=disk,
                              exit_code=rc, log=rel_log)
        elif found is None:
            killed = rc is not None and rc < 0
            out = CellOutcome(
                task.cell_id, Status.FAILED, End.KILLED if killed else End.FAILED,
                reason=(f"killed by signal {-rc}" if killed and rc is not None else
                        f"exited with code {rc} without a result.json"
                        + (f": {cause}" if cause else "")),
                duration_s=duration, peak_rss_bytes=rss, disk_bytes=disk, exit_code=rc,
                log=rel_log)
        else:
            out = replace(found, duration_s=duration,
                          peak_rss_bytes=found.peak_rss_bytes or rss,
                          disk_bytes=(found.disk_bytes or 0) + disk, exit_code=rc, log=rel_log)
        log.info(escape(f"cell {task.cell_id}: {out.status.value} ({out.end.value}) in "
                        f"{duration:.1f}s{': ' + out.reason if out.reason else ''}"))
        return out
