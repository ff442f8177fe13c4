"""The whole gate in this process: throughput (with torch SDPA beside the kernel under test),
then the correctness matrix. ``main`` is the command line the validation venv runs; it always
writes the JSON report, even when the gate itself crashes."""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import traceback
from dataclasses import asdict
from typing import Any

from . import ADAPTER_NAMES, FAULTS, adapters, matrix, reference, timing


def gate(kernel: str, *, fault: str | None = None, quick: bool = False,
         correctness: bool = True, throughput: bool = True, compare_sdpa: bool = True,
         cross_check: bool = False, repeats: int = 20, rounds: int = 3) -> dict[str, Any]:
    """Run the whole kernel gate in this process; returns a JSON-able dict with a status of
    'passed', 'failed' or 'skipped' (never 'passed' when nothing ran)."""
    result: dict[str, Any] = {"kernel": kernel, "fault": fault, "quick": quick,
                              "host": platform.node()}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return {**result, "status": "skipped", "reason": f"torch cannot be imported: {exc}"}
    if not torch.cuda.is_available():
        return {**result, "status": "skipped",
                "reason": f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__})"}
    adapter = adapters.make_adapter(kernel, fault)
    why = adapter.available()
    if why:
        return {**result, "status": "skipped", "reason": why}
    dev = timing.device_info()
    result["device"] = dev
    if dev["peak_tflops"] is None:
        result["notes"] = [f"{dev['name']} ({dev['arch']}, {dev['multiprocessors']} CUs): "
                           f"{timing.UNKNOWN}"]
    seed = time.time_ns() % (2**63)
    result["seed"] = seed
    gen = torch.Generator(device="cuda").manual_seed(seed)
    failures: list[str] = []
    if throughput:
        perf: list[dict[str, Any]] = []
        for shape in matrix.perf_shapes(quick):
            others: list[adapters.Adapter] = (
                [adapters.SdpaAdapter()] if compare_sdpa and kernel != "sdpa" else [])
            for a in [adapter, *others]:
                try:
                    e = timing.measure_shape(a, shape, gen, repeats, rounds, cross_check,
                                             (dev["l2_bytes"] or 0) + dev["llc_bytes"])
                except NotImplementedError as exc:
                    e = {"shape": shape.name, "kernel": a.name, "skipped": str(exc)}
                except Exception as exc:  # noqa: BLE001 - a crash is a failure with its text
                    e = {"shape": shape.name, "kernel": a.name, "error": _short(exc)}
                    if a is adapter:
                        failures.append(f"throughput {shape.name}: {_short(exc)}")
                e["role"] = "test" if a is adapter else "sdpa"
                for d in ("fwd", "bwd"):
                    if d in e and dev["peak_tflops"]:
                        e[d]["pct_peak"] = 100.0 * e[d]["tflops"] / dev["peak_tflops"]
                perf.append(e)
        result["throughput"] = perf
    if correctness:
        cases: list[dict[str, Any]] = []
        for case in matrix.correctness_matrix(quick):
            try:
                r = reference.run_case(adapter, case, gen)
            except NotImplementedError as exc:
                r = reference.CaseResult(case.name, case.dtype, "skipped",
                                         f"{adapter.name}: {exc}")
            except Exception as exc:  # noqa: BLE001
                r = reference.CaseResult(case.name, case.dtype, "failed", _short(exc))
            if r.status == "failed":
                failures.append(f"{r.case}: {r.reason}")
            cases.append(asdict(r))
            torch.cuda.empty_cache()
        result["correctness"] = cases
    result["failures"] = failures
    result["status"] = "failed" if failures else "passed"
    return result


def _short(exc: BaseException) -> str:
    lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _plain(x: Any) -> Any:
    """``x`` with every non-finite float as a string ("inf", "nan"): the report is plain JSON
    (the parent refuses NaN/Infinity), and the parent's float() reads them back."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="attention kernel gate (runs inside the venv)")
    p.add_argument("--kernel", default="flash-attn", choices=sorted(ADAPTER_NAMES))
    p.add_argument("--inject-fault", choices=FAULTS, default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-correctness", action="store_true")
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument("--no-sdpa", action="store_true", help="skip the SDPA comparison")
    p.add_argument("--cross-check", action="store_true", help="also time with triton do_bench")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", required=True)
    a = p.parse_args(argv)
    try:
        res = gate(a.kernel, fault=a.inject_fault, quick=a.quick,
                   correctness=not a.no_correctness, throughput=not a.no_throughput,
                   compare_sdpa=not a.no_sdpa, cross_check=a.cross_check,
                   repeats=max(20, a.repeats), rounds=max(2, a.rounds))
    except Exception as exc:  # noqa: BLE001 - the parent reads the JSON, so always write it
        res = {"kernel": a.kernel, "status": "failed", "reason": _short(exc),
               "traceback": traceback.format_exc()}
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(_plain(res), f, indent=1, default=str)
    print(f"kernel gate: {res['status']}", res.get("reason", ""), file=sys.stderr)
    return 0
