"""Throughput: FLOPs, the peak table, device-event timing with input rotation, and the
triton do_bench cross-check."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from .adapters import Adapter
from .matrix import PerfShape
from .reference import torch_dtype


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


_CYCLES_PER_MS: list[float] = []


def _event() -> Any:
    """A timing event on the current stream (torch.cuda.Event is HIP's event on ROCm torch)."""
    import torch

    event: Any = torch.cuda.Event
    return event(enable_timing=True)


def _sleep_fn() -> Callable[[float], None] | None:
    """A device-side busy wait of ``ms`` milliseconds (torch.cuda._sleep, calibrated once), or
    None when this torch lacks it."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return None
    if not _CYCLES_PER_MS:
        s, e = _event(), _event()
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
        evs = [(_event(), _event())
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

    dt = torch_dtype(shape.dtype)
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
