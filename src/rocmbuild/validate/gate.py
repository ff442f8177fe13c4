"""Baseline gate: this run's kernel throughput against the last good run on the same host/arch.

A shape fails when its TFLOP/s dropped by more than max(10 %, 3x the measured run-to-run spread),
where the spread is the larger of this run's and the baseline's. Any correctness failure fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocmbuild.errors import UsageError

MIN_DROP = 0.10
SPREAD_FACTOR = 3.0


def allowed_drop(spread_now: float, spread_base: float) -> float:
    return max(MIN_DROP, SPREAD_FACTOR * max(spread_now or 0.0, spread_base or 0.0))


def _entries(kernel_run: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for e in kernel_run.get("throughput") or []:
        for d in ("fwd", "bwd"):
            if d in e and e[d].get("tflops"):
                out[(e.get("role", "test"), e["shape"], d)] = e[d]
    return out


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"--baseline {path}: no such file",
                         hint="pass the JSON report (--json) of the last good run") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"--baseline {path}: not valid JSON ({exc})",
                         hint="pass the JSON report (--json) of the last good run") from exc
    if not isinstance(data, dict) or "kernels" not in data:
        raise UsageError(f"--baseline {path}: key 'kernels' missing; not a validate report",
                         hint="pass the JSON report (--json) of the last good run")
    return data


def compare(current: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Compare one kernel run (attention.gate output) with the same kernel in a baseline report
    (or a kernel run). Returns {"status", "problems", "rows"}; rows are per shape and direction."""
    problems: list[str] = []
    rows: list[dict[str, Any]] = []
    base_run = _find_run(baseline, current.get("kernel"))
    if base_run is None:
        return {"status": "skipped", "problems": [],
                "reason": f"baseline has no run of kernel {current.get('kernel')!r}", "rows": []}
    dev_now = (current.get("device") or {}).get("name")
    dev_base = (base_run.get("device") or {}).get("name")
    if dev_now and dev_base and dev_now != dev_base:
        return {"status": "failed", "rows": [],
                "problems": [f"baseline is from device {dev_base!r}, this run is on {dev_now!r}"]}
    if current.get("status") == "failed":
        problems.append("correctness or kernel failures in this run")
    base = _entries(base_run)
    for key, now in _entries(current).items():
        role, shape, d = key
        b = base.get(key)
        row = {"shape": shape, "direction": d, "role": role, "tflops": now["tflops"],
               "baseline_tflops": b["tflops"] if b else None, "status": "new"}
        if b:
            drop = (b["tflops"] - now["tflops"]) / b["tflops"]
            limit = allowed_drop(now.get("spread", 0.0), b.get("spread", 0.0))
            row.update(drop=drop, allowed_drop=limit)
            if role == "test" and drop > limit:
                row["status"] = "failed"
                problems.append(f"{shape} {d}: {now['tflops']:.1f} TFLOP/s is {drop:.1%} below "
                                f"the baseline's {b['tflops']:.1f} (allowed {limit:.1%})")
            else:
                row["status"] = "ok"
        rows.append(row)
    return {"status": "failed" if problems else "passed", "problems": problems, "rows": rows}


def _find_run(baseline: dict[str, Any], kernel: str | None) -> dict[str, Any] | None:
    if "throughput" in baseline:  # a bare kernel run
        return baseline if baseline.get("kernel") == kernel else None
    for run in baseline.get("kernels", {}).get("runs", []):
        if run.get("kernel") == kernel and run.get("status") != "skipped":
            return run
    return None
