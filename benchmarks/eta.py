"""ETA error: the ETA rocmbuild shows at 25 % of the units vs the build's actual end (goal: within
20 % of the build's duration).

A real build: a generated CMake project of --units C++ translation units of uneven cost (each
instantiates std::map and std::vector templates a unit-dependent number of times, so the units
take from well under a second to a few seconds), configured with -G Ninja and built with
`cmake --build -j JOBS` through rocmbuild's run.run and progress.Display, exactly as the build
stage does (NINJA_STATUS included). Two builds:

  1. cold, no history: the ETA at 25 % comes from the measured rate;
  2. the same units again after `ninja -t clean`, with the first build's .ninja_log as the
     previous build: the ETA at 25 % blends the rate and the previous unit times.

For each: predicted end = (time at the first status line >= 25 %) + ETA; error = |predicted end -
actual end| / actual duration (from the start of `cmake --build`). Prints one markdown row per
build with the date and the machine.

    python benchmarks/eta.py [--units 40] [--jobs 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from rocmbuild.buildtools import progress
from rocmbuild.core.run import run

UNIT = """#include <map>
#include <string>
#include <vector>
template <int N> struct Work {{
  static int go(std::map<std::string, std::vector<int>>& m) {{
    m[std::to_string(N)].push_back(N);
    return Work<N - 1>::go(m) + static_cast<int>(m.size());
  }}
}};
template <> struct Work<0> {{
  static int go(std::map<std::string, std::vector<int>>&) {{ return 0; }}
}};
int unit{i}() {{ std::map<std::string, std::vector<int>> m; return Work<{depth}>::go(m); }}
"""


def project(d: Path, units: int) -> None:
    d.mkdir(parents=True)
    names = []
    for i in range(units):
        depth = 50 + (i * 37) % 400  # uneven cost: 50..449 nested instantiations
        (d / f"u{i}.cpp").write_text(UNIT.format(i=i, depth=depth))
        names.append(f"u{i}.cpp")
    (d / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(eta LANGUAGES CXX)\n"
        f"add_library(eta STATIC {' '.join(names)})\n")


def build(src: Path, bdir: Path, jobs: int, previous: dict[str, float]) -> dict[str, float]:
    seen: list[tuple[float, progress.Status, float | None, str]] = []

    class Recorder(progress.Display):
        def __call__(self, line: str) -> None:
            super().__call__(line)
            s = progress.parse(line)
            if s is not None:
                now = time.monotonic()
                left, how = self.eta.estimate(now)
                seen.append((now, s, left, how))

    env = {**os.environ, "NINJA_STATUS": progress.NINJA_STATUS}
    shown = Recorder("eta", jobs, previous, emit=lambda s: None, tty=False, every=3600)
    t0 = time.monotonic()
    try:
        run(["cmake", "--build", str(bdir), "-j", str(jobs)], env=env, on_line=shown,
            log_path=bdir / "build.out")
    finally:
        shown.stop()
    end = seen[-1][0]
    at, status, left, how = next(x for x in seen if x[1].done >= 0.25 * x[1].total)
    assert left is not None, "no ETA at 25 %"
    predicted = at + left
    return {"duration_s": end - t0, "at_s": at - t0, "done": status.done, "total": status.total,
            "predicted_end_s": predicted - t0, "error": abs(predicted - end) / (end - t0),
            "how": how}  # type: ignore[dict-item]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rocmbuild-eta-"))
    try:
        src, bdir = tmp / "src", tmp / "build"
        project(src, args.units)
        run(["cmake", "-S", str(src), "-B", str(bdir), "-G", "Ninja",
             "-DCMAKE_BUILD_TYPE=Release"], capture=True)
        cold = build(src, bdir, args.jobs, {})
        previous = progress.load_ninja_log(bdir / ".ninja_log")
        run(["ninja", "-C", str(bdir), "-t", "clean"], capture=True)
        warm = build(src, bdir, args.jobs, previous)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    date = datetime.date.today().isoformat()
    machine = f"{platform.node()}, {os.cpu_count()} cpus, -j {args.jobs}"
    print("| build | ETA from | at | predicted end | actual end | error | date, machine |")
    print("|---|---|---|---|---|---|---|")
    for name, r in (("cold", cold), ("again, with the first's .ninja_log", warm)):
        print(f"| {name}: {args.units} C++ units | {r['how']} | {r['done']}/{r['total']} "
              f"({r['at_s']:.0f} s) | {r['predicted_end_s']:.0f} s | {r['duration_s']:.0f} s | "
              f"{100 * float(r['error']):.1f} % | {date}, {machine} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cold": cold, "warm": warm, "date": date,
                                               "machine": machine}, indent=1))
    return 0 if max(float(cold["error"]), float(warm["error"])) <= 0.20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
