"""Correctness: the fp64 reference, the error metric, the tolerances, and one case checked."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .matrix import Case

if TYPE_CHECKING:
    from .adapters import Adapter

DEVICE = "cuda"  # torch.cuda is HIP on ROCm torch; the unit tests set "cpu"

# Unit roundoff-ish epsilon of each input dtype (2^-mantissa_bits).
DTYPE_EPS = {"fp16": 2.0**-10, "bf16": 2.0**-7}
# Relative-error tolerances ||out - ref|| / ||ref|| against the fp64 reference. The forward output
# is rounded once to the dtype; the backward rounds P and dS to the dtype before its matmuls, so it
# gets a wider band. On an H200 (docs/dev/benchmarks-notebook.md): fp16 fwd ~3e-4, bf16 fwd ~2e-3.
FWD_TOL_EPS = 2.0  # fp16: 1.95e-3, bf16: 1.56e-2
BWD_TOL_EPS = 4.0  # fp16: 3.91e-3, bf16: 3.13e-2
# Per row (one query position and head of out/dq; one key position and KV head of dk/dv), next to
# the global norm: a single bad row is diluted by sqrt(rows) in the global metric. The row
# error is ||out_r - ref_r|| / max(||ref_r||, RMS of the row norms), so the global metric is
# the RMS of the row errors of rows at least RMS-sized; its bound is ROW_TOL_FACTOR x the
# global bound (the largest of many rows sits above their RMS).
ROW_TOL_FACTOR = 4.0  # fwd fp16 7.8e-3, bf16 6.3e-2; bwd fp16 1.6e-2, bf16 1.25e-1


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


def row_error(out: Any, ref: Any) -> tuple[float, list[int]]:
    """The worst row's error and its index. Rows are the last dimension (head_dim): for a
    (batch, seqlen, heads, head_dim) tensor the index is [b, s, h]; varlen (total, heads,
    head_dim): [t, h]. A row's error is ||out_r - ref_r|| / max(||ref_r||, RMS row norm of ref),
    so a row whose reference is near zero (a causal first query's dq) is judged on the tensor's
    scale, not on its own. NaN counts as infinite."""
    import torch

    o = out.detach().double()
    r = ref.detach().double()
    diff = (o - r).norm(dim=-1)
    norms = r.norm(dim=-1)
    rms = float(norms.pow(2).mean().sqrt()) if norms.numel() else 0.0
    if rms == 0.0:
        err = torch.where(diff == 0, 0.0, math.inf)
    else:
        err = diff / norms.clamp(min=rms)
    err = torch.nan_to_num(err, nan=math.inf)
    flat = int(err.argmax())
    idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), err.shape)]
    return float(err.reshape(-1)[flat]), idx


def torch_dtype(name: str) -> Any:
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
    """One case's outcome, written into the gate's JSON as is (``dataclasses.asdict``)."""

    case: str
    dtype: str
    status: str  # passed | failed | skipped (rocmbuild reads it as results.Status)
    reason: str = ""
    errors: dict[str, float] = field(default_factory=dict)  # out, dq, dk, dv
    tolerance: dict[str, float] = field(default_factory=dict)
    finite: bool = True
    row_errors: dict[str, float] = field(default_factory=dict)  # the worst row of each tensor
    row_tolerance: dict[str, float] = field(default_factory=dict)
    worst_row: dict[str, list[int]] = field(default_factory=dict)  # its index ([b, s, h])
    fault_changed: bool | None = None  # --inject-fault: did the fault change this case's output


def _finite(*ts: Any) -> bool:
    import torch

    return all(t is not None and bool(torch.isfinite(t).all()) for t in ts)


def _cumsum(xs: tuple[int, ...]) -> list[int]:
    out, s = [], 0
    for x in xs:
        s += x
        out.append(s)
    return out


def _judge_tensor(res: CaseResult, name: str, got: Any, ref: Any, tol: float) -> None:
    """Record the global and the worst row's error of one tensor, and their bounds."""
    res.errors[name] = rel_error(got, ref)
    res.tolerance[name] = tol
    res.row_errors[name], res.worst_row[name] = row_error(got, ref)
    res.row_tolerance[name] = ROW_TOL_FACTOR * tol


def run_case(adapter: Adapter, case: Case, gen: Any) -> CaseResult:
    """Run ``case`` forward and (when the adapter has one) backward on fresh random inputs from
    ``gen``, and judge out, dq, dk, dv against the fp64 reference."""
    import torch

    dev = DEVICE
    dt = torch_dtype(case.dtype)
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
        ref: Any
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
    _judge_tensor(res, "out", out, ref, tolerance(case.dtype, "fwd"))
    res.fault_changed = getattr(adapter, "changed", None)
    if adapter.has_backward:
        q.grad = k.grad = v.grad = None  # gradients must be produced by this call
        out.backward(dout)
        ref.backward(dout.double())
        res.finite = res.finite and _finite(q.grad, k.grad, v.grad)
        for nm, g, rg in (("dq", q.grad, qd.grad), ("dk", k.grad, kd.grad),
                          ("dv", v.grad, vd.grad)):
            if g is None:
                res.errors[nm], res.tolerance[nm] = math.inf, tolerance(case.dtype, "bwd")
            else:
                _judge_tensor(res, nm, g, rg, tolerance(case.dtype, "bwd"))
    bad = [f"{nm} rel err {res.errors[nm]:.2e} > {res.tolerance[nm]:.2e}"
           for nm in res.errors if not judge(res.errors[nm], res.tolerance[nm], True)]
    bad += [f"{nm} row {res.worst_row[nm]} rel err {res.row_errors[nm]:.2e} > "
            f"{res.row_tolerance[nm]:.2e}" for nm in res.row_errors
            if not judge(res.row_errors[nm], res.row_tolerance[nm], True)]
    if not res.finite:
        bad.insert(0, "NaN/Inf in output or gradients")
    if bad:
        res.status, res.reason = "failed", "; ".join(bad)
    return res
