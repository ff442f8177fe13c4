"""``rocmbuild.prom``: gauges per cell of the latest run in the text exposition format, for
node_exporter's textfile collector. Pure: same runs, same bytes."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rocmbuild.artifacts.results import Status
from rocmbuild.nightly.model import CellOutcome, RunReport, Validation
from rocmbuild.nightly.report.fmt import GOOD
from rocmbuild.nightly.report.history import iso_time

_PREFIX = "rocmbuild_nightly_"


def _label(v: str) -> str:
    """A label value escaped per the text exposition format."""
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(round(v, 6))


def _epoch(iso: str) -> int:
    return int(iso_time(iso).timestamp())


def render_prom(runs: Sequence[RunReport]) -> str:
    """``rocmbuild.prom``: gauges per cell of the latest run (``runs[0]``), for node_exporter's
    textfile collector. A cell the latest run skipped (unchanged) keeps its TFLOP/s and cache
    hit ratio from its last build in ``runs``; the last success time of every cell in ``runs``
    comes from the newest run in which it succeeded."""
    cur = runs[0]
    now = {o.cell_id: o for o in cur.outcomes}
    built: dict[str, CellOutcome] = {}  # each cell's newest non-skipped outcome
    last_ok: dict[str, int] = {}
    for r in runs:
        for o in r.outcomes:
            if o.status is not Status.SKIPPED:
                built.setdefault(o.cell_id, o)
            if o.status in GOOD:
                last_ok.setdefault(o.cell_id, _epoch(r.finished))

    def carried(c: str, o: CellOutcome) -> CellOutcome:
        return built.get(c, o) if o.status is Status.SKIPPED else o

    fams: list[tuple[str, str, list[tuple[str, float]]]] = [
        ("cell_duration_seconds", "Wall time of the cell in the latest nightly run.",
         [(c, o.duration_s) for c, o in now.items()]),
        ("cell_success", "1 when the cell succeeded or was unchanged (skipped) in the latest "
         "nightly run, 0 when it failed.",
         [(c, 0 if o.status is Status.FAILED else 1) for c, o in now.items()]),
        ("cell_built", "1 when the cell's build step succeeded in the latest nightly run (its "
         "wheel is in staging), 0 when it failed; absent when the cell was skipped.",
         [(c, int(o.status is not Status.FAILED or o.validation is not Validation.NOT_REACHED))
          for c, o in now.items() if o.status is not Status.SKIPPED]),
        ("cell_validated", "1 when the cell's wheel passed validation in the latest nightly "
         "run (or a --validate-pending after it), 0 when it is pending or failed validation; "
         "absent when the validate step was not reached.",
         [(c, int(o.validation is Validation.PASSED)) for c, o in now.items()
          if o.validation is not Validation.NOT_REACHED]),
        ("cell_validation_pending", "1 when the cell's wheel was built but not validated (the "
         "build host cannot; nightly --validate-pending on a GPU host will), else 0.",
         [(c, int(o.pending)) for c, o in now.items()]),
        ("cell_tflops", "Best TFLOP/s of the kernel gate in the cell's latest validated build.",
         [(c, t) for c, o in now.items() if (t := carried(c, o).tflops) is not None]),
        ("cell_compile_cache_hit_ratio", "Compile cache hit ratio (0..1) of the cell's latest "
         "build.", [(c, h) for c, o in now.items()
                    if (h := carried(c, o).cache_hit_rate) is not None]),
        ("cell_last_success_timestamp_seconds", "Unix time the newest nightly run in which the "
         "cell succeeded finished.", list(last_ok.items())),
    ]
    lines = []
    for name, text, samples in fams:
        lines += [f"# HELP {_PREFIX}{name} {_help(text)}", f"# TYPE {_PREFIX}{name} gauge"]
        lines += [f'{_PREFIX}{name}{{cell="{_label(c)}"}} {_value(v)}' for c, v in sorted(samples)]
    for name, text, v in (
        ("last_run_timestamp_seconds", "Unix time the latest nightly run finished.",
         _epoch(cur.finished)),
        ("run_success", "1 when every cell of the latest nightly run that was not skipped "
         "succeeded.", int(cur.ok)),
        ("freed_bytes", "Bytes the latest nightly run's retention prune freed.",
         cur.freed_bytes)):
        lines += [f"# HELP {_PREFIX}{name} {_help(text)}", f"# TYPE {_PREFIX}{name} gauge",
                  f"{_PREFIX}{name} {_value(v)}"]
    return "\n".join(lines) + "\n"
