"""HIP attention forward probe, built by rocmbuild for gfx90a / gfx942 (/ gfx950).

    import torch, hipattn
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    hipattn.forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), B, H, S, D,
                    q.dtype, causal=True, stream=torch.cuda.current_stream().cuda_stream)

Tensors must be contiguous [B, H, S, D]; D is 64 or 128; dtype float32, float16 or bfloat16.
Importing needs only the HIP runtime library (libamdhip64); no GPU until a kernel is launched.
"""

from __future__ import annotations

from ._hipattn import archs, device_count, forward, synchronize

__all__ = ["archs", "device_count", "forward", "synchronize"]
__version__ = "0.1.0"
