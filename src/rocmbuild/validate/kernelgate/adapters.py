"""The kernels under test. Each adapter takes (batch, seqlen, heads, head_dim) tensors, like
flash-attn: ``flash-attn`` (flash_attn_func and flash_attn_varlen_func from the wheel under test),
``sdpa`` (torch SDPA, flash backend: the harness's own control) and ``hipattn`` (our HIP probe;
AMD hosts only). ``FaultAdapter`` wraps any of them with a deliberate error (scaled output,
dropped causal mask, a NaN) to prove the gate fails."""

from __future__ import annotations

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
