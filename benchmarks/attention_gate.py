"""Prove the attention gate on a GPU and record its numbers (run on the H200 device machine).

    PYTHONPATH=src python benchmarks/attention_gate.py --out OUT [--wheel flash_attn-...whl]
        [--bad-wheel unpatched.whl] [--full-flash-attn]

1. torch SDPA (flash backend) as the kernel under test: full matrix, throughput with a
   triton.testing.do_bench cross-check (agreement must be within 3 %).
2. Injected faults (scaled output, dropped causal mask, a NaN): each run must FAIL.
3. Baseline gate: a second SDPA run against the first must pass; against a baseline with 30 %
   higher TFLOP/s it must fail.
4. The flash-attn wheel (quick, then optionally the full matrix), with the SDPA comparison.
Prints a summary table last; full JSON/HTML reports go to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rocmbuild.core.run import run


def validate(out: Path, tag: str, *args: str, timeout: float = 600) -> tuple[int, dict]:
    j = out / f"{tag}.json"
    argv = [sys.executable, "-m", "rocmbuild", "--workdir", str(out / "ws"), "validate",
            "--json-file", str(j), "--html", str(out / f"{tag}.html"), *args]
    t0 = time.monotonic()
    r = run(argv, check=False, timeout=timeout, log_path=out / f"{tag}.log")
    print(f"[{tag}] exit {r.returncode} in {time.monotonic() - t0:.0f}s", file=sys.stderr,
          flush=True)
    data = json.loads(j.read_text()) if j.is_file() else {}
    return r.returncode, data


def agreement(data: dict) -> list[tuple[str, str, float, float, float]]:
    rows = []
    for run_ in data.get("kernels", {}).get("runs", []):
        for e in run_.get("throughput") or []:
            for d in ("fwd", "bwd"):
                if d in e and e[d].get("do_bench_ms"):
                    ms, db = e[d]["ms"], e[d]["do_bench_ms"]
                    pad = " (padded)" if e[d].get("padded") else ""
                    rows.append((f"{e['kernel']} {e['shape']}{pad}", d, ms, db,
                                 100 * (ms - db) / db))
    return rows


def perf(data: dict) -> list[str]:
    lines = []
    for run_ in data.get("kernels", {}).get("runs", []):
        for e in run_.get("throughput") or []:
            for d in ("fwd", "bwd"):
                if d in e:
                    x = e[d]
                    lines.append(f"{e['kernel']:<11} {e['shape']:<32} {d} {x['tflops']:7.1f} "
                                 f"TFLOP/s {x.get('pct_peak', 0):5.1f}% peak spread "
                                 f"{x['spread']:.1%} first {e.get(f'first_call_{d}_ms', 0):.0f} ms")
    return lines


def cases_summary(data: dict) -> str:
    out = []
    for run_ in data.get("kernels", {}).get("runs", []):
        cs = run_.get("correctness") or []
        worst = {}
        for c in cs:
            for n, v in c["errors"].items():
                key = (c["dtype"], "fwd" if n == "out" else "bwd")
                worst[key] = max(worst.get(key, 0.0), v)
        n_ok = sum(c["status"] in ("success", "passed") for c in cs)  # "passed": older reports
        n_skip = sum(c["status"] == "skipped" for c in cs)
        out.append(f"{run_.get('kernel')}: {n_ok}/{len(cs)} passed, {n_skip} skipped; worst rel "
                   "err " + ", ".join(f"{k[0]} {k[1]} {v:.2e}" for k, v in sorted(worst.items())))
    return "; ".join(out)


def _baseline_steps(out: Path, summary: list[str]) -> None:
    rc, base = validate(out, "sdpa-quick-1", "--kernel", "sdpa", "--quick")
    rc2, d = validate(out, "sdpa-quick-2", "--kernel", "sdpa", "--quick", "--baseline",
                      str(out / "sdpa-quick-1.json"))
    summary.append(f"baseline same-host rerun: exit {rc2} status {d.get('status')}")
    inflated = json.loads((out / "sdpa-quick-1.json").read_text())
    for run_ in inflated["kernels"]["runs"]:
        for e in run_.get("throughput") or []:
            for dd in ("fwd", "bwd"):
                if dd in e:
                    e[dd]["tflops"] *= 1.3
    (out / "inflated-baseline.json").write_text(json.dumps(inflated))
    rc3, d = validate(out, "sdpa-quick-3", "--kernel", "sdpa", "--quick", "--baseline",
                      str(out / "inflated-baseline.json"))
    summary.append(f"baseline 30% higher: exit {rc3} status {d.get('status')} "
                   f"({(d.get('failures') or ['-'])[-1][:160]})")


class _Summary(list):
    """Printed and written as each step finishes, so a killed run still leaves its results."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def append(self, line: str) -> None:  # type: ignore[override]
        super().append(line)
        print("SUMMARY:", line, file=sys.stderr, flush=True)
        self.path.write_text("\n".join(self) + "\n")


def markdown(perf_lines: list[str], agree: list[tuple[str, str, float, float, float]],
             summary: list[str], out: Path) -> None:
    """The run as Markdown on stdout: the steps' outcomes, throughput, do_bench agreement."""
    print(f"Raw reports: `{out}` (JSON and HTML per step).")
    print()
    print("| step | outcome |")
    print("|---|---|")
    for s in summary:
        step, _, rest = s.partition(":")
        print(f"| {step} | {rest.strip().replace('|', '/')} |")
    if perf_lines:
        print()
        print("```text")
        print("\n".join(perf_lines))
        print("```")
    if agree:
        print()
        print("| shape | dir | events median ms | do_bench median ms | diff |")
        print("|---|---|---|---|---|")
        for name, d, ms, db, pct in agree:
            print(f"| {name} | {d} | {ms:.4f} | {db:.4f} | {pct:+.1f} % |")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--wheel", default=None)
    p.add_argument("--bad-wheel", default=None)
    p.add_argument("--full-flash-attn", action="store_true")
    p.add_argument("--markdown", action="store_true",
                   help="print Markdown tables on stdout (benchmarks/run.py) and the rest on "
                        "stderr")
    p.add_argument("--steps", default="sdpa,faults,baseline,unpatched,fa-quick,fa-full",
                   help="comma-separated subset of the steps to run")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = _Summary(out / "summary.txt")

    steps = set(a.steps.split(","))
    sdpa: dict = {}
    fa: dict = {}
    agree: list[tuple[str, str, float, float, float]] = []
    if a.wheel and "fa-full" in steps and "fa-quick" not in steps:
        base = ["--baseline", str(out / "fa-quick.json")] if (out / "fa-quick.json").is_file() \
            else []
        rc, fa = validate(out, "fa-full", a.wheel, "--keep-broken", "--cross-check", *base,
                          timeout=float(os.environ.get("FA_FULL_TIMEOUT", "400")))
        summary.append(f"flash-attn full: exit {rc} status {fa.get('status')} :: "
                       f"{cases_summary(fa)} :: {(fa.get('failures') or ['-'])[0][:300]}")
        agree += agreement(fa)
    if "sdpa" in steps:
        rc, sdpa = validate(out, "sdpa", "--kernel", "sdpa", "--cross-check")
        summary.append(f"sdpa full: exit {rc} status {sdpa.get('status')} :: "
                       f"{cases_summary(sdpa)}")
        agree += agreement(sdpa)
    for fault in ("scale", "no-causal", "nan") if "faults" in steps else ():
        rc, d = validate(out, f"fault-{fault}", "--kernel", "sdpa", "--quick",
                         "--inject-fault", fault)
        fails = d.get("kernels", {}).get("runs", [{}])[0].get("failures", [])
        summary.append(f"fault {fault}: exit {rc} status {d.get('status')} "
                       f"({len(fails)} failures; first: {fails[0] if fails else '-'})")
    if "baseline" in steps:
        _baseline_steps(out, summary)
    if a.bad_wheel and "unpatched" in steps:
        rc, d = validate(out, "fa-unpatched", a.bad_wheel, "--quick", "--keep-broken",
                         timeout=300)
        summary.append(f"flash-attn UNPATCHED quick: exit {rc} status {d.get('status')} "
                       f"({(d.get('failures') or ['-'])[0][:200]})")
    if a.wheel and "fa-quick" in steps:
        rc, fa = validate(out, "fa-quick", a.wheel, "--quick", "--cross-check", "--keep-broken",
                          timeout=600)
        summary.append(f"flash-attn quick: exit {rc} status {fa.get('status')} :: "
                       f"{cases_summary(fa)} :: {(fa.get('failures') or ['-'])[0][:300]}")
        agree += agreement(fa)
        if a.full_flash_attn and rc == 0:
            rc, full = validate(out, "fa-full", a.wheel, "--keep-broken",
                                "--baseline", str(out / "fa-quick.json"),
                                timeout=float(os.environ.get("FA_FULL_TIMEOUT", "400")))
            summary.append(f"flash-attn full: exit {rc} status {full.get('status')} :: "
                           f"{cases_summary(full)} :: {(full.get('failures') or ['-'])[0][:300]}")
            if full:
                fa = full
    if a.markdown:
        markdown(perf(sdpa) + perf(fa), agree, list(summary), out)
        return 0
    print("\n==== throughput ====")
    for line in perf(sdpa) + perf(fa):
        print(line)
    print("\n==== events median vs triton do_bench median ====")
    for name, d, ms, db, pct in agree:
        print(f"{name:<54} {d} {ms:8.4f} ms  do_bench {db:8.4f} ms  diff {pct:+5.2f}%")
    print("\n==== summary ====")
    for s in summary:
        print(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
