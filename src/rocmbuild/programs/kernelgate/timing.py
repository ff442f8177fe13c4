"""Throughput: FLOPs, the peak table, device-event timing with input rotation, and the
triton do_bench cross-check."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True)
class DeviceSpec:
    """One device model: dense fp16/bf16 matrix peak (no sparsity) of what torch sees as one
    device (an MI250/MI250X GCD is one device: half the package), its compute units (CUs; SMs on
    NVIDIA) at full size, its last-level cache beyond L2 (AMD Infinity Cache), and where the
    figures come from. ``check`` is the arithmetic behind the peak: CUs x dense fp16 FLOP per
    clock per CU x peak engine clock (MHz)."""

    model: str
    arch: str
    cus: int
    peak_tflops: float
    source: str
    check: tuple[int, int, int] | None = None  # (CUs, FLOP/clk/CU, MHz)
    llc_bytes: int = 0
    estimated: bool = False  # no vendor data sheet: derived from the CU count and the family


_ROCM_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html (CUs, caches)"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"
_IC = 256 << 20  # MI300 / MI350 Infinity Cache (ROCm gpu-specs: 'L3 Cache 256 MiB')

# Matched by model name in the device name (word-bounded) and by CU count (see identify()).
DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("MI210", "gfx90a", 104, 181.0,
               f"AMD MI210 data sheet ({_AMD}mi200/mi210.html): 181.0 TFLOPS FP16/BF16; "
               + _ROCM_SPECS, (104, 1024, 1700)),
    DeviceSpec("MI250", "gfx90a", 104, 181.0,
               f"AMD MI250 data sheet ({_AMD}mi200/mi250.html): 362.1 TFLOPS FP16/BF16 per "
               "package of 2 GCDs (208 CUs); one GCD here", (104, 1024, 1700)),
    DeviceSpec("MI250X", "gfx90a", 110, 191.5,
               f"AMD MI250X data sheet ({_AMD}mi200/mi250x.html): 383 TFLOPS FP16/BF16 per "
               "package of 2 GCDs (220 CUs); one GCD here", (110, 1024, 1700)),
    DeviceSpec("MI300A", "gfx942", 228, 980.6,
               f"AMD MI300A data sheet ({_AMD}mi300/mi300a.html): 980.6 TFLOPS FP16/BF16 "
               "dense; " + _ROCM_SPECS, (228, 2048, 2100), _IC),
    DeviceSpec("MI300X", "gfx942", 304, 1307.4,
               f"AMD MI300X data sheet ({_AMD}mi300/mi300x.html): 1307.4 TFLOPS FP16/BF16 "
               "dense; " + _ROCM_SPECS, (304, 2048, 2100), _IC),
    DeviceSpec("MI308X", "gfx942", 80, 344.1,
               "no public AMD data sheet: estimated from 80 CUs (seen as torch's "
               "multi_processor_count on MI308X hosts) x 2048 dense FP16 FLOP/clk/CU (CDNA3, as "
               "MI300X) x 2100 MHz (assumed, as MI300X)", (80, 2048, 2100), _IC, estimated=True),
    DeviceSpec("MI325X", "gfx942", 304, 1307.4,
               f"AMD MI325X data sheet ({_AMD}mi300/mi325x.html): 1307.4 TFLOPS FP16/BF16 "
               "dense; " + _ROCM_SPECS, (304, 2048, 2100), _IC),
    DeviceSpec("MI350X", "gfx950", 256, 2306.9,
               f"AMD MI350X data sheet ({_AMD}mi350/mi350x.html): 2.3 PFLOPS FP16/BF16 dense; "
               + _ROCM_SPECS, (256, 4096, 2200), _IC),
    DeviceSpec("MI355X", "gfx950", 256, 2516.6,
               f"AMD MI355X data sheet ({_AMD}mi350/mi355x.html): 2.5 PFLOPS FP16/BF16 dense; "
               + _ROCM_SPECS, (256, 4096, 2400), _IC),
    DeviceSpec("H100", "sm_90", 132, 989.4,
               "NVIDIA H100 SXM data sheet: 989 TFLOPS BF16/FP16 dense (1979 with sparsity)"),
    DeviceSpec("H200", "sm_90", 132, 989.4,
               "NVIDIA H200 SXM data sheet: 989 TFLOPS BF16/FP16 dense (1979 with sparsity)"),
)
UNKNOWN = "unknown device: % of peak not shown"


def _named(model: str, name: str) -> bool:
    import re

    return re.search(rf"(?<![A-Za-z0-9]){re.escape(model)}(?![A-Za-z0-9])", name, re.I) is not None


def identify(name: str, arch: str, cus: int | None) -> dict[str, Any]:
    """The device model and its peak from torch's device properties: the name, the gfx arch
    (sm_XY on NVIDIA) and the compute-unit count. Models named in the device name are preferred
    (ROCm may name an MI250 GCD "AMD Instinct MI250X / MI250", so the CU count decides); without
    a name, the arch and CU count must point to models of one peak. A device with a whole
    fraction of a model's CUs (an MI300X compute partition: CPX is 38 of 304) gets that fraction
    of the peak. Anything else: peak None, "unknown device: % of peak not shown"."""
    arch = arch.split(":")[0]
    pool = [d for d in DEVICES if not arch or d.arch == arch]
    cand = [d for d in pool if _named(d.model, name)] or pool
    hits = [(d, n) for n in (1, 2, 3, 4, 6, 8) for d in cand if cus and d.cus == cus * n]
    if hits and len({round(d.peak_tflops / n) for d, n in hits}) == 1:
        d, n = hits[0]
        models = "/".join(dict.fromkeys(x.model for x, m in hits if m == n))
        return {"model": models + (f" (1/{n} partition)" if n > 1 else ""),
                "peak_tflops": round(d.peak_tflops / n, 1), "peak_source": d.source,
                "peak_estimated": d.estimated, "llc_bytes": d.llc_bytes}
    return {"model": None, "peak_tflops": None, "peak_source": UNKNOWN, "peak_estimated": False,
            "llc_bytes": _IC if arch.startswith(("gfx94", "gfx95")) else 0}


def peak_tflops(device_name: str, arch: str = "", cus: int | None = None) -> float | None:
    """The dense fp16/bf16 peak of one device, None when unknown (see ``identify``)."""
    peak: float | None = identify(device_name, arch, cus)["peak_tflops"]
    return peak


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

    sleep = getattr(torch.cuda, "_sleep", None)  # CUDA and ROCm builds both have it (a
    if sleep is None:  # clock64 spin kernel, hipified); checked anyway
        return None
    if not _CYCLES_PER_MS:
        try:
            s, e = _event(), _event()
            sleep(1_000_000)  # warm
            s.record()
            sleep(20_000_000)
            e.record()
            torch.cuda.synchronize()
            ms = s.elapsed_time(e)
        except Exception:  # noqa: BLE001 - any failure: time without the pad
            ms = 0.0
        _CYCLES_PER_MS.append(20_000_000 / ms if ms > 1e-3 else 0.0)
    cpm = _CYCLES_PER_MS[0]
    if cpm <= 0:
        return None
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
    fast (seen on an H200). Input sets twice the size of L2 plus Infinity Cache are rotated
    instead of flushing the caches.
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
    facts: dict[str, Any] = {"host_launch_ms": host_ms, "padded": sleep is not None,
                             "samples": sum(len(r) for r in all_rounds)}
    if sleep is None and host_ms > 0.3 * statistics.median(first):
        facts["pad_unavailable"] = ("launch-bound, but torch.cuda._sleep is missing or did not "
                                    "calibrate: timed without the device busy-wait")
    return med, spread, facts


MAX_INPUT_SETS = 64


def rotation_sets(set_bytes: int, cache_bytes: int) -> int:
    """How many input sets to rotate so that together they are at least twice every cache a
    call's inputs could stay in (L2 plus AMD's Infinity Cache: 256 MB on MI300/MI350), at least
    2 and at most MAX_INPUT_SETS."""
    return min(MAX_INPUT_SETS, max(2, math.ceil(2 * cache_bytes / max(set_bytes, 1))))


def measure_shape(adapter: Adapter, shape: PerfShape, gen: Any, repeats: int, rounds: int,
                  cross_check: bool, cache_bytes: int | None = None) -> dict[str, Any]:
    """Time one shape forward (and backward). ``cache_bytes``: L2 plus any last-level cache
    (default: torch's L2 size, 64 MiB when it does not say)."""
    import torch

    dt = torch_dtype(shape.dtype)
    dims = (shape.batch, shape.seqlen, shape.heads, shape.head_dim)
    set_bytes = 4 * math.prod(dims) * torch.finfo(dt).bits // 8  # q, k, v, dout
    if not cache_bytes:
        cache_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size",
                              64 << 20) or (64 << 20)
    n_sets = rotation_sets(set_bytes, cache_bytes)
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
    hip = getattr(torch.version, "hip", None)
    gcn = (getattr(p, "gcnArchName", "") or "") if hip else ""
    arch = gcn.split(":")[0] if gcn else f"sm_{p.major}{p.minor}"
    return device_facts(p.name, arch, p.multi_processor_count, p.total_memory,
                        getattr(p, "L2_cache_size", None), torch.__version__, hip,
                        getattr(torch.version, "cuda", None))


def device_facts(name: str, arch: str, cus: int, total_memory: int, l2: int | None,
                 torch_version: str, hip: str | None, cuda: str | None) -> dict[str, Any]:
    """What the report says about the device (``device_info`` reads the arguments from torch;
    tests pass recorded properties)."""
    ident = identify(name, arch, cus)
    return {
        "name": name, "arch": arch, "memory_gib": round(total_memory / 2**30, 1),
        "multiprocessors": cus, "l2_bytes": l2, "torch": torch_version, "hip": hip,
        "cuda": cuda, **ident,
    }
