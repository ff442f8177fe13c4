"""CK-scale compile benchmark: a handful of light Composable Kernel attention units (the real
cost profile of flash-attn's CK variant), built by `rocmbuild build ck-fmha-probe` end to end,
for 1 arch (gfx942) and 2 archs (gfx90a + gfx942), each in a fresh workspace (the sdist download
shared, its extraction and the build not). Per build: wall time, the units compiled, the summed
per-unit compile time from ninja's own log (`.ninja_log`: start/end ms per output), and the
audit's archs. The ratio 1-arch / 2-arch is measured within one run.

    python benchmarks/ck_units.py [--units PATTERN] [--jobs N]

Prints the Markdown body of docs/dev/benchmarks-notebook.md's ``ck_units`` block
(``python benchmarks/run.py ck_units`` puts it there with the date and the machine). The
default pattern is the two light d64 fp16 batch forward units (no logits soft-cap, bias, mask,
lse or dropout); `--units 'fmha_fwd_d64_fp16_*'` compiles more.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIGHT = "fmha_fwd_d64_fp16_batch_*_nlogits_nbias_nmask_nlse_ndropout_*"


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "?")
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cpus ({model}), load {load:.1f} at start"


def ninja_units(build_dir: Path) -> tuple[int, float]:
    """(compile units, summed compile seconds) from ninja's log: the object files only."""
    log = build_dir / ".ninja_log"
    n, total = 0, 0.0
    for line in log.read_text().splitlines()[1:]:
        start, end, _mtime, out, *_ = line.split("\t")
        if out.endswith(".o"):
            n += 1
            total += (int(end) - int(start)) / 1000
    return n, total


@dataclass(frozen=True)
class Row:
    archs: str
    wall: float
    units: int
    unit_s: float
    audit: str


def build(archs: str, pattern: str, jobs: int, downloads: Path) -> Row:
    with tempfile.TemporaryDirectory(prefix="bench-ck-") as tmp:
        cache = Path(tmp) / "cache"
        cache.mkdir()
        (cache / "downloads").symlink_to(downloads)
        env = {**os.environ, "ROCMBUILD_WORKDIR": str(Path(tmp) / "build"),
               "ROCMBUILD_CACHE_DIR": str(cache)}
        t0 = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-m", "rocmbuild", "build", "ck-fmha-probe", "--arch", archs,
             "--jobs", str(jobs), "--opt", f"ck-fmha-probe.units={pattern}"],
            env=env, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            raise SystemExit(f"build for {archs} failed:\n{res.stderr[-3000:]}")
        found = re.search(r"device code for ([\w, ]+)", res.stderr)
        tree = next((Path(tmp) / "build/src/ck-fmha-probe").iterdir())
        units, unit_s = ninja_units(tree / "_rocmbuild_cmake")
        return Row(archs, wall, units, unit_s, found[1] if found else "?")


def table(rows: list[Row], pattern: str, jobs: int) -> str:
    one = next(r for r in rows if r.archs == "gfx942")
    two = next(r for r in rows if r.archs == "gfx90a,gfx942")
    out = [
        f"`python benchmarks/ck_units.py` ({datetime.date.today()}; {machine()}; "
        f"MAX_JOBS {jobs}): `rocmbuild build ck-fmha-probe` with "
        f"`--opt ck-fmha-probe.units='{pattern}'`, clang-22, fresh workspace each (the sdist "
        "download cached; its extraction, CMake's configure with generate.py, the compiles, "
        "link, packaging and audit all counted).",
        "",
        "| archs | units | wall s | summed unit compile s (.ninja_log) | per unit s | audit |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(f"| {r.archs} | {r.units} | {r.wall:.1f} | {r.unit_s:.1f} | "
                   f"{r.unit_s / max(r.units, 1):.1f} | {r.audit} |")
    ratio = one.unit_s / two.unit_s
    out += ["", f"Unit compile time, 1 arch / 2 archs: {ratio:.2f} (device code is compiled "
            "once per arch, one after another, inside each unit's compile)."]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", default=LIGHT)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--downloads", default=str(REPO / ".pytest_cache/d/rocmbuild-downloads"),
                    help="a download cache holding (or receiving) the flash-attn sdist")
    args = ap.parse_args()
    Path(args.downloads).mkdir(parents=True, exist_ok=True)
    rows = [build(a, args.units, args.jobs, Path(args.downloads))
            for a in ("gfx942", "gfx90a,gfx942")]
    text = table(rows, args.units, args.jobs)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
