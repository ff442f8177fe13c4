"""Attention kernel gate: correctness against an fp64 reference, and throughput.

This file runs *inside the validation venv* as a script (``python attention.py --json OUT ...``),
so it imports only the standard library at module level, and torch (plus the kernel under test)
inside functions. The pure helpers (FLOP counting, error metric, tolerances, peak table) are also
imported by the rest of rocmbuild and unit-tested on the CPU.

Kernels under test are adapters (``Adapter``): ``flash-attn`` (flash_attn_func and
flash_attn_varlen_func), ``sdpa`` (torch SDPA, flash backend, the harness's own control) and
``hipattn`` (our HIP probe; AMD hosts only). ``--inject-fault`` wraps any adapter with a
deliberate error (scaled output, dropped causal mask, a NaN) to prove the gate fails.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# ----------------------------------------------------------------------------- pure helpers

# Unit roundoff-ish epsilon of each input dtype (2^-mantissa_bits).
DTYPE_EPS = {"fp16": 2.0**-10, "bf16": 2.0**-7}
# Relative-error tolerances ||out - ref|| / ||ref|| against the fp64 reference. The forward output
# is rounded once to the dtype; the backward rounds P and dS to the dtype before its matmuls, so it
# gets a wider band. Measured on an H200 (docs/benchmarks.md): fp16 fwd ~3e-4, bf16 fwd ~2e-3.
FWD_TOL_EPS = 2.0  # fp16: 1.95e-3, bf16: 1.56e-2
BWD_TOL_EPS = 4.0  # fp16: 3.91e-3, bf16: 3.13e-2


def tolerance(dtype: str, direction: str) -> float:
    """The relative-error bound for ``dtype`` ('fp16'|'bf16') and ``direction`` ('fwd'|'bwd')."""
    if dtype not in DTYPE_EPS:
        raise ValueError(f"no tolerance for dtype {dtype!r}")
    factor = {"fwd": FWD_TOL_EPS, "bwd": BWD_TOL_EPS}[direction]
    return factor * DTYPE_EPS[dtype]


def judge(rel_err: float, tol: float, finite: bool) -> bool:
    """Pass only when every element was finite and the error is within tolerance. NaN never
    passes (comparisons with NaN are False)."""
    return bool(finite) and rel_err == rel_err and rel_err <= tol


def rel_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float64 (torch tensors); inf when ref is zero and out is not."""
    o = out.detach().double()
    r = ref.detach().double()
    num = float((o - r).norm())
    den = float(r.norm())
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def attention_flops(
    batch: int, heads: int, seqlen_q: int, seqlen_k: int, head_dim: int, causal: bool,
    direction: str = "fwd",
) -> float:
    """FLOPs of one attention call: 4*B*H*Sq*Sk*D forward (two matmuls of 2*Sq*Sk*D each), halved
    for causal when Sq == Sk; the backward is 2.5x the forward (five matmuls instead of two)."""
    f = 4.0 * batch * heads * seqlen_q * seqlen_k * head_dim
    if causal and seqlen_q == seqlen_k:
        f /= 2.0
    if direction == "bwd":
        f *= 2.5
    elif direction != "fwd":
        raise ValueError(f"direction must be 'fwd' or 'bwd', not {direction!r}")
    return f


# Dense bf16/fp16 matrix peak in TFLOP/s, matched by substring of the device name or gfx arch.
# MI250X: 383 per package, which ROCm shows as two devices (GCDs) of 191.5 each.
PEAK_TFLOPS: list[tuple[tuple[str, ...], float]] = [
    (("MI355X", "gfx950"), 2500.0),
    (("MI325X",), 1307.0),
    (("MI300X", "gfx942"), 1307.0),
    (("MI250X", "MI250", "gfx90a"), 191.5),
    (("H200", "H100"), 989.0),
]


def peak_tflops(device_name: str, arch: str = "") -> float | None:
    text = f"{device_name} {arch}"
    for keys, peak in PEAK_TFLOPS:
        if any(k.lower() in text.lower() for k in keys):
            return peak
    return None


def median_and_spread(rounds: list[list[float]]) -> tuple[float, float]:
    """Median of all samples, and the run-to-run spread: (max - min) of the per-round medians
    over the overall median."""
    samples = [s for r in rounds for s in r]
    med = statistics.median(samples)
    meds = [statistics.median(r) for r in rounds if r]
    spread = (max(meds) - min(meds)) / med if med > 0 and len(meds) > 1 else 0.0
    return med, spread


# ----------------------------------------------------------------------------- the test matrix


@dataclass(frozen=True)
class Case:
    dtype: str
    head_dim: int
    causal: bool
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads: int
    heads_kv: int
    varlen: tuple[int, ...] = ()  # per-sequence lengths for the varlen entry point

    @property
    def name(self) -> str:
        hk = "" if self.heads_kv == self.heads else f"/{self.heads_kv}"
        kind = "MHA" if not hk else ("MQA" if self.heads_kv == 1 else "GQA")
        c = "causal" if self.causal else "full"
        if self.varlen:
            lens = ",".join(str(n) for n in self.varlen)
            return f"varlen[{lens}] H{self.heads}{hk} D{self.head_dim} {c} {self.dtype} {kind}"
        s = f"S{self.seqlen_q}" if self.seqlen_q == self.seqlen_k else (
            f"Sq{self.seqlen_q} Sk{self.seqlen_k}")
        return f"B{self.batch} {s} H{self.heads}{hk} D{self.head_dim} {c} {self.dtype} {kind}"


# (batch, seqlen_q, seqlen_k, heads, heads_kv): seqlens that are not block multiples, MHA/GQA/MQA.
_SHAPES = [
    (2, 127, 127, 4, 4),
    (2, 1000, 1000, 8, 2),
    (1, 4096, 4096, 4, 1),
    (3, 1, 1000, 8, 8),
]
_VARLEN = (1, 127, 1000, 300)


def correctness_matrix(quick: bool = False) -> list[Case]:
    cases: list[Case] = []
    dtypes = ["fp16", "bf16"]
    dims = [128] if quick else [64, 128, 256]
    i = 0
    for dtype in dtypes:
        for d in dims:
            for causal in (False, True):
                picks = [_SHAPES[i % len(_SHAPES)]] if quick else [
                    _SHAPES[i % len(_SHAPES)], _SHAPES[(i + 1) % len(_SHAPES)]]
                i += 1
                for b, sq, sk, h, hk in picks:
                    cases.append(Case(dtype, d, causal, b, sq, sk, h, hk))
            cases.append(Case(dtype, d, d % 128 == 0, len(_VARLEN), max(_VARLEN), max(_VARLEN),
                              4, 2 if d != 64 else 4, _VARLEN))
    return cases


@dataclass(frozen=True)
class PerfShape:
    dtype: str
    batch: int
    seqlen: int
    heads: int
    head_dim: int
    causal: bool

    @property
    def name(self) -> str:
        c = "causal" if self.causal else "full"
        return f"B{self.batch} S{self.seqlen} H{self.heads} D{self.head_dim} {c} {self.dtype}"


def perf_shapes(quick: bool = False) -> list[PerfShape]:
    shapes = [
        PerfShape("fp16", 4, 4096, 32, 128, False),
        PerfShape("bf16", 4, 4096, 32, 128, True),
    ]
    if not quick:
        shapes += [
            PerfShape("bf16", 2, 8192, 16, 128, True),
            PerfShape("bf16", 8, 2048, 32, 64, False),
            PerfShape("bf16", 2, 4096, 16, 256, False),
            PerfShape("fp16", 2, 1024, 16, 64, False),
        ]
    return shapes


# ----------------------------------------------------------------------------- adapters


class Adapter:
    """A kernel under test. Tensors are (batch, seqlen, heads, head_dim), like flash-attn."""

    name = "?"
    has_varlen = False
    has_backward = True

    def available(self) -> str | None:
        """None when usable here, else the reason it is not."""
        return None

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        raise NotImplementedError

    def forward_varlen(self, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int,
                       max_k: int, causal: bool) -> Any:
        raise NotImplementedError


class SdpaAdapter(Adapter):
    """torch.nn.functional.scaled_dot_product_attention restricted to the flash backend."""

    name = "sdpa"

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if k.shape[2] != q.shape[2]:  # GQA/MQA: the flash backend wants equal heads
            rep = q.shape[2] // k.shape[2]
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
        if causal and q.shape[1] != k.shape[1]:
            raise NotImplementedError("SDPA's causal mask is top-left aligned; use Sq == Sk")
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
        return o.transpose(1, 2)


class FlashAttnAdapter(Adapter):
    """flash_attn.flash_attn_func / flash_attn_varlen_func from the wheel under test."""

    name = "flash-attn"
    has_varlen = True

    def available(self) -> str | None:
        try:
            _flash_attn_module()
        except Exception as exc:  # noqa: BLE001 - report whatever the import raised
            return f"cannot import flash_attn: {type(exc).__name__}: {exc}"
        return None

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        return _flash_attn_module().flash_attn_func(q, k, v, causal=causal)

    def forward_varlen(self, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int,
                       max_k: int, causal: bool) -> Any:
        return _flash_attn_module().flash_attn_varlen_func(
            q, k, v, cu_q, cu_k, max_q, max_k, causal=causal)


def _flash_attn_module() -> Any:
    # The Triton variant is selected at import time by FLASH_ATTENTION_TRITON_AMD_ENABLE, which
    # reaches this process from the wheel's rocmbuild.json ``runtime_env`` (or the user's env).
    import flash_attn

    return flash_attn


class HipAttnAdapter(Adapter):
    """AMD HOSTS ONLY: our HIP attention probe (probes/hip-attention), forward only.

    ``hipattn.forward(q, k, v, o, B, H, S, D, dtype, causal=, scale=, stream=)`` takes device
    pointers of contiguous [B, H, S, D] tensors (Sq == Sk, equal heads, D 64 or 128) and writes
    into a preallocated output, which is poisoned with NaN first. Other cases raise
    NotImplementedError and are reported SKIPPED. Not yet run on AMD hardware; elsewhere it
    reports itself unavailable and the whole run is SKIPPED.
    """

    name = "hipattn"
    has_backward = False

    def available(self) -> str | None:
        import torch

        if not getattr(torch.version, "hip", None):
            return "hipattn is the HIP probe: AMD hosts only (torch.version.hip is None)"
        try:
            import hipattn  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"cannot import hipattn: {exc}"
        return None

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        import hipattn
        import torch

        b, s, h, d = q.shape
        if k.shape != q.shape or d not in (64, 128):
            raise NotImplementedError("the probe needs Sq == Sk, equal heads and D 64 or 128")
        qh, kh, vh = (t.detach().transpose(1, 2).contiguous() for t in (q, k, v))
        out = torch.full_like(qh, float("nan"))  # poisoned: every element must be written
        hipattn.forward(qh.data_ptr(), kh.data_ptr(), vh.data_ptr(), out.data_ptr(), b, h, s, d,
                        q.dtype, causal=causal,
                        stream=torch.cuda.current_stream().cuda_stream)
        return out.transpose(1, 2)


class FaultAdapter(Adapter):
    """Wraps an adapter with a deliberate error, to prove the gate catches it."""

    def __init__(self, inner: Adapter, fault: str) -> None:
        self.inner = inner
        self.fault = fault
        self.name = f"{inner.name}+fault:{fault}"
        self.has_varlen = inner.has_varlen
        self.has_backward = inner.has_backward

    def available(self) -> str | None:
        return self.inner.available()

    def _apply(self, o: Any) -> Any:
        if self.fault == "scale":
            return o * 1.05
        if self.fault == "nan":
            o = o.contiguous().clone()
            o.view(-1)[o.numel() // 2] = float("nan")
            return o
        return o

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        if self.fault == "no-causal":
            causal = False
        return self._apply(self.inner.forward(q, k, v, causal))

    def forward_varlen(self, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int,
                       max_k: int, causal: bool) -> Any:
        if self.fault == "no-causal":
            causal = False
        return self._apply(self.inner.forward_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal))


ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "flash-attn": FlashAttnAdapter,
    "sdpa": SdpaAdapter,
    "hipattn": HipAttnAdapter,
}
FAULTS = ("scale", "no-causal", "nan")


def make_adapter(name: str, fault: str | None = None) -> Adapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown kernel {name!r}; choose from {', '.join(ADAPTERS)}")
    a = ADAPTERS[name]()
    return FaultAdapter(a, fault) if fault else a


# ----------------------------------------------------------------------------- GPU work

DEVICE = "cuda"  # torch.cuda is HIP on ROCm torch


def _torch_dtype(name: str) -> Any:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}[name]


def reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """fp64 math SDPA on upcast inputs; causal mask bottom-right aligned like flash-attn."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = q.double(), k.double(), v.double()
    if k.shape[2] != q.shape[2]:
        rep = q.shape[2] // k.shape[2]
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        mask = j <= i + (sk - sq)
    with sdpa_kernel([SDPBackend.MATH]):
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return o.transpose(1, 2)


@dataclass
class CaseResult:
    case: str
    dtype: str
    status: str  # passed | failed | skipped
    reason: str = ""
    errors: dict[str, float] = field(default_factory=dict)  # out, dq, dk, dv
    tolerance: dict[str, float] = field(default_factory=dict)
    finite: bool = True


def _finite(*ts: Any) -> bool:
    import torch

    return all(t is not None and bool(torch.isfinite(t).all()) for t in ts)


def run_case(adapter: Adapter, case: Case, gen: Any) -> CaseResult:
    import torch

    dev = DEVICE
    dt = _torch_dtype(case.dtype)
    res = CaseResult(case.name, case.dtype, "passed")
    if case.varlen and not adapter.has_varlen:
        return CaseResult(case.name, case.dtype, "skipped", f"{adapter.name} has no varlen entry")
    shape_q: tuple[int, ...]
    shape_k: tuple[int, ...]
    if case.varlen:
        total = sum(case.varlen)
        shape_q, shape_k = (total, case.heads, case.head_dim), (total, case.heads_kv, case.head_dim)
    else:
        shape_q = (case.batch, case.seqlen_q, case.heads, case.head_dim)
        shape_k = (case.batch, case.seqlen_k, case.heads_kv, case.head_dim)
    # Fresh random inputs every run (the generator is seeded from the clock by the caller).
    q = torch.randn(shape_q, device=dev, dtype=dt, generator=gen).requires_grad_()
    k = torch.randn(shape_k, device=dev, dtype=dt, generator=gen).requires_grad_()
    v = torch.randn(shape_k, device=dev, dtype=dt, generator=gen).requires_grad_()
    dout = torch.randn(shape_q, device=dev, dtype=dt, generator=gen)

    if case.varlen:
        cu = torch.tensor([0, *_cumsum(case.varlen)], device=dev, dtype=torch.int32)
        mx = max(case.varlen)
        out = adapter.forward_varlen(q, k, v, cu, cu, mx, mx, case.causal)
        refs = []
        qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
        for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True):
            refs.append(reference(qd[None, a:b], kd[None, a:b], vd[None, a:b], case.causal)[0])
        ref = torch.cat(refs, 0)
    else:
        out = adapter.forward(q, k, v, case.causal)
        qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref = reference(qd, kd, vd, case.causal)
    if tuple(out.shape) != tuple(ref.shape):
        return CaseResult(case.name, case.dtype, "failed",
                          f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    res.finite = _finite(out)
    res.errors["out"] = rel_error(out, ref)
    res.tolerance["out"] = tolerance(case.dtype, "fwd")
    if adapter.has_backward:
        q.grad = k.grad = v.grad = None  # gradients must be produced by this call
        out.backward(dout)
        ref.backward(dout.double())
        res.finite = res.finite and _finite(q.grad, k.grad, v.grad)
        for nm, g, rg in (("dq", q.grad, qd.grad), ("dk", k.grad, kd.grad),
                          ("dv", v.grad, vd.grad)):
            res.errors[nm] = rel_error(g, rg) if g is not None else math.inf
            res.tolerance[nm] = tolerance(case.dtype, "bwd")
    bad = [f"{nm} rel err {res.errors[nm]:.2e} > {res.tolerance[nm]:.2e}"
           for nm in res.errors if not judge(res.errors[nm], res.tolerance[nm], True)]
    if not res.finite:
        bad.insert(0, "NaN/Inf in output or gradients")
    if bad:
        res.status, res.reason = "failed", "; ".join(bad)
    return res


def _cumsum(xs: tuple[int, ...]) -> list[int]:
    out, s = [], 0
    for x in xs:
        s += x
        out.append(s)
    return out


_CYCLES_PER_MS: list[float] = []


def _sleep_fn() -> Callable[[float], None] | None:
    """A device-side busy wait of ``ms`` milliseconds (torch.cuda._sleep, calibrated once), or
    None when this torch lacks it."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return None
    if not _CYCLES_PER_MS:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sleep(1_000_000)  # warm
        s.record()
        sleep(20_000_000)
        e.record()
        torch.cuda.synchronize()
        _CYCLES_PER_MS.append(20_000_000 / max(s.elapsed_time(e), 1e-3))
    cpm = _CYCLES_PER_MS[0]
    return lambda ms: sleep(int(cpm * ms))


def time_calls(fn: Callable[[int], Any], n_sets: int, warmup: int, repeats: int,
               rounds: int) -> tuple[float, float, dict[str, Any]]:
    """Time ``fn(set_index)`` with device events; warm up, rotate input sets, ``rounds`` rounds of
    ``repeats`` calls. Returns (median ms, run-to-run spread, facts about the method).

    When a call's host-side launch cost is not small against its device time (small shapes,
    Python-heavy wrappers), the queue runs dry and back-to-back events would measure the host. In
    that case each timed call is preceded by a device-side busy wait (``torch.cuda._sleep``) a few
    times the launch cost, so the start event and the kernels are queued back to back. It is not
    used for long calls: an idle spin before every call lets the clocks boost and reads a few %
    fast (seen on an H200). Input sets larger than L2 are rotated instead of flushing the cache.
    """
    import torch

    host: list[float] = []
    for i in range(warmup):
        t0 = time.perf_counter()
        fn(i % n_sets)
        host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    host_ms = statistics.median(host) if host else 0.0

    def one_round(sleep: Callable[[float], None] | None, pad_ms: float) -> list[float]:
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(repeats)]
        for i, (s, e) in enumerate(evs):
            if sleep is not None:
                sleep(pad_ms)
            s.record()
            fn(i % n_sets)
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in evs]

    first = one_round(None, 0.0)
    sleep = _sleep_fn() if host_ms > 0.3 * statistics.median(first) else None
    pad_ms = max(0.05, 3 * host_ms)
    all_rounds = [first] if sleep is None else []
    while len(all_rounds) < rounds:
        all_rounds.append(one_round(sleep, pad_ms))
    med, spread = median_and_spread(all_rounds)
    facts = {"host_launch_ms": host_ms, "padded": sleep is not None,
             "samples": sum(len(r) for r in all_rounds)}
    return med, spread, facts


def measure_shape(adapter: Adapter, shape: PerfShape, gen: Any, repeats: int, rounds: int,
                  cross_check: bool) -> dict[str, Any]:
    import torch

    dt = _torch_dtype(shape.dtype)
    dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
    set_bytes = 4 * math.prod(dims) * torch.finfo(dt).bits // 8  # q, k, v, dout
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20)
    n_sets = min(8, max(2, math.ceil(2 * l2 / set_bytes)))
    sets = []
    for _ in range(n_sets):
        q, k, v = (torch.randn(dims, device="cuda", dtype=dt, generator=gen).requires_grad_()
                   for _ in range(3))
        sets.append((q, k, v, torch.randn(dims, device="cuda", dtype=dt, generator=gen)))
    entry: dict[str, Any] = {"shape": shape.name, **asdict(shape), "kernel": adapter.name,
                             "input_sets": n_sets, "input_bytes": n_sets * set_bytes}
    fwd_flops = attention_flops(shape.batch, shape.heads, shape.seqlen, shape.seqlen,
                                shape.head_dim, shape.causal, "fwd")

    def fwd(i: int) -> Any:
        q, k, v, _ = sets[i]
        return adapter.forward(q, k, v, shape.causal)

    # First call: includes JIT compilation / autotuning when the kernel has not run this shape.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fwd(0)
    torch.cuda.synchronize()
    entry["first_call_fwd_ms"] = (time.perf_counter() - t0) * 1e3
    with torch.no_grad():
        med, spread, facts = time_calls(fwd, n_sets, 10, repeats, rounds)
    entry["fwd"] = {"ms": med, "spread": spread, "tflops": fwd_flops / (med * 1e-3) / 1e12,
                    **facts}
    if cross_check:
        entry["fwd"]["do_bench_ms"] = _do_bench(lambda: fwd(0))
    if adapter.has_backward:
        outs = [fwd(i) for i in range(n_sets)]

        def bwd(i: int) -> Any:
            q, k, v, do = sets[i]
            return torch.autograd.grad(outs[i], (q, k, v), do, retain_graph=True)

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        bwd(0)
        torch.cuda.synchronize()
        entry["first_call_bwd_ms"] = (time.perf_counter() - t0) * 1e3
        med, spread, facts = time_calls(bwd, n_sets, 10, repeats, rounds)
        entry["bwd"] = {"ms": med, "spread": spread,
                        "tflops": 2.5 * fwd_flops / (med * 1e-3) / 1e12, **facts}
        if cross_check:
            entry["bwd"]["do_bench_ms"] = _do_bench(lambda: bwd(0))
        outs.clear()
    sets.clear()
    torch.cuda.empty_cache()
    return entry


def _do_bench(fn: Callable[[], Any]) -> float | None:
    try:
        from triton.testing import do_bench
    except Exception:  # noqa: BLE001 - Triton is optional; the cross-check is then absent
        return None
    return float(do_bench(fn, warmup=25, rep=200, return_mode="median"))


def device_info() -> dict[str, Any]:
    import torch

    p = torch.cuda.get_device_properties(0)
    arch = getattr(p, "gcnArchName", "") or ""
    return {
        "name": p.name,
        "arch": arch.split(":")[0] if arch else f"sm_{p.major}{p.minor}",
        "memory_gib": round(p.total_memory / 2**30, 1),
        "multiprocessors": p.multi_processor_count,
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "torch": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None),
        "peak_tflops": peak_tflops(p.name, arch),
    }


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
    adapter = make_adapter(kernel, fault)
    why = adapter.available()
    if why:
        return {**result, "status": "skipped", "reason": why}
    dev = device_info()
    result["device"] = dev
    seed = time.time_ns() % (2**63)
    result["seed"] = seed
    gen = torch.Generator(device="cuda").manual_seed(seed)
    failures: list[str] = []
    if throughput:
        perf: list[dict[str, Any]] = []
        for shape in perf_shapes(quick):
            for a in ([adapter] + ([SdpaAdapter()] if compare_sdpa and kernel != "sdpa" else [])):
                try:
                    e = measure_shape(a, shape, gen, repeats, rounds, cross_check)
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
        for case in correctness_matrix(quick):
            try:
                r = run_case(adapter, case, gen)
            except NotImplementedError as exc:
                r = CaseResult(case.name, case.dtype, "skipped", f"{adapter.name}: {exc}")
            except Exception as exc:  # noqa: BLE001
                r = CaseResult(case.name, case.dtype, "failed", _short(exc))
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="attention kernel gate (runs inside the venv)")
    p.add_argument("--kernel", default="flash-attn", choices=sorted(ADAPTERS))
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
        json.dump(res, f, indent=1, default=str)
    print(f"kernel gate: {res['status']}", res.get("reason", ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
