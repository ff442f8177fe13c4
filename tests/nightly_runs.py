"""Small RunReports for the nightly report tests (unit and integration): three cells over a few
nights, as the controller would hand them to ``nightly.report.write``. No GPU here: the TFLOP/s
values are the numbers a kernel gate would have reported, written by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rocmbuild.artifacts.results import Status
from rocmbuild.nightly.model import CellOutcome, End, RunReport

FA = "flash-attn.triton.pypi.gfx942"
GIT = "flash-attn.triton.git.gfx942"
PROBE = "hip-probe.default.recipe.gfx90a"


def outcome(cell: str, status: Status = Status.SUCCESS, **kw: object) -> CellOutcome:
    ok = status is Status.SUCCESS
    base = CellOutcome(
        cell_id=cell, status=status,
        end=End.COMPLETED if ok else End.SKIPPED if status is Status.SKIPPED else End.FAILED,
        duration_s=600.0 if ok else 1.5, log=f"cells/{cell}/log.txt",
        wheel="flash_attn-2.8.3+rocm6.2.gfx942-cp311-cp311-linux_x86_64.whl" if ok else None,
        wheel_size=1_234_567 if ok else None, cache_hit_rate=0.75 if ok else None,
        peak_rss_bytes=3 << 30 if ok else None, disk_bytes=5 << 20 if ok else None,
        tflops=180.5 if ok and cell != PROBE else None)
    return replace(base, **kw)  # type: ignore[arg-type]


def night(day: int, *outcomes: CellOutcome, **kw: object) -> RunReport:
    r = RunReport(run_id=f"202611{day:02d}T020000Z", started=f"2026-11-{day:02d}T02:00:00Z",
                  finished=f"2026-11-{day:02d}T03:10:00Z", executor="local",
                  outcomes=tuple(outcomes))
    return replace(r, **kw)  # type: ignore[arg-type]


def three_nights() -> list[RunReport]:
    """Night 1: all built; night 2: the git cell fails; night 3: it recovers, the rest skip."""
    return [
        night(1, outcome(FA), outcome(GIT, duration_s=900.0, tflops=175.0), outcome(PROBE)),
        night(2, outcome(FA, Status.SKIPPED, reason="validated wheel for key 1a2b in staging"),
              outcome(GIT, Status.FAILED, reason="build failed: exit 1", exit_code=6),
              outcome(PROBE, duration_s=60.0), freed_bytes=3 << 30,
              lock_note="took over the stale lock of pid 4242 on node1 (started 2026-11-01)"),
        night(3, outcome(FA, Status.SKIPPED, reason="unchanged"),
              outcome(GIT, duration_s=840.0, tflops=190.25, cache_hit_rate=0.9),
              outcome(PROBE, Status.SKIPPED, reason="unchanged")),
    ]


def write_logs(reports_dir: Path, report: RunReport) -> None:
    """The cells' log files, as the executor leaves them in the run directory."""
    for o in report.outcomes:
        p = reports_dir / report.run_id / o.log
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"log of {o.cell_id}\n")
