"""The small decoder: sizes, the model (a transformers config built in code, random weights from a
seed, nothing downloaded), a batch with or without padding, one forward and backward with a named
attention implementation, and the injected fault."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import TILE


@dataclass(frozen=True)
class Size:
    """One decoder size. ``window``: a Mistral-style sliding window (the ``window_size`` kwarg
    of flash-attn), else a LLaMA decoder with full causal attention."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    seq: int
    window: int | None = None
    vocab: int = 1024
    batch: int = 2

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def attention(self) -> str:
        return "MHA" if self.kv_heads == self.heads else ("MQA" if self.kv_heads == 1 else "GQA")

    def describe(self) -> str:
        return (f"{self.layers} layers, {self.hidden} wide, {self.heads} heads / {self.kv_heads} "
                f"KV heads ({self.attention}), head dim {self.head_dim}, S={self.seq}"
                + (f", sliding window {self.window}" if self.window else ""))


# Sequence lengths are not multiples of 64 or 128 (the kernels' query tiles).
SIZES: tuple[Size, ...] = (
    Size("mha-256", 2, 256, 4, 4, 333),
    Size("gqa-512", 4, 512, 8, 4, 1000),
    Size("gqa-1024-d128", 4, 1024, 8, 2, 777),
    Size("swa-512", 2, 512, 8, 2, 1000, window=300),
)
QUICK = ("mha-256", "gqa-512")
TINY = Size("tiny", 2, 64, 4, 2, 77, vocab=128)
"""For CPU runs (the tests): float32, seconds."""

DTYPES = ("bf16", "fp16")


def by_name(names: str) -> tuple[Size, ...]:
    """Sizes by comma-separated name (``tiny`` included); ValueError for an unknown one."""
    known = {s.name: s for s in (*SIZES, TINY)}
    out = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
        if n not in known:
            raise ValueError(f"unknown size {n!r}; choose from {', '.join(known)}")
        out.append(known[n])
    return tuple(out)


def torch_dtype(name: str) -> Any:
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def build(size: Size, seed: int, dtype: str, device: str, attn: str = "sdpa") -> Any:
    """The decoder with random weights from ``seed`` (initialised in float32 on the CPU, so the
    weights do not depend on the device), cast to ``dtype`` on ``device``."""
    import importlib

    import torch

    transformers: Any = importlib.import_module("transformers")  # typed loosely on purpose
    common: dict[str, Any] = dict(vocab_size=size.vocab, hidden_size=size.hidden,
                  intermediate_size=(size.hidden * 8 // 3 + 63) // 64 * 64,
                  num_hidden_layers=size.layers, num_attention_heads=size.heads,
                  num_key_value_heads=size.kv_heads, max_position_embeddings=4096,
                  attention_dropout=0.0, tie_word_embeddings=False)
    if size.window:
        cfg: Any = transformers.MistralConfig(sliding_window=size.window, **common)
    else:
        cfg = transformers.LlamaConfig(**common)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    model = model.to(device=device, dtype=torch_dtype(dtype))
    if attn != "sdpa":  # flash-attn is checked against the model as it now is: on the GPU
        model.set_attn_implementation(attn)
    return model


@dataclass
class Batch:
    ids: Any
    mask: Any  # None without padding
    labels: Any
    valid: Any  # bool (batch, seq): the positions that are not padding
    lengths: tuple[int, ...]


def batch(size: Size, seed: int, padded: bool, device: str) -> Batch:
    """Random tokens; ``padded``: three sequences of different lengths, right-padded (the
    varlen path transformers takes with an attention mask), else ``size.batch`` full ones."""
    import torch

    gen = torch.Generator().manual_seed(seed + 7919)
    s = size.seq
    lengths = (s, s - s // 3, s // 2 + 1) if padded else (s,) * size.batch
    ids = torch.randint(0, size.vocab, (len(lengths), s), generator=gen)
    valid = torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]
    labels = ids.masked_fill(~valid, -100)
    mask = valid.long().to(device) if padded else None
    return Batch(ids.to(device), mask, labels.to(device), valid.to(device), lengths)


@dataclass
class Pass:
    """One forward and backward: the loss, the logits at the valid positions, every parameter's
    gradient."""

    impl: str
    loss: float
    logits: Any
    grads: dict[str, Any]


def run_pass(model: Any, impl: str, b: Batch) -> Pass:
    """Forward and backward of ``model`` with attention implementation ``impl`` (transformers'
    own: "flash_attention_2", "sdpa", "eager")."""
    model.set_attn_implementation(impl)
    model.zero_grad(set_to_none=True)
    out = model(input_ids=b.ids, attention_mask=b.mask, labels=b.labels)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
             if p.grad is not None}
    return Pass(impl, float(out.loss.detach()), out.logits.detach()[b.valid], grads)


def last_tile(seq: int) -> int:
    """The first row of the last partial query tile (the last whole tile when there is none)."""
    return TILE * (seq // TILE) if seq % TILE else seq - TILE


@contextlib.contextmanager
def fault(impl: str, name: str | None) -> Iterator[None]:
    """While active, transformers' attention function ``impl`` is wrapped with the fault
    ``name`` (None: no fault): ``last-tile`` gives every row of the last partial query tile the
    output of the row before it."""
    if not name:
        yield
        return
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS[impl]

    def faulty(module: Any, query: Any, key: Any, value: Any, mask: Any, **kw: Any) -> Any:
        out, weights = inner(module, query, key, value, mask, **kw)  # out: (b, s, h, d)
        t0 = last_tile(out.shape[1])
        hit = out.clone()
        hit[:, t0 + 1:] = out[:, t0:-1]
        return hit, weights

    ALL_ATTENTION_FUNCTIONS.register(impl, faulty)
    try:
        yield
    finally:
        ALL_ATTENTION_FUNCTIONS.register(impl, inner)
