"""Deviations between two passes and the verdict: the wheel's deviation from each reference
against the references' deviation from each other, per quantity (the logits, the worst token's
logits, each parameter's gradient)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from .decoder import Pass

LOGITS = "logits"
ROWS = "logits_rows"
"""The worst token's logits: one wrong row among many is diluted in the global norm by the square
root of the row count (the kernel gate judges rows for the same reason)."""


def rel(a: Any, b: Any) -> float:
    """||a - b|| / ||b|| in float64 (inf when b is zero and a is not; NaN propagates)."""
    a64, b64 = a.double(), b.double()
    nb = float(b64.norm())
    diff = float((a64 - b64).norm())
    if nb == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / nb


def worst_row(a: Any, b: Any) -> float:
    """max over rows (tokens) of ||a_t - b_t|| / ||b_t||, in float64."""
    a64, b64 = a.double(), b.double()
    den = b64.norm(dim=-1).clamp_min(1e-300)
    return float(((a64 - b64).norm(dim=-1) / den).max()) if a64.shape[0] else 0.0


def finite(p: Pass) -> bool:
    import torch

    return math.isfinite(p.loss) and bool(torch.isfinite(p.logits).all()) and all(
        bool(torch.isfinite(g).all()) for g in p.grads.values())


def deviations(x: Pass, y: Pass) -> dict[str, float]:
    """Per quantity: the logits, then each parameter's gradient (``grad:<name>``)."""
    out = {LOGITS: rel(x.logits, y.logits), ROWS: worst_row(x.logits, y.logits)}
    for name, g in y.grads.items():
        out[f"grad:{name}"] = rel(x.grads[name], g) if name in x.grads else math.inf
    return out


def judge(test: Pass, sdpa: Pass, eager: Pass, multiple: float, floor: float
          ) -> dict[str, Any]:
    """The verdict of one case and its figures. A quantity's ratio is max(d(test, sdpa),
    d(test, eager)) / max(d(sdpa, eager), floor); the case passes when every ratio is at most
    ``multiple`` and every pass is finite."""
    if not all(finite(p) for p in (test, sdpa, eager)):
        bad = [p.impl for p in (test, sdpa, eager) if not finite(p)]
        return {"passed": False, "reason": f"NaN/Inf in the loss, logits or gradients of "
                f"{', '.join(bad)}"}
    ts, te, se = deviations(test, sdpa), deviations(test, eager), deviations(sdpa, eager)
    ratios = {q: max(ts[q], te[q]) / max(se[q], floor) for q in se}
    worst = max(ratios, key=lambda q: ratios[q])
    grads = [q for q in se if q.startswith("grad:")]

    def summary(d: dict[str, float]) -> dict[str, float]:
        vals = [d[q] for q in grads]
        return {"max": max(vals), "median": statistics.median(vals)}

    ok = ratios[worst] <= multiple
    figures = {
        "loss": {"test": test.loss, "sdpa": sdpa.loss, "eager": eager.loss},
        "logits": {"test_sdpa": ts[LOGITS], "test_eager": te[LOGITS],
                   "sdpa_eager": se[LOGITS], "ratio": ratios[LOGITS]},
        "logits_rows": {"test_sdpa": ts[ROWS], "test_eager": te[ROWS], "sdpa_eager": se[ROWS],
                        "ratio": ratios[ROWS]},
        "grads": {"params": len(grads), "test_sdpa": summary(ts), "test_eager": summary(te),
                  "sdpa_eager": summary(se),
                  "worst_ratio": max(ratios[q] for q in grads) if grads else 0.0},
        "worst": {"quantity": worst, "ratio": ratios[worst], "test_sdpa": ts[worst],
                  "test_eager": te[worst], "sdpa_eager": se[worst]},
    }
    reason = "" if ok else (
        f"{worst}: the wheel deviates {max(ts[worst], te[worst]):.3g} from the references, "
        f"{ratios[worst]:.1f}x their deviation from each other ({se[worst]:.3g}; allowed "
        f"{multiple:g}x)")
    return {"passed": ok, "reason": reason, **figures}
