"""What the gate runs: the correctness cases and the throughput shapes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One correctness case. Tensors are (batch, seqlen, heads, head_dim), like flash-attn."""

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
