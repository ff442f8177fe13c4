"""Compile time of the hip-attention probe for 1 arch vs 2 archs (goal: 1-arch <= 0.55x 2-arch).

1 arch is measured for gfx90a and gfx942 separately (their device compiles differ in cost);
the ratios are printed for each and for their mean.

Two measurements, each the median of --repeat runs, with the compiler rocmbuild detects:
  * device compile: the probe's attn.hip alone (`clang++ -x hip -O3 -c`): the part that scales
    with the number of archs
  * wheel build: `pip wheel --no-build-isolation --no-deps probes/hip-attention` end to end
    (CMake configure + the C-API binding compile + attn.hip + link + packaging)

    python benchmarks/bench_probe_archs.py [--repeat 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rocmbuild.core.errors import ToolchainError
from rocmbuild.core.run import run
from rocmbuild.host.compiler import accepts_arch, detect, hip_env

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "probes/hip-attention"


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        c = detect()
    except ToolchainError as e:
        print(f"skipped: no HIP compiler ({e})")
        return 77  # benchmarks/run.py: cannot run on this machine
    sets = [["gfx90a"], ["gfx942"], ["gfx90a", "gfx942"]]
    if accepts_arch(c, "gfx950")[0]:
        sets.append(["gfx90a", "gfx942", "gfx950"])
    jobs = os.cpu_count() or 1
    print(f"compiler: {c.path} {c.version} ({c.source}); cpus {jobs}", file=sys.stderr)
    res: dict[str, dict[str, float]] = {"device_compile": {}, "wheel_build": {}}
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        for archs in sets:
            key = "+".join(archs)
            argv = c.compile_argv(PROBE / "csrc/attn.hip", Path(tmp) / "attn.o", archs,
                                  ["-O3", "-fPIC", "-c"])  # as CMake's Release build
            dev = [timed(lambda a=argv: run(a, env=hip_env(), capture=True))
                   for _ in range(args.repeat)]
            res["device_compile"][key] = statistics.median(dev)
            env = {**hip_env(), **c.build_env(archs, jobs)}

            def wheel(a=archs, e=env) -> None:
                out = Path(tempfile.mkdtemp(dir=tmp))
                run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                     "--no-deps", "-w", str(out), str(PROBE)], env=e, capture=True)

            whl = [timed(wheel) for _ in range(args.repeat)]
            res["wheel_build"][key] = statistics.median(whl)
            print(f"{key:<22} device compile {res['device_compile'][key]:6.2f} s   "
                  f"wheel build {res['wheel_build'][key]:6.2f} s", file=sys.stderr)
    two = "gfx90a+gfx942"
    ratios = {}
    for k in res:
        for one in ("gfx90a", "gfx942"):
            ratios[f"{k}:{one}"] = res[k][one] / res[k][two]
        ratios[f"{k}:mean"] = (res[k]["gfx90a"] + res[k]["gfx942"]) / 2 / res[k][two]
    print(f"Compiler {c.path} {c.version} ({c.source}); median of {args.repeat} runs each. "
          f"\"device compile\" is `attn.hip` alone (`clang++ -x hip -O3 -c`); \"wheel build\" "
          f"is `pip wheel --no-build-isolation --no-deps probes/hip-attention` end to end with "
          f"`CMAKE_BUILD_PARALLEL_LEVEL={jobs}`. Goal: 1 arch <= 0.55x the 2-arch time.")
    print()
    print("| archs | device compile | wheel build |")
    print("|---|---|---|")
    for key in res["device_compile"]:
        print(f"| {key.replace('+', ' + ')} | {res['device_compile'][key]:.2f} s | "
              f"{res['wheel_build'][key]:.2f} s |")
    print()
    for k in res:
        what = k.replace("_", " ")
        r = {one: ratios[f"{k}:{one}"] for one in ("gfx90a", "gfx942", "mean")}
        verdict = "met" if r["mean"] <= 0.55 else "NOT met"
        print(f"- 1-arch / 2-arch, {what}: {r['gfx90a']:.2f} (gfx90a), {r['gfx942']:.2f} "
              f"(gfx942), mean {r['mean']:.2f}: goal {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps({"compiler": c.to_json(), "seconds": res,
                                               "ratios": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
