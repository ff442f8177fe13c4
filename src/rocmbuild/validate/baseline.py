"""Baseline comparison: this run's kernel throughput against the last good run on the same
host/arch (``validate --baseline LAST_GOOD.json``).

A shape fails when its TFLOP/s dropped by more than max(10 %, 3x the measured run-to-run spread),
where the spread is the larger of this run's and the baseline's. Any correctness failure fails.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rocmbuild.errors import UsageError
from rocmbuild.results import Status
from rocmbuild.validate.kernelrun import BaselineComparison, BaselineRow, KernelRun, Timing

MIN_DROP = 0.10
SPREAD_FACTOR = 3.0
_HINT = "pass the JSON report (--json) of the last good run"


def allowed_drop(spread_now: float, spread_base: float) -> float:
    return max(MIN_DROP, SPREAD_FACTOR * max(spread_now or 0.0, spread_base or 0.0))


def _entries(run: KernelRun) -> dict[tuple[str, str, str], Timing]:
    out = {}
    for e in run.throughput:
        for d in ("fwd", "bwd"):
            t = e.timing(d)
            if t is not None and t.tflops:
                out[(e.role, e.shape, d)] = t
    return out


def read_runs(data: object, source: str) -> tuple[KernelRun, ...]:
    """The kernel runs in a validate report's JSON, or a bare kernel gate JSON."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: not a validate report (a JSON object)", hint=_HINT)
    try:
        if "throughput" in data:  # a bare kernel run
            return (KernelRun.from_json(data),)
        if "kernels" not in data:
            raise UsageError(f"{source}: key 'kernels' missing; not a validate report",
                             hint=_HINT)
        return tuple(KernelRun.from_json(r) for r in data["kernels"].get("runs") or ())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{source}: not a readable validate report ({type(exc).__name__}: "
                         f"{exc})", hint=_HINT) from exc


def load_baseline(path: Path) -> tuple[KernelRun, ...]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"--baseline {path}: no such file", hint=_HINT) from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"--baseline {path}: not valid JSON ({exc})", hint=_HINT) from exc
    return read_runs(data, f"--baseline {path}")


def compare(current: KernelRun, baseline: Sequence[KernelRun]) -> BaselineComparison:
    """Compare one kernel run with the same kernel's run among ``baseline``; rows are per shape
    and direction."""
    base_run = next((r for r in baseline if r.kernel == current.kernel
                     and r.status is not Status.SKIPPED), None)
    if base_run is None:
        return BaselineComparison(Status.SKIPPED,
                                  reason=f"baseline has no run of kernel {current.kernel!r}")
    dev_now = current.device.name if current.device else ""
    dev_base = base_run.device.name if base_run.device else ""
    if dev_now and dev_base and dev_now != dev_base:
        return BaselineComparison(Status.FAILED, problems=(
            f"baseline is from device {dev_base!r}, this run is on {dev_now!r}",))
    problems: list[str] = []
    rows: list[BaselineRow] = []
    if current.status is Status.FAILED:
        problems.append("correctness or kernel failures in this run")
    base = _entries(base_run)
    for key, now in _entries(current).items():
        role, shape, d = key
        b = base.get(key)
        if b is None:
            rows.append(BaselineRow(shape, d, role, now.tflops, None, Status.SKIPPED))
            continue
        drop = (b.tflops - now.tflops) / b.tflops
        limit = allowed_drop(now.spread, b.spread)
        failed = role == "test" and drop > limit
        if failed:
            problems.append(f"{shape} {d}: {now.tflops:.1f} TFLOP/s is {drop:.1%} below "
                            f"the baseline's {b.tflops:.1f} (allowed {limit:.1%})")
        rows.append(BaselineRow(shape, d, role, now.tflops, b.tflops,
                                Status.FAILED if failed else Status.SUCCESS, drop, limit))
    return BaselineComparison(Status.FAILED if problems else Status.SUCCESS, tuple(problems),
                              tuple(rows))
