"""The model check: for every size, dtype, with and without padding (and each seed), the
decoder's forward and backward with the attention under test through transformers' own
integration, then with torch SDPA and eager as the references; each case judged by
``compare.judge``."""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from typing import Any

from . import MULTIPLE, NO_TRANSFORMERS, TILE, compare, decoder

FLOOR = {"bf16": 1e-6, "fp16": 1e-7, "fp32": 1e-12}
"""The references' deviation is never taken as smaller than this (two bit-identical references
would allow no deviation at all)."""


def versions(names: Sequence[str]) -> dict[str, str | None]:
    """The installed distributions' versions (None: not installed)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def device_of(torch: Any, device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"name": platform.machine() or "cpu", "arch": "cpu"}
    p = torch.cuda.get_device_properties(0)
    arch = (getattr(p, "gcnArchName", "") if getattr(torch.version, "hip", None) else ""
            ) or f"sm_{p.major}{p.minor}"
    return {"name": p.name, "arch": arch.split(":")[0], "torch": torch.__version__,
            "hip": getattr(torch.version, "hip", None), "cuda": torch.version.cuda}


def preflight(device: str, under_test: str) -> tuple[str, str]:
    """("skipped"|"failed", reason) when the check cannot run here, else ("", "")."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return "skipped", f"torch cannot be imported: {exc}"
    if device == "cuda" and not torch.cuda.is_available():  # before transformers' slow import
        return "skipped", f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__})"
    try:
        import transformers  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return "skipped", (f"{NO_TRANSFORMERS} ({type(exc).__name__}: {exc}); install it "
                           "there (validate --with transformers) to check the wheel in a model")
    if under_test == "flash_attention_2":
        try:
            import flash_attn  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return "failed", f"cannot import flash_attn: {type(exc).__name__}: {exc}"
    return "", ""


def short(exc: BaseException) -> str:
    lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def run_case(size: decoder.Size, dtype: str, padded: bool, seed: int, device: str,
             under_test: str, fault: str | None, multiple: float) -> dict[str, Any]:
    import torch

    case: dict[str, Any] = {
        "size": size.name, "model": size.describe(), "attention": size.attention,
        "seq": size.seq, "dtype": dtype, "padded": padded, "seed": seed}
    t0 = time.monotonic()
    verdict: dict[str, Any]
    try:
        model = decoder.build(size, seed, dtype, device)
        b = decoder.batch(size, seed, padded, device)
        case["lengths"] = list(b.lengths)
        sdpa = decoder.run_pass(model, "sdpa", b)
        eager = decoder.run_pass(model, "eager", b)
        try:
            with decoder.fault(under_test, fault):
                test = decoder.run_pass(model, under_test, b)
        except NotImplementedError as exc:  # the wheel refuses this case out loud: no wrong
            verdict = {"passed": None, "reason": f"the wheel refuses it: {short(exc)}"}
        else:
            verdict = compare.judge(test, sdpa, eager, multiple, FLOOR[dtype])
    except Exception as exc:  # noqa: BLE001 - a crash is a failed case with its text
        verdict = {"passed": False, "reason": short(exc)}
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()
    passed = verdict.pop("passed")
    case["status"] = "skipped" if passed is None else "passed" if passed else "failed"
    case.update(verdict)
    case["seconds"] = round(time.monotonic() - t0, 3)
    return case


def model_check(*, device: str = "cuda", under_test: str = "flash_attention_2",
                sizes: Sequence[decoder.Size] = decoder.SIZES,
                dtypes: Sequence[str] = decoder.DTYPES, seeds: Sequence[int] = (0,),
                fault: str | None = None, multiple: float = MULTIPLE) -> dict[str, Any]:
    """The whole check in this process: a JSON-able dict with a status of 'passed', 'failed'
    or 'skipped' (never 'passed' when nothing ran)."""
    result: dict[str, Any] = {
        "check": "model", "under_test": under_test, "references": ["sdpa", "eager"],
        "fault": fault, "multiple": multiple, "tile": TILE, "host": platform.node()}
    status, reason = preflight(device, under_test)
    if status:
        return {**result, "status": status, "reason": reason}
    import torch

    result["versions"] = versions(("torch", "transformers", "flash-attn", "triton"))
    result["device"] = device_of(torch, device)
    cases = [run_case(s, d, p, seed, device, under_test, fault, multiple)
             for s in sizes for d in dtypes for p in (False, True) for seed in seeds]
    result["cases"] = cases
    failed = [c for c in cases if c["status"] == "failed"]
    result["failures"] = [f"{c['size']} {c['dtype']} {'padded' if c['padded'] else 'full'} "
                          f"seed {c['seed']}: {c['reason']}" for c in failed]
    ran = [c for c in cases if c["status"] != "skipped"]
    result["skipped"] = [f"{c['size']} {c['dtype']} {'padded' if c['padded'] else 'full'}: "
                         f"{c['reason']}" for c in cases if c["status"] == "skipped"]
    result["status"] = "failed" if failed or not ran else "passed"
    if not ran:
        result["reason"] = "no cases ran"
    return result
