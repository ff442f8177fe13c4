"""The no-op rebuild (issue 13): `python -m rocmbuild <recipe> ...` when the cache already holds
the wheel, the whole CLI process, median of N runs. Goal: <= 0.15 s, and a hit imports only
what it needs. A repeated command line is served by its memo (``rocmbuild.commands.noop_memo``); for
comparison each round also runs the full path's hit (the memo removed first; that run writes it
again), interleaved with the memo's in one run.

It builds the flash-attn Triton variant from the real PyPI sdist once in a temporary workspace
(the download is reused from ``--downloads DIR`` when given, e.g. pytest's cache
``.pytest_cache/d/rocmbuild-downloads``), then runs the same command N times with byte-code
caching on (``PYTHONDONTWRITEBYTECODE`` removed, as on a user's machine: an installed tool has
its .pyc files) and reports the median and best wall time, the CPU time of the process (user +
system: less sensitive than wall time to other work on a shared machine), the load average and
the number of modules a hit imports (``python benchmarks/run.py noop_rebuild`` puts the table into
docs/dev/benchmarks-notebook.md with the date and the machine).

Run: .venv/bin/python benchmarks/noop_rebuild.py [--repeat 20] [--downloads DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARGS = ["flash-attn", "--arch", "gfx942", "--variant", "triton", "--source", "pypi"]
DOC = REPO / "docs" / "dev" / "benchmarks-notebook.md"
HEADER = ("| date (UTC) | machine | load avg | modules imported | median wall s | best wall s "
          "| median CPU s | full path: median wall s | full path: median CPU s |\n"
          "|---|---|---|---|---|---|---|---|---|")


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(repeat: int, downloads: Path | None) -> dict[str, object]:
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-noop-"))
    cache = base / "cache"
    cache.mkdir()
    if downloads is not None:
        (cache / "downloads").symlink_to(downloads.absolute())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ROCMBUILD_WORKDIR=str(base / "build"), ROCMBUILD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]))
    rb = [sys.executable, "-m", "rocmbuild", *ARGS]
    subprocess.run(rb, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(rb, env=env, check=True, capture_output=True)  # writes the .pyc files
    walls, cpus, full_walls, full_cpus = [], [], [], []
    for _ in range(repeat):
        for memo, w, c in ((True, walls, cpus), (False, full_walls, full_cpus)):
            if not memo:
                shutil.rmtree(cache / "memo")
            cpu0, t = _child_cpu(), time.perf_counter()
            res = subprocess.run(rb, env=env, check=True, capture_output=True, text=True)
            w.append(time.perf_counter() - t)
            c.append(_child_cpu() - cpu0)
            assert res.stderr.rstrip().endswith("cached"), res.stderr
    res = subprocess.run([sys.executable, "-X", "importtime", *rb[1:]], env=env, check=True,
                         capture_output=True, text=True)
    modules = sum(1 for line in res.stderr.splitlines() if line.startswith("import time:")) - 1
    return {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": f"{platform.node() or 'this host'}: {os.cpu_count()} cpus, python "
                   f"{platform.python_version()}",
        "load": f"{os.getloadavg()[0]:.1f}",
        "modules": modules,
        "median": statistics.median(walls),
        "best": min(walls),
        "cpu": statistics.median(cpus),
        "full": statistics.median(full_walls),
        "full_cpu": statistics.median(full_cpus),
    }


def row(m: dict[str, object]) -> str:
    return (f"| {m['date']} | {m['machine']} | {m['load']} | {m['modules']} "
            f"| {m['median']:.3f} | {m['best']:.3f} | {m['cpu']:.3f} | {m['full']:.3f} "
            f"| {m['full_cpu']:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--downloads", type=Path, default=None,
                    help="a directory of verified downloads to reuse (<sha256>/<file>)")
    opts = ap.parse_args()
    m = measure(opts.repeat, opts.downloads)
    print(HEADER)
    print(row(m))
    print(f"\n- no-op rebuild: median {m['median']:.3f} s over {opts.repeat} runs "
          f"(goal <= 0.15 s); {m['modules']} modules imported; the full path's hit "
          f"{m['full']:.3f} s")


if __name__ == "__main__":
    main()
