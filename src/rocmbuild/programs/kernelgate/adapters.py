"""The kernels under test. Each adapter takes (batch, seqlen, heads, head_dim) tensors, like
flash-attn: ``flash-attn`` (flash_attn_func and flash_attn_varlen_func from the wheel under test),
``sdpa`` (torch SDPA, flash backend: the harness's own control) and ``hipattn`` (our HIP probe;
AMD hosts only). ``FaultAdapter`` wraps any of them with a deliberate error (scaled output,
dropped causal mask, a NaN, and single-row faults: one output row zeroed, one row's softmax
shifted by a key, two heads swapped at one query position) to prove the gate fails."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import ADAPTER_NAMES, FAULTS


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
    """Wraps an adapter with a deliberate error, to prove the gate catches it.

    The single-row faults hit one row in the middle of the output: the last batch entry (varlen:
    the middle token), the middle query position, head H // 2. ``zero-row`` zeroes it;
    ``softmax-shift`` recomputes it with its attention probabilities moved one key along (cyclic
    over the keys it may see); ``head-swap`` exchanges heads h and h - 1 at that position.
    ``changed`` says whether the last call's fault changed the output at all. ``slow`` computes
    the forward three times (right, but 3x slower: only a baseline catches it).
    """

    def __init__(self, inner: Adapter, fault: str) -> None:
        self.inner = inner
        self.fault = fault
        self.name = f"{inner.name}+fault:{fault}"
        self.has_varlen = inner.has_varlen
        self.has_backward = inner.has_backward
        self.changed: bool | None = None

    def available(self) -> str | None:
        return self.inner.available()

    def _apply(self, o: Any, row: tuple[int, ...], keys: Callable[[], tuple[Any, Any, Any]]
               ) -> Any:
        """``o`` with the fault; ``row`` indexes the row to hit (without the head), ``keys``
        gives that row's q (heads, D) and the keys and values it may see (n, heads_kv, D)."""
        import torch

        before = o
        if self.fault == "scale":
            o = o * 1.05
        elif self.fault == "nan":
            o = o.contiguous().clone()
            o.view(-1)[o.numel() // 2] = float("nan")
        elif self.fault in ("zero-row", "softmax-shift", "head-swap"):
            heads = o.shape[-2]
            h = heads // 2
            o = o.clone()
            if self.fault == "zero-row":
                o[(*row, h)] = 0
            elif self.fault == "head-swap":
                idx = torch.tensor([h, h - 1], device=o.device)
                o[row] = o[row].index_copy(0, idx, o[row][[h - 1, h]])
            else:
                q, k, v = keys()
                hk = h // (heads // k.shape[1])
                logits = (k[:, hk].float() @ q[h].float()) / math.sqrt(q.shape[-1])
                p = torch.softmax(logits, dim=0).roll(1)
                o[(*row, h)] = (p @ v[:, hk].float()).to(o.dtype)
        self.changed = not bool(torch.equal(before, o))
        return o

    def forward(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        if self.fault == "no-causal":
            causal = False
        if self.fault == "slow":
            self.inner.forward(q, k, v, causal)
            self.inner.forward(q, k, v, causal)
        b, s = q.shape[0] - 1, q.shape[1] // 2

        def keys() -> tuple[Any, Any, Any]:
            n = k.shape[1] if not causal else min(k.shape[1], s + 1 + k.shape[1] - q.shape[1])
            return q[b, s], k[b, :n], v[b, :n]

        return self._apply(self.inner.forward(q, k, v, causal), (b, s), keys)

    def forward_varlen(self, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int,
                       max_k: int, causal: bool) -> Any:
        if self.fault == "no-causal":
            causal = False
        t = q.shape[0] // 2

        def keys() -> tuple[Any, Any, Any]:
            starts_q, starts_k = cu_q.tolist(), cu_k.tolist()
            i = max(j for j in range(len(starts_q) - 1) if starts_q[j] <= t)
            s, lq = t - starts_q[i], starts_q[i + 1] - starts_q[i]
            k0, lk = starts_k[i], starts_k[i + 1] - starts_k[i]
            n = lk if not causal else min(lk, s + 1 + lk - lq)
            return q[t], k[k0:k0 + n], v[k0:k0 + n]

        return self._apply(
            self.inner.forward_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal), (t,), keys)


# One class per name in ADAPTER_NAMES (a unit test holds them equal).
ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "flash-attn": FlashAttnAdapter,
    "sdpa": SdpaAdapter,
    "hipattn": HipAttnAdapter,
}


def make_adapter(name: str, fault: str | None = None) -> Adapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown kernel {name!r}; choose from {', '.join(ADAPTER_NAMES)}")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose from {', '.join(FAULTS)}")
    a = ADAPTERS[name]()
    return FaultAdapter(a, fault) if fault else a
