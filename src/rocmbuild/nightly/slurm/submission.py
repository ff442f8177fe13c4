"""``<run_dir>/slurm.json``: what the Slurm executor submitted (the array jobs, which task is
which cell), written by ``submit`` and read back, untrusted, by ``load_submission`` so that
``collect`` works from a later process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import untrusted
from rocmbuild.core.errors import UsageError
from rocmbuild.core.jobs import MAX_JOBS
from rocmbuild.nightly.model import CELL_ID
from rocmbuild.nightly.slurm.settings import Shape

SLURM_JSON = "slurm.json"
SLURM_JSON_MAX = 16 << 20


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
    after: str = ""
    """A validation array: the build array whose task i each task i follows (aftercorr)."""


@dataclass(frozen=True)
class Submission:
    """What ``submit`` did: written to ``<run_dir>/slurm.json``."""

    submitted: float
    """Unix time just before the first sbatch."""
    jobs: tuple[ArrayJob, ...]
    cells: tuple[SubmittedCell, ...]
    validations: tuple[SubmittedCell, ...] = ()
    """The cells' validation tasks (``gpu_partition`` set), on the GPU partition."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "submitted": self.submitted,
            "jobs": [{"job_id": j.job_id, "script": j.script, "cells": list(j.cells),
                      "cpus": j.shape.cpus, "mem_mb": j.shape.mem_mb, "gpus": j.shape.gpus,
                      "time_min": j.shape.time_min, "partition": j.shape.partition,
                      **({"after": j.after} if j.after else {})}
                     for j in self.jobs],
            "cells": [_cell_json(c) for c in self.cells],
            **({"validations": [_cell_json(c) for c in self.validations]}
               if self.validations else {}),
        }


def _cell_json(c: SubmittedCell) -> dict[str, Any]:
    return {"cell": c.cell_id, "job_id": c.job_id, "task": c.task_index, "result": c.result,
            "log": c.log}


def load_submission(run_dir: Path) -> Submission:
    """``<run_dir>/slurm.json``, checked: job ids are numbers, cell ids cell ids, paths inside
    the run directory."""
    path = run_dir / SLURM_JSON
    bad = f"{path}: not a Slurm submission of rocmbuild nightly"
    try:
        data = untrusted.obj(untrusted.read_json(path, SLURM_JSON_MAX), "(top level)")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file: this run was not submitted to Slurm",
                         hint="collect a run that ran with --executor slurm") from None
    except OSError as exc:
        raise UsageError(f"{bad} ({exc.strerror or type(exc).__name__})",
                         hint="was it edited? resubmit the run") from None
    except untrusted.BadJson as exc:
        raise UsageError(f"{bad} ({exc})", hint="was it edited? resubmit the run") from None
    u = untrusted
    try:
        jobs = tuple(ArrayJob(
            _digits(j["job_id"]), _inside(run_dir, j["script"]),
            Shape(u.integer(j["cpus"], f"jobs[{i}].cpus", 1, MAX_JOBS),
                  u.integer(j["mem_mb"], f"jobs[{i}].mem_mb", 0, 1 << 40),
                  u.integer(j["gpus"], f"jobs[{i}].gpus", 0, 1024),
                  u.integer(j["time_min"], f"jobs[{i}].time_min", 0, 366 * 24 * 60),
                  None if j.get("partition") is None
                  else u.text(j["partition"], f"jobs[{i}].partition", 200)),
            tuple(_cell(x) for x in _list(j["cells"], f"jobs[{i}].cells")),
            _digits(j["after"]) if "after" in j else "")
            for i, j in enumerate(_list(data["jobs"], "jobs")))
        cells, checks = (tuple(
            SubmittedCell(_cell(c["cell"]), _digits(c["job_id"]),
                          u.integer(c["task"], f"{key}[{i}].task", 0, 1 << 31),
                          _inside(run_dir, c["result"]), _inside(run_dir, c["log"]))
            for i, c in enumerate(_list(data[key] if key == "cells" else data.get(key, []),
                                        key)))
            for key in ("cells", "validations"))
        submitted = u.number(data["submitted"], "submitted", 0, 1e11)
    except KeyError as exc:
        raise UsageError(f"{bad}: key {str(exc)[:80]} missing",
                         hint="was it edited? resubmit the run") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{bad}: {str(exc)[:200]}",
                         hint="was it edited? resubmit the run") from None
    return Submission(submitted, jobs, cells, checks)


def _list(v: object, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise ValueError(f"{where}: expected a list")
    return v


def _digits(v: object) -> str:
    if not isinstance(v, str) or not v.isascii() or not v.isdigit() or len(v) > 19:
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
