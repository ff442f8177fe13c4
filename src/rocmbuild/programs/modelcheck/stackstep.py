"""The stack step: in one process, with the stack's own wheels, one training step of the small
decoder per part: flash-attn as its attention, a peft LoRA adapter, bitsandbytes 4-bit linear
layers under LoRA (QLoRA, where the bitsandbytes wheel has code for this GPU), a DeepSpeed ZeRO-2
step on one GPU with nothing JIT-compiled. Each part is passed, failed or skipped with its reason;
the report names the versions and the shared libraries each member loaded."""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from . import NO_TRANSFORMERS, PARTS, decoder
from .check import device_of, short, versions

SIZE = decoder.Size("stack", 2, 512, 8, 4, 1000)
MEMBERS = {"torch": "torch", "flash-attn": "flash_attn", "bitsandbytes": "bitsandbytes",
           "deepspeed": "deepspeed", "peft": "peft", "transformers": "transformers",
           "triton": "triton"}
"""Distribution name -> its top-level package (whose directory holds its own libraries)."""
RUNTIMES = ("libamdhip64", "libhsa-runtime64", "librocblas", "libhipblas", "libhipblaslt",
            "librccl", "libMIOpen", "libcudart", "libcublas", "libcublasLt", "libnccl",
            "libcudnn")
"""GPU runtime libraries that must be loaded once: two copies of one (two members bringing
different ROCm libraries) fail the step."""


class Skip(Exception):
    """A part that cannot run here, with the reason."""


def _module(name: str, why: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Skip(f"{name} is not installed in the validation venv ({why}): "
                   f"{short(exc)}") from None


def _train_step(model: Any, b: decoder.Batch, params: Sequence[Any]) -> dict[str, Any]:
    """One AdamW step on ``params``; the loss before and after (same batch)."""
    import torch

    opt = torch.optim.AdamW(params, lr=1e-3)
    before = [p.detach().clone() for p in params]
    loss0 = model(input_ids=b.ids, attention_mask=b.mask, labels=b.labels).loss
    loss0.backward()
    grad_ok = all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in params)
    opt.step()
    with torch.no_grad():
        loss1 = model(input_ids=b.ids, attention_mask=b.mask, labels=b.labels).loss
    moved = sum(int(not torch.equal(p.detach(), q)) for p, q in zip(params, before, strict=True))
    return _verdict(float(loss0), float(loss1), grad_ok, moved, len(params))


def _verdict(loss0: float, loss1: float, grad_ok: bool, moved: int, n: int) -> dict[str, Any]:
    import math

    figures = {"loss_before": loss0, "loss_after": loss1, "trained_params": n,
               "params_changed": moved}
    if not (math.isfinite(loss0) and math.isfinite(loss1) and grad_ok):
        return {"status": "failed", "reason": "NaN/Inf in the loss or the gradients", **figures}
    if moved == 0:
        return {"status": "failed", "reason": "the step changed no trained parameter", **figures}
    if not loss1 < loss0:
        return {"status": "failed", "reason": f"one step on the same batch did not lower the "
                f"loss ({loss0:.4f} -> {loss1:.4f})", **figures}
    return {"status": "passed", "reason": "", **figures}


def _flash_model(seed: int = 0) -> Any:
    _module("flash_attn", "the stack has no flash-attn member")
    return decoder.build(SIZE, seed, "bf16", "cuda", attn="flash_attention_2")


def part_flash() -> dict[str, Any]:
    model = _flash_model()
    b = decoder.batch(SIZE, 0, True, "cuda")
    return _train_step(model, b, [p for p in model.parameters() if p.requires_grad])


def _lora(model: Any) -> Any:
    peft = _module("peft", "validate --with peft")
    cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM",
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    return peft.get_peft_model(model, cfg)


def part_peft() -> dict[str, Any]:
    import torch

    model = _lora(_flash_model())
    b = decoder.batch(SIZE, 0, True, "cuda")
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trained = [p for p in model.parameters() if p.requires_grad]
    res = _train_step(model, b, trained)
    touched = [n for n, p in model.named_parameters()
               if n in frozen and not torch.equal(p.detach(), frozen[n])]
    res["frozen_params"] = len(frozen)
    if touched and res["status"] == "passed":
        res.update(status="failed", reason=f"the step changed frozen base weights ({touched[0]})")
    return res


def bnb_code(bnb_dir: Path, dev: str, hip: bool, archs: Sequence[str]) -> str:
    """"" when the bitsandbytes package has a library for this GPU (``dev``: sm_90, gfx942;
    ``hip``: a ROCm torch), else why not. ``archs``: the archs the wheel's audit found (HIP),
    empty when unknown."""
    libs = sorted(p.name for p in bnb_dir.glob("libbitsandbytes_*.so"))
    backend = "rocm" if hip else "cuda"
    mine = [n for n in libs if n.startswith(f"libbitsandbytes_{backend}")]
    if not mine or (backend == "rocm" and archs and dev not in archs):
        return (f"bitsandbytes wheel has no code for {dev} (its libraries: "
                f"{', '.join(libs) or 'none'}" + (f"; archs {', '.join(archs)}" if archs else "")
                + ")")
    return ""


def part_bitsandbytes(archs: Sequence[str] = ()) -> dict[str, Any]:
    import torch

    transformers = _module("transformers", "the model needs it")

    bnb = _module("bitsandbytes", "the stack has no bitsandbytes member")
    why = bnb_code(Path(bnb.__file__).parent, device_of(torch, "cuda")["arch"],
                   bool(getattr(torch.version, "hip", None)), archs)
    if why:
        raise Skip(why)
    _module("peft", "QLoRA needs peft: validate --with peft")
    _module("flash_attn", "the stack has no flash-attn member")
    with tempfile.TemporaryDirectory() as tmp:
        decoder.build(SIZE, 0, "bf16", "cpu").save_pretrained(tmp)
        q = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                            bnb_4bit_compute_dtype=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            tmp, quantization_config=q, attn_implementation="flash_attention_2",
            dtype=torch.bfloat16, device_map={"": 0})
    four = sum(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())
    if not four:
        return {"status": "failed", "reason": "no layer was quantized to 4 bits"}
    model = _lora(model)
    res = _train_step(model, decoder.batch(SIZE, 0, True, "cuda"),
                      [p for p in model.parameters() if p.requires_grad])
    res["linear4bit_layers"] = four
    return res


@contextlib.contextmanager
def _one_rank() -> Iterator[Path]:
    """The environment of a one-process, one-GPU distributed job, and an empty torch extensions
    directory (anything DeepSpeed JIT-compiles lands there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    saved = {k: os.environ.get(k) for k in (*env, "TORCH_EXTENSIONS_DIR")}
    with tempfile.TemporaryDirectory() as ext:
        os.environ.update(env, TORCH_EXTENSIONS_DIR=ext)
        try:
            yield Path(ext)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def part_deepspeed() -> dict[str, Any]:
    import torch

    with _one_rank() as ext:
        ds = _module("deepspeed", "the stack has no deepspeed member")
        model = _flash_model()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-3)
        cfg = {"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 1,
               "zero_optimization": {"stage": 2}, "bf16": {"enabled": True},
               "zero_allow_untested_optimizer": True, "steps_per_print": 1 << 30}
        engine, *_ = ds.initialize(model=model, optimizer=opt, config=cfg)
        b = decoder.batch(SIZE, 0, True, "cuda")
        before = [p.detach().clone() for p in params]
        loss0 = engine(input_ids=b.ids, attention_mask=b.mask, labels=b.labels).loss
        engine.backward(loss0)
        engine.step()
        with torch.no_grad():
            loss1 = engine(input_ids=b.ids, attention_mask=b.mask, labels=b.labels).loss
        moved = sum(int(not torch.equal(p.detach(), q)) for p, q in zip(params, before,
                                                                        strict=True))
        res = _verdict(float(loss0), float(loss1), True, moved, len(params))
        res["zero_stage"] = engine.zero_optimization_stage()
        built = sorted(str(p.relative_to(ext)) for p in ext.rglob("*") if p.is_file())
        with contextlib.suppress(Exception):
            torch.distributed.destroy_process_group()
    res["jit_built"] = built
    if res["zero_stage"] != 2 and res["status"] == "passed":
        res.update(status="failed", reason=f"ZeRO stage {res['zero_stage']}, not 2")
    if built:
        res.update(status="failed", reason=f"DeepSpeed JIT-compiled ops: {', '.join(built[:5])}")
    return res


def loaded_libraries(maps: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """From /proc/self/maps: the shared libraries under each member's package directory, the GPU
    runtime libraries (RUNTIMES) with their paths, and one problem per runtime library loaded
    from two places."""
    import importlib.util

    paths = sorted({line.split(None, 5)[5] for line in maps.splitlines()
                    if len(line.split(None, 5)) == 6 and ".so" in line.rsplit("/", 1)[-1]})
    members: dict[str, list[str]] = {}
    for dist, mod in MEMBERS.items():
        spec = importlib.util.find_spec(mod) if mod else None
        where = list(spec.submodule_search_locations or []) if spec else []
        if where:
            root = os.path.realpath(where[0]) + os.sep
            members[dist] = [p for p in paths if os.path.realpath(p).startswith(root)]
    runtime = [p for p in paths if os.path.basename(p).split(".so")[0] in RUNTIMES]
    by_lib: dict[str, set[str]] = {}
    for p in runtime:
        by_lib.setdefault(os.path.basename(p).split(".so")[0], set()).add(os.path.realpath(p))
    problems = [f"{lib} is loaded from {len(ps)} places: {', '.join(sorted(ps))}"
                for lib, ps in sorted(by_lib.items()) if len(ps) > 1]
    return members, runtime, problems


def stack_step(bnb_archs: Sequence[str] = ()) -> dict[str, Any]:
    """All parts in this process; status 'failed' when any part failed, 'passed' when any
    passed, else 'skipped' (never 'passed' when nothing ran)."""
    result: dict[str, Any] = {"check": "stack"}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return {**result, "status": "skipped", "reason": f"torch cannot be imported: {exc}"}
    if not torch.cuda.is_available():
        return {**result, "status": "skipped",
                "reason": f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__})"}
    try:
        import transformers  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {**result, "status": "skipped", "reason": f"{NO_TRANSFORMERS}: {short(exc)}"}
    result["device"] = device_of(torch, "cuda")
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "flash-attn": part_flash, "peft": part_peft,
        "bitsandbytes": lambda: part_bitsandbytes(bnb_archs), "deepspeed": part_deepspeed}
    parts: dict[str, dict[str, Any]] = {}
    for name in PARTS:
        try:
            parts[name] = runs[name]()
        except Skip as exc:
            parts[name] = {"status": "skipped", "reason": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a crash is a failed part with its text
            parts[name] = {"status": "failed", "reason": short(exc)}
        torch.cuda.empty_cache()
    result["parts"] = parts
    result["versions"] = versions(tuple(MEMBERS))
    members, runtime, problems = loaded_libraries(Path("/proc/self/maps").read_text())
    result["loaded"] = {"members": members, "runtime": runtime}
    statuses = [p["status"] for p in parts.values()]
    result["failures"] = [f"{n}: {p['reason']}" for n, p in parts.items()
                          if p["status"] == "failed"] + problems
    result["status"] = ("failed" if result["failures"] else
                        "passed" if "passed" in statuses else "skipped")
    if result["status"] == "skipped":
        result["reason"] = "; ".join(f"{n}: {p['reason']}" for n, p in parts.items())
    return result
