"""Baseline comparison: this run's kernel throughput against the last good run on the same
host/arch (``validate --baseline LAST_GOOD.json``).

A shape fails when its TFLOP/s dropped by more than max(10 %, 3x the measured run-to-run spread),
where the spread is the larger of this run's and the baseline's. Any correctness failure fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.core import untrusted
from rocmbuild.core.errors import UsageError
from rocmbuild.core.fsutil import write_atomic
from rocmbuild.validate.kernelrun import BaselineComparison, BaselineRow, KernelRun, Timing

MIN_DROP = 0.10
SPREAD_FACTOR = 3.0
_HINT = "pass the JSON report (--json) of the last good run"
MAX_FILE = 64 << 20
"""The largest baseline report or store read (bytes)."""
MAX_TFLOPS = 1e6
"""The most TFLOP/s a baseline figure may claim (a GPU of today does a few thousand)."""
MAX_SPREAD = 100.0
"""The largest run-to-run spread (a fraction) a baseline figure may claim."""
MAX_MS = 1e9


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


def _check_run(run: KernelRun, where: str) -> KernelRun:
    """``run`` when every figure of its throughput is a finite number in range (a baseline's
    figures divide and compare); else BadJson naming the key."""
    for i, row in enumerate(run.throughput):
        for d in ("fwd", "bwd"):
            t = row.timing(d)
            if t is not None:
                at = f"{where}throughput[{i}].{d}."
                untrusted.number(t.tflops, at + "tflops", 0.0, MAX_TFLOPS)
                untrusted.number(t.spread, at + "spread", 0.0, MAX_SPREAD)
                untrusted.number(t.ms, at + "ms", 0.0, MAX_MS)
    return run


def read_runs(data: object, source: str) -> tuple[KernelRun, ...]:
    """The kernel runs in a validate report's JSON, or a bare kernel gate JSON."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: not a validate report (a JSON object)", hint=_HINT)
    try:
        if "throughput" in data:  # a bare kernel run
            return (_check_run(KernelRun.from_json(data), ""),)
        if "kernels" not in data:
            raise UsageError(f"{source}: key 'kernels' missing; not a validate report",
                             hint=_HINT)
        runs = untrusted.obj(data["kernels"], "kernels").get("runs") or ()
        if not isinstance(runs, list):
            raise untrusted.BadJson("kernels.runs: expected a list")
        return tuple(_check_run(KernelRun.from_json(r), f"kernels.runs[{i}].")
                     for i, r in enumerate(runs))
    except untrusted.BadJson as exc:
        raise UsageError(f"{source}: {exc}", hint=_HINT) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{source}: not a readable validate report ({type(exc).__name__}: "
                         f"{str(exc)[:200]})", hint=_HINT) from None


def load_baseline(path: Path) -> tuple[KernelRun, ...]:
    try:
        data = untrusted.read_json(path, MAX_FILE)
    except FileNotFoundError:
        raise UsageError(f"--baseline {path}: no such file", hint=_HINT) from None
    except OSError as exc:
        raise UsageError(f"--baseline {path}: cannot read: {exc.strerror or exc}",
                         hint=_HINT) from None
    except untrusted.BadJson as exc:
        raise UsageError(f"--baseline {path}: {exc}", hint=_HINT) from None
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


# ------------------------------------------------------------------ the workspace's baseline store
# <workdir>/baselines/throughput.json: for each device, kernel (with the wheel's variant), shape
# and direction, the figures of the last STORE_KEEP accepted (passing) validations. The next
# validation on the same device compares with the best of them automatically; --baseline FILE
# overrides. `build --validate` and nightly rebuilds go through the same validate.run, so they
# share the store.

STORE_KEEP = 5
STORE_VERSION = 1
FIRST_RUN = "first run on this device: baseline recorded"


def store_path(workdir: Path) -> Path:
    return workdir / "baselines" / "throughput.json"


def _store_key(device: str, kernel: str, variant: str, shape: str, direction: str,
               role: str) -> str:
    return " | ".join((device, f"{kernel}:{variant}" if variant else kernel, role, shape,
                       direction))


_STORE_HINT = ("move the file away (the next passing run starts a new store), "
               "or pass --no-baseline-store")


def read_store(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The store's entries, each figure checked (a finite number in range); a missing file is
    empty; an unreadable one is a UsageError naming it and the key (it is never silently
    replaced)."""
    try:
        data = untrusted.read_json(path, MAX_FILE)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"baseline store {path}: unreadable ({exc.strerror or exc})",
                         hint=_STORE_HINT) from None
    except untrusted.BadJson as exc:
        raise UsageError(f"baseline store {path}: unreadable ({exc})", hint=_STORE_HINT) from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise UsageError(f"baseline store {path}: key 'entries' missing",
                         hint="move the file away, or pass --no-baseline-store")
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for k, v in entries.items():
            if not isinstance(v, list):
                continue
            out[k] = []
            for i, e in enumerate(v):
                if not isinstance(e, dict):
                    continue
                at = f"entries[{k[:60]!r}][{i}]."
                untrusted.number(e.get("tflops") or 0.0, at + "tflops", 0.0, MAX_TFLOPS)
                untrusted.number(e.get("spread") or 0.0, at + "spread", 0.0, MAX_SPREAD)
                out[k].append(e)
    except untrusted.BadJson as exc:
        raise UsageError(f"baseline store {path}: {exc}", hint=_STORE_HINT) from None
    return out


def compare_store(current: KernelRun, store: Mapping[str, list[dict[str, Any]]],
                  variant: str) -> BaselineComparison:
    """This run against the best of the last accepted runs on the same device, per shape and
    direction. SKIPPED with FIRST_RUN when the store has nothing for this device and kernel."""
    device = current.device.name if current.device else ""
    if not device or current.status is Status.SKIPPED:
        return BaselineComparison(Status.SKIPPED, reason="no device: nothing to compare")
    problems: list[str] = []
    rows: list[BaselineRow] = []
    found = False
    for (role, shape, d), now in _entries(current).items():
        hist = store.get(_store_key(device, current.kernel, variant, shape, d, role)) or []
        best = max(hist, key=lambda e: float(e.get("tflops") or 0.0), default=None)
        if best is None or not best.get("tflops"):
            rows.append(BaselineRow(shape, d, role, now.tflops, None, Status.SKIPPED))
            continue
        found = True
        b_tflops, b_spread = float(best["tflops"]), float(best.get("spread") or 0.0)
        drop = (b_tflops - now.tflops) / b_tflops
        limit = allowed_drop(now.spread, b_spread)
        failed = role == "test" and drop > limit
        if failed:
            problems.append(f"{shape} {d}: {now.tflops:.1f} TFLOP/s is {drop:.1%} below the "
                            f"best of the last {len(hist)} accepted run(s) on this device "
                            f"({b_tflops:.1f}, allowed {limit:.1%})")
        rows.append(BaselineRow(shape, d, role, now.tflops, b_tflops,
                                Status.FAILED if failed else Status.SUCCESS, drop, limit))
    if not found:
        return BaselineComparison(Status.SKIPPED, rows=tuple(rows), reason=FIRST_RUN)
    return BaselineComparison(Status.FAILED if problems else Status.SUCCESS, tuple(problems),
                              tuple(rows), reason="against the workspace's baseline store")


def record(path: Path, runs: Sequence[KernelRun], variant: str, created: str) -> int:
    """Add the figures of an accepted validation (every run passed) to the store, keeping the
    last STORE_KEEP per key; returns how many figures were added. The gate's report is a
    child's output like any other: a run with a figure out of range (``_check_run``, as
    ``read_store`` checks them back) is not stored, with a warning, so one bad report never
    makes the store unreadable."""
    from rocmbuild.core import log

    store = read_store(path)
    added = 0
    for i, run in enumerate(runs):
        if run.status is not Status.SUCCESS or not run.device or run.fault:
            continue
        try:
            _check_run(run, f"kernels.runs[{i}].")
        except untrusted.BadJson as exc:
            log.warn(f"baseline store {path}: the kernel gate's figures not recorded: {exc}")
            continue
        for (role, shape, d), t in _entries(run).items():
            key = _store_key(run.device.name, run.kernel, variant, shape, d, role)
            hist = [*store.get(key, []), {"tflops": t.tflops, "spread": t.spread,
                                          "ms": t.ms, "created": created}]
            store[key] = hist[-STORE_KEEP:]
            added += 1
    if added:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"version": STORE_VERSION, "entries": store},
                                      indent=1, sort_keys=True))
    return added


# ---------------------------------------------------------------- the recipe's floors per arch


def floor_for(provenance: Mapping[str, Any] | None, arch: str) -> dict[str, float]:
    """The wheel's recorded [validate.floor.<arch>] for the device's arch ({} when none)."""
    floors = (provenance or {}).get("validate_floor") or {}
    got = floors.get(arch) if isinstance(floors, Mapping) else None
    if not isinstance(got, Mapping):
        return {}
    return {str(k): float(v) for k, v in got.items()
            if k in ("fwd_tflops", "bwd_tflops", "sdpa_fraction") and isinstance(v, int | float)}


def check_floor(run: KernelRun, floor: Mapping[str, float]) -> list[str]:
    """Each throughput shape of the kernel under test against the recipe's absolute floors:
    fwd/bwd TFLOP/s, and a fraction of torch SDPA's on the same shape in the same run."""
    problems: list[str] = []
    sdpa = {(e.shape, d): t.tflops for e in run.throughput if e.role == "sdpa"
            for d in ("fwd", "bwd") if (t := e.timing(d)) is not None}
    arch = run.device.arch if run.device else "?"
    for e in run.throughput:
        if e.role != "test":
            continue
        for d in ("fwd", "bwd"):
            t = e.timing(d)
            if t is None:
                continue
            need = floor.get(f"{d}_tflops")
            if need and t.tflops < need:
                problems.append(f"{e.shape} {d}: {t.tflops:.1f} TFLOP/s is below the recipe's "
                                f"floor for {arch} ({need:g}, [validate.floor.{arch}] "
                                f"{d}_tflops)")
            frac, ref = floor.get("sdpa_fraction"), sdpa.get((e.shape, d))
            if frac and ref and t.tflops < frac * ref:
                problems.append(f"{e.shape} {d}: {t.tflops:.1f} TFLOP/s is {t.tflops / ref:.0%} "
                                f"of torch SDPA's {ref:.1f} on this device, below the recipe's "
                                f"floor of {frac:.0%} ([validate.floor.{arch}] sdpa_fraction)")
    return problems
