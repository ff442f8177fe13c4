"""The DeepSpeed recipe's whole CPU op set, built for real: `rocmbuild build deepspeed --variant
cpu-ops --arch gfx942` (the PyPI sdist 0.19.8, cpu_adam + cpu_adagrad + cpu_lion compiled with
g++ against the installed CPU torch) in a fresh workspace. CI builds cpu_adam alone
(tests/integration/test_deepspeed_cpu_ops.py); this measures the set: wall time of the whole
command, and per compile unit its seconds and peak RSS as the build's units.jsonl records them
(rocmbuild's compiler launcher, one record per compiler process).

Run: .venv/bin/python benchmarks/deepspeed_cpu_ops.py [--keep DIR]. Needs PyPI for the sdist
(kept in DIR/cache/downloads with --keep). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGS = ["build", "deepspeed", "--variant", "cpu-ops", "--arch", "gfx942"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="workspace to use and keep (default: a temp dir)")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-deepspeed-"))
    env = {**os.environ, "ROCMBUILD_WORKDIR": str(base / "build"),
           "ROCMBUILD_CACHE_DIR": str(base / "cache")}
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "rocmbuild", *ARGS], env=env,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        print(res.stderr[-3000:], file=sys.stderr)
        return 1
    logs = sorted((base / "build" / "logs" / "deepspeed").glob("*/units.jsonl"))
    units = [json.loads(line) for line in logs[-1].read_text().splitlines() if line.strip()]
    compiled = [u for u in units if u.get("unit") and "build/temp" in str(u.get("out", ""))]
    print("| `rocmbuild " + " ".join(ARGS) + "` | s | peak RSS GiB |")
    print("|---|---|---|")
    for u in compiled:
        name = Path(str(u["out"])).name
        print(f"| compile {name} | {u['s']:.1f} | {u['rss'] / 2**30:.2f} |")
    peak = max((u["rss"] for u in compiled), default=0) / 2**30
    print(f"| whole command (cold workspace, {len(compiled)} compiles, one at a time) "
          f"| {wall:.1f} | {peak:.2f} (largest unit) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
