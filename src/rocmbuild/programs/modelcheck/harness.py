"""The command line the validation venv runs: ``model`` (the model check) or ``stack`` (the stack
step). It always writes the JSON report, even when the check itself crashes."""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from typing import Any

from . import FAULTS, MULTIPLE, decoder


def _plain(x: Any) -> Any:
    """``x`` with every non-finite float as a string ("inf", "nan"): plain JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def run(a: argparse.Namespace) -> dict[str, Any]:
    if a.what == "stack":
        from .stackstep import stack_step

        return stack_step([x for x in a.bnb_archs.split(",") if x])
    from .check import model_check

    names = a.sizes or (",".join(decoder.QUICK) if a.quick else
                        ",".join(s.name for s in decoder.SIZES))
    dtypes = [d for d in a.dtypes.split(",") if d]
    return model_check(device=a.device, under_test=a.under_test, sizes=decoder.by_name(names),
                       dtypes=dtypes, seeds=[int(s) for s in a.seeds.split(",") if s],
                       fault=a.inject_fault, multiple=a.multiple)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="model check / stack step (runs inside the venv)")
    p.add_argument("what", choices=["model", "stack"])
    p.add_argument("--json", required=True)
    p.add_argument("--quick", action="store_true", help="model: the two smaller sizes")
    p.add_argument("--sizes", default="", help="model: comma-separated size names")
    p.add_argument("--dtypes", default=",".join(decoder.DTYPES))
    p.add_argument("--seeds", default="0", help="model: comma-separated weight/data seeds")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--under-test", default="flash_attention_2",
                   choices=["flash_attention_2", "sdpa"],
                   help="model: transformers' attention implementation under test")
    p.add_argument("--inject-fault", choices=FAULTS, default=None)
    p.add_argument("--multiple", type=float, default=MULTIPLE)
    p.add_argument("--bnb-archs", default="", help="stack: the archs the bitsandbytes wheel's "
                   "audit found")
    a = p.parse_args(argv)
    try:
        res = run(a)
    except Exception as exc:  # noqa: BLE001 - the parent reads the JSON, so always write it
        res = {"check": a.what, "status": "failed",
               "reason": f"{type(exc).__name__}: {exc}"[:300],
               "traceback": traceback.format_exc()}
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(_plain(res), f, indent=1, default=str)
    print(f"{a.what} check: {res['status']}", res.get("reason", ""), file=sys.stderr)
    return 0
