"""A cell's outcome from a Slurm task: the task's own ``result.json`` (untrusted: it must parse
into a CellOutcome of that cell) and Slurm's record of the task. Slurm's ends (COMPLETED,
FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...) map to ``End``; the reason says which
and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.core import untrusted
from rocmbuild.nightly.model import CellOutcome, End, Validation
from rocmbuild.nightly.slurm.status import TaskRecord
from rocmbuild.nightly.slurm.submission import SubmittedCell

RESULT_CAP = 1 << 20
"""A result.json larger than this is not read (it is written by a task: untrusted)."""

_ENDS: dict[str, End] = {
    "COMPLETED": End.COMPLETED, "FAILED": End.FAILED, "CANCELLED": End.CANCELLED,
    "TIMEOUT": End.TIMEOUT, "DEADLINE": End.TIMEOUT, "NODE_FAIL": End.NODE_FAIL,
    "BOOT_FAIL": End.NODE_FAIL, "OUT_OF_MEMORY": End.OUT_OF_MEMORY,
    "PREEMPTED": End.KILLED, "REVOKED": End.KILLED, "SPECIAL_EXIT": End.FAILED,
}


def read_result(path: Path, cell_id: str) -> tuple[CellOutcome | None, str]:
    """The CellOutcome a task wrote, or None and why not (missing, too large, not JSON, another
    cell's, a bad field)."""
    try:
        data = untrusted.read_json(path, RESULT_CAP)
    except FileNotFoundError:
        return None, "no result.json"
    except OSError as exc:
        return None, f"result.json unreadable: {exc.strerror or type(exc).__name__}"
    except untrusted.BadJson as exc:
        return None, f"result.json unreadable: {exc}"
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
    if isinstance(v, str) and (len(v) > 4096 or "\0" in v):
        raise ValueError(f"{key} is not a string of at most 4096 characters")
    return v


_BYTES = 1 << 60
_RANGES: dict[str, tuple[float, float]] = {
    "duration_s": (0, 1e9), "peak_rss_bytes": (0, _BYTES), "disk_bytes": (0, _BYTES),
    "wheel_size": (0, _BYTES), "cache_hit_rate": (0, 1), "tflops": (0, 1e6),
    "exit_code": (-255, 255)}


def _num(data: Mapping[str, Any], key: str, whole: bool) -> Any:
    """``data[key]``: None, or a number (a whole one when ``whole``) in _RANGES[key]."""
    v = _opt(data, key, int if whole else (int, float))
    lo, hi = _RANGES[key]
    if v is not None:
        (untrusted.integer(v, key, int(lo), int(hi)) if whole
         else untrusted.number(v, key, lo, hi))
    return v


def outcome_from_json(data: Mapping[str, Any]) -> CellOutcome:
    """A CellOutcome from its ``to_json`` form, every field checked (types, numbers in range)."""
    return CellOutcome(
        cell_id=str(data["cell"]),
        status=Status(data.get("status")),
        end=End(data.get("end")),
        reason=_opt(data, "reason", str) or "",
        duration_s=float(_num(data, "duration_s", False) or 0.0),
        peak_rss_bytes=_num(data, "peak_rss_bytes", True),
        disk_bytes=_num(data, "disk_bytes", True),
        wheel=_opt(data, "wheel", str),
        wheel_size=_num(data, "wheel_size", True),
        version=_opt(data, "version", str),
        project=_opt(data, "project", str),
        cache_hit_rate=_num(data, "cache_hit_rate", False),
        tflops=_num(data, "tflops", False),
        exit_code=_num(data, "exit_code", True),
        log=_opt(data, "log", str) or "",
        promoted=bool(_opt(data, "promoted", bool)),
        validation=Validation.parse(_opt(data, "validation", str) or ""),
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
