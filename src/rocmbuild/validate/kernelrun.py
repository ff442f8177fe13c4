"""The kernel gate's result as rocmbuild reads it back: ``KernelRun`` and its parts.

The gate (``kernelgate``, run inside the validation venv) writes plain JSON with its own status
strings (``passed``/``failed``/``skipped``); ``KernelRun.from_json`` is the one place that reads
it, mapping them to ``results.Status``. ``to_json`` writes the same keys back, so a validate
report can itself be read again (``--baseline``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocmbuild.artifacts.results import Status

DIRECTIONS = ("fwd", "bwd")


def _opt_float(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


def _opt_int(x: object) -> int | None:
    return None if x is None else int(x)  # type: ignore[call-overload]


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Device:
    """The GPU the gate ran on (torch.cuda's view of it)."""

    name: str
    arch: str = ""
    memory_gib: float | None = None
    multiprocessors: int | None = None
    l2_bytes: int | None = None
    torch: str | None = None
    hip: str | None = None
    cuda: str | None = None
    peak_tflops: float | None = None  # dense bf16/fp16 matrix peak, None when unknown
    model: str | None = None  # identified model (kernelgate.timing.identify), None: unknown
    peak_source: str = ""  # where the peak comes from, or why none is shown
    peak_estimated: bool = False  # no vendor data sheet behind the peak

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Device:
        return cls(name=str(d.get("name") or ""), arch=str(d.get("arch") or ""),
                   memory_gib=_opt_float(d.get("memory_gib")),
                   multiprocessors=_opt_int(d.get("multiprocessors")),
                   l2_bytes=_opt_int(d.get("l2_bytes")), torch=d.get("torch"),
                   hip=d.get("hip"), cuda=d.get("cuda"),
                   peak_tflops=_opt_float(d.get("peak_tflops")),
                   model=d.get("model"), peak_source=str(d.get("peak_source") or ""),
                   peak_estimated=bool(d.get("peak_estimated", False)))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arch": self.arch, "memory_gib": self.memory_gib,
                "multiprocessors": self.multiprocessors, "l2_bytes": self.l2_bytes,
                "torch": self.torch, "hip": self.hip, "cuda": self.cuda,
                "peak_tflops": self.peak_tflops, "model": self.model,
                "peak_source": self.peak_source, "peak_estimated": self.peak_estimated}


@dataclass(frozen=True)
class Timing:
    """One direction (fwd or bwd) of one throughput row: the median of the timed calls."""

    ms: float
    tflops: float
    spread: float = 0.0  # run-to-run spread of the round medians, as a fraction
    pct_peak: float | None = None
    do_bench_ms: float | None = None  # --cross-check with triton.testing.do_bench
    host_launch_ms: float | None = None
    padded: bool = False  # each call was preceded by a device busy-wait
    samples: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Timing:
        return cls(ms=float(d["ms"]), tflops=float(d["tflops"]),
                   spread=float(d.get("spread") or 0.0), pct_peak=_opt_float(d.get("pct_peak")),
                   do_bench_ms=_opt_float(d.get("do_bench_ms")),
                   host_launch_ms=_opt_float(d.get("host_launch_ms")),
                   padded=bool(d.get("padded", False)), samples=int(d.get("samples") or 0))

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"ms": self.ms, "spread": self.spread, "tflops": self.tflops,
                           "host_launch_ms": self.host_launch_ms, "padded": self.padded,
                           "samples": self.samples, "do_bench_ms": self.do_bench_ms,
                           "pct_peak": self.pct_peak})


@dataclass(frozen=True)
class PerfRow:
    """One shape timed for one kernel: the kernel under test (role "test") or torch SDPA beside
    it (role "sdpa"). A shape the kernel does not support has ``skipped``; a crash ``error``."""

    shape: str
    kernel: str
    role: str = "test"
    fwd: Timing | None = None
    bwd: Timing | None = None
    first_call_fwd_ms: float | None = None  # includes JIT compilation / autotuning
    first_call_bwd_ms: float | None = None
    input_sets: int | None = None
    input_bytes: int | None = None
    dtype: str | None = None
    batch: int | None = None
    seqlen: int | None = None
    heads: int | None = None
    head_dim: int | None = None
    causal: bool | None = None
    skipped: str = ""
    error: str = ""

    def timing(self, direction: str) -> Timing | None:
        return self.fwd if direction == "fwd" else self.bwd

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PerfRow:
        def timing(key: str) -> Timing | None:
            return Timing.from_json(d[key]) if isinstance(d.get(key), Mapping) else None

        return cls(shape=str(d["shape"]), kernel=str(d.get("kernel") or ""),
                   role=str(d.get("role") or "test"), fwd=timing("fwd"), bwd=timing("bwd"),
                   first_call_fwd_ms=_opt_float(d.get("first_call_fwd_ms")),
                   first_call_bwd_ms=_opt_float(d.get("first_call_bwd_ms")),
                   input_sets=_opt_int(d.get("input_sets")),
                   input_bytes=_opt_int(d.get("input_bytes")), dtype=d.get("dtype"),
                   batch=_opt_int(d.get("batch")), seqlen=_opt_int(d.get("seqlen")),
                   heads=_opt_int(d.get("heads")), head_dim=_opt_int(d.get("head_dim")),
                   causal=None if d.get("causal") is None else bool(d["causal"]),
                   skipped=str(d.get("skipped") or ""), error=str(d.get("error") or ""))

    def to_json(self) -> dict[str, Any]:
        out = _drop_none({
            "shape": self.shape, "kernel": self.kernel, "role": self.role, "dtype": self.dtype,
            "batch": self.batch, "seqlen": self.seqlen, "heads": self.heads,
            "head_dim": self.head_dim, "causal": self.causal, "input_sets": self.input_sets,
            "input_bytes": self.input_bytes, "first_call_fwd_ms": self.first_call_fwd_ms,
            "first_call_bwd_ms": self.first_call_bwd_ms,
            "fwd": self.fwd.to_json() if self.fwd else None,
            "bwd": self.bwd.to_json() if self.bwd else None})
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class CaseRun:
    """One correctness case: relative errors against the fp64 reference and their bounds."""

    case: str
    dtype: str
    status: Status
    reason: str = ""
    errors: dict[str, float] = field(default_factory=dict)  # out, dq, dk, dv
    tolerance: dict[str, float] = field(default_factory=dict)
    finite: bool = True
    row_errors: dict[str, float] = field(default_factory=dict)  # the worst row of each tensor
    row_tolerance: dict[str, float] = field(default_factory=dict)
    worst_row: dict[str, tuple[int, ...]] = field(default_factory=dict)  # [b, s, h] / [t, h]
    fault_changed: bool | None = None  # --inject-fault: the fault changed this case's output

    @property
    def worst(self) -> float | None:
        """The largest error / tolerance ratio, global or per row (> 1 fails), None when
        nothing was measured."""
        ratios = [e / self.tolerance[n] for n, e in self.errors.items()
                  if self.tolerance.get(n)]
        ratios += [e / self.row_tolerance[n] for n, e in self.row_errors.items()
                   if self.row_tolerance.get(n)]
        return max(ratios, default=None)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CaseRun:
        return cls(case=str(d["case"]), dtype=str(d.get("dtype") or ""),
                   status=Status.parse(d["status"]), reason=str(d.get("reason") or ""),
                   errors={str(k): float(v) for k, v in (d.get("errors") or {}).items()},
                   tolerance={str(k): float(v) for k, v in (d.get("tolerance") or {}).items()},
                   finite=bool(d.get("finite", True)),
                   row_errors={str(k): float(v)
                               for k, v in (d.get("row_errors") or {}).items()},
                   row_tolerance={str(k): float(v)
                                  for k, v in (d.get("row_tolerance") or {}).items()},
                   worst_row={str(k): tuple(int(i) for i in v)
                              for k, v in (d.get("worst_row") or {}).items()},
                   fault_changed=None if d.get("fault_changed") is None
                   else bool(d["fault_changed"]))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "case": self.case, "dtype": self.dtype, "status": self.status.value,
            "reason": self.reason, "errors": dict(self.errors),
            "tolerance": dict(self.tolerance), "finite": self.finite}
        if self.row_errors:
            out |= {"row_errors": dict(self.row_errors),
                    "row_tolerance": dict(self.row_tolerance),
                    "worst_row": {k: list(v) for k, v in self.worst_row.items()}}
        if self.fault_changed is not None:
            out["fault_changed"] = self.fault_changed
        return out


@dataclass(frozen=True)
class BaselineRow:
    """One shape and direction against the baseline. SKIPPED: the baseline lacks it."""

    shape: str
    direction: str
    role: str
    tflops: float
    baseline_tflops: float | None
    status: Status
    drop: float | None = None  # fraction below the baseline (negative: faster)
    allowed_drop: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape, "direction": self.direction, "role": self.role,
                "tflops": self.tflops, "baseline_tflops": self.baseline_tflops,
                "status": self.status.value, "drop": self.drop,
                "allowed_drop": self.allowed_drop}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BaselineRow:
        return cls(shape=str(d["shape"]), direction=str(d["direction"]),
                   role=str(d.get("role") or "test"), tflops=float(d["tflops"]),
                   baseline_tflops=_opt_float(d.get("baseline_tflops")),
                   status=_row_status(d.get("status")), drop=_opt_float(d.get("drop")),
                   allowed_drop=_opt_float(d.get("allowed_drop")))


def _row_status(text: object) -> Status:
    # Reports written before one vocabulary said "ok" and "new" for a baseline row.
    return {"ok": Status.SUCCESS, "new": Status.SKIPPED}.get(str(text)) or Status.parse(text)


@dataclass(frozen=True)
class BaselineComparison:
    """A kernel run against the same kernel's run in a baseline report (baseline.compare)."""

    status: Status
    problems: tuple[str, ...] = ()
    rows: tuple[BaselineRow, ...] = ()
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value, "problems": list(self.problems),
                               "rows": [r.to_json() for r in self.rows]}
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BaselineComparison:
        return cls(status=Status.parse(d["status"]),
                   problems=tuple(str(p) for p in d.get("problems") or ()),
                   rows=tuple(BaselineRow.from_json(r) for r in d.get("rows") or ()),
                   reason=str(d.get("reason") or ""))


@dataclass(frozen=True)
class KernelRun:
    """One kernel gate run (one kernel, optionally with an injected fault)."""

    kernel: str
    status: Status  # SUCCESS, FAILED, or SKIPPED (no GPU, kernel not importable here)
    reason: str = ""
    fault: str | None = None
    quick: bool = False
    host: str = ""
    seed: int | None = None
    device: Device | None = None
    throughput: tuple[PerfRow, ...] = ()
    correctness: tuple[CaseRun, ...] = ()
    failures: tuple[str, ...] = ()
    traceback: str = ""
    baseline: BaselineComparison | None = None

    @property
    def why(self) -> str:
        """The reason, else the first failures: one line for a summary."""
        return self.reason or "; ".join(self.failures[:3])

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> KernelRun:
        """Read the gate's JSON (or a run inside a validate report). Raises ValueError, KeyError
        or TypeError on a malformed one."""
        if not isinstance(d, Mapping):
            raise TypeError(f"a kernel run is a JSON object, not {type(d).__name__}")
        dev = d.get("device")
        base = d.get("baseline")
        return cls(kernel=str(d["kernel"]), status=Status.parse(d["status"]),
                   reason=str(d.get("reason") or ""), fault=d.get("fault"),
                   quick=bool(d.get("quick", False)), host=str(d.get("host") or ""),
                   seed=_opt_int(d.get("seed")),
                   device=Device.from_json(dev) if isinstance(dev, Mapping) else None,
                   throughput=tuple(PerfRow.from_json(e) for e in d.get("throughput") or ()),
                   correctness=tuple(CaseRun.from_json(c) for c in d.get("correctness") or ()),
                   failures=tuple(str(f) for f in d.get("failures") or ()),
                   traceback=str(d.get("traceback") or ""),
                   baseline=BaselineComparison.from_json(base)
                   if isinstance(base, Mapping) else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel, "fault": self.fault, "quick": self.quick, "host": self.host,
            "status": self.status.value, "reason": self.reason, "seed": self.seed,
            "device": self.device.to_json() if self.device else None,
            "throughput": [e.to_json() for e in self.throughput],
            "correctness": [c.to_json() for c in self.correctness],
            "failures": list(self.failures)}
        if self.traceback:
            out["traceback"] = self.traceback
        if self.baseline is not None:
            out["baseline"] = self.baseline.to_json()
        return out
