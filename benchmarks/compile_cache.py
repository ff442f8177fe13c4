"""Compile-cache benchmark (issue 13 item 5; docs/compile-cache.md), measured in one run for
the cmake path (tests/fixtures/compile_units.cmake_project: C++ units + one HIP unit for
gfx942) and the torch cpp_extension path (torch_extension: setup.py, CppExtension, ninja,
`pip wheel --no-build-isolation`), each through the real CLI (`python -m rocmbuild build`):

1. cold: an empty compile cache, a fresh build tree.
2. warm: `--force` (the build tree is made again from the source: nothing for ninja to reuse),
   the same compile cache. Goal: >= 5x faster than cold, hit rate reported.
3. killed at about 60 %: a cold build (another empty cache) stopped with SIGTERM once 60 % of
   its units are in the cache's log, then rerun: the rerun's time and hits vs cold.

Times are the build stage's (what the cache changes), the whole command's in brackets.
Run: python benchmarks/compile_cache.py [--units 8] [--jobs 2] [--tool ccache]. Prints the
Markdown body of docs/dev/benchmarks-notebook.md's ``compile_cache`` block on stdout
(benchmarks/run.py's convention: progress on stderr, exit 77 where the cache tool or a HIP
compiler is missing).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from rocmbuild.buildtools.compilecache import find_tool, parse_ccache_log  # noqa: E402
from tests.fixtures.compile_units import (  # noqa: E402
    CMAKE_RECIPE,
    EXT_RECIPE,
    cmake_project,
    torch_extension,
)

STAGE = re.compile(r"\[\d+/\d+\] build\n(?:.*\n)*?\s+ok in ([\d.]+)s")
LINE = re.compile(r"compile cache: (\d+)/(\d+) hits")


def _argv(recipe: Path, opts: argparse.Namespace, cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch", "gfx942",
            "--jobs", str(opts.jobs), "--compile-cache", opts.tool, "--compile-cache-dir",
            str(cache), *extra]


def _env(work: Path) -> dict[str, str]:
    return {**os.environ, "ROCMBUILD_WORKDIR": str(work),
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}


def build(recipe: Path, work: Path, opts: argparse.Namespace, cache: Path, *extra: str,
          ) -> tuple[float, float, str]:
    """(build stage seconds, command seconds, 'hits/total')."""
    t = time.perf_counter()
    res = subprocess.run(_argv(recipe, opts, cache, *extra), env=_env(work), capture_output=True,
                         text=True)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    stage, line = STAGE.search(res.stderr), LINE.search(res.stderr)
    return (float(stage[1]) if stage else wall, wall, f"{line[1]}/{line[2]}" if line else "?")


def _finished(text: str) -> int:
    """Units of the project (not CMake's compiler checks) that ccache's log shows compiled."""
    calls = re.split(r"(?m)^(?=# )", text)
    return parse_ccache_log("".join(
        c for c in calls if re.match(r"# \S*(u\d+\.cpp|k\.hip|module\.cpp)\s*$",
                                     c.split("\n")[0]))).misses


def killed(recipe: Path, work: Path, opts: argparse.Namespace, cache: Path, units: int,
           cold_s: float) -> float:
    """A cold build stopped (SIGTERM) once 60 % of ``units`` are in ccache's stats log (with
    sccache: after 60 % of the cold build's time); its wall time."""
    t = time.perf_counter()
    proc = subprocess.Popen(_argv(recipe, opts, cache), env=_env(work),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    want = -(-units * 6 // 10)
    while proc.poll() is None:
        time.sleep(0.2)
        if opts.tool == "sccache":
            done = want if time.perf_counter() - t >= 0.6 * cold_s else 0
        else:
            logs = list(work.glob("logs/*/*/compile-cache.log"))
            done = _finished(logs[0].read_text()) if logs else 0
        if done >= want:
            proc.terminate()
    proc.wait()
    return time.perf_counter() - t


def path_rows(name: str, template: str, opts: argparse.Namespace, base: Path) -> list[str]:
    units = opts.units + 1  # + the HIP unit / the module unit
    src = base / name / "src"
    if name == "cmake":
        cmake_project(src, opts.units, hip=True, heavy=True)
    else:
        torch_extension(src, opts.units, heavy=True)
    recipe = base / name / f"{name}.toml"
    recipe.write_text(template.format(src=src))
    cold = build(recipe, base / name / "w1", opts, base / name / "cache1")
    warm = build(recipe, base / name / "w1", opts, base / name / "cache1", "--force")
    stopped = killed(recipe, base / name / "w2", opts, base / name / "cache2", units, cold[1])
    rerun = build(recipe, base / name / "w2", opts, base / name / "cache2")
    return [
        f"| {name} | cold | {cold[0]:.1f} s ({cold[1]:.1f} s) | {cold[2]} | |",
        f"| {name} | warm (--force, tree rebuilt) | {warm[0]:.1f} s ({warm[1]:.1f} s) | "
        f"{warm[2]} | **{cold[0] / warm[0]:.1f}x** faster |",
        f"| {name} | killed at ~60 % | ({stopped:.1f} s) | | |",
        f"| {name} | rerun after the kill | {rerun[0]:.1f} s ({rerun[1]:.1f} s) | {rerun[2]} | "
        f"{rerun[0] / cold[0]:.2f}x of cold |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=8, help="C++ units per project (heavy: <regex>)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tool", default="ccache", choices=("ccache", "sccache"))
    ap.add_argument("--only", choices=("cmake", "cpp_extension"))
    opts = ap.parse_args()
    if find_tool(opts.tool) is None:
        print(f"{opts.tool} is not installed", file=sys.stderr)
        raise SystemExit(77)
    if opts.only != "cpp_extension":
        from rocmbuild.core.errors import ToolchainError
        from rocmbuild.host import compiler

        try:
            compiler.detect()
        except ToolchainError as exc:
            print(f"no HIP compiler for the cmake path: {exc.message}", file=sys.stderr)
            raise SystemExit(77) from None
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-ccbench-"))
    rows = ["| path | build | build stage (command) | hits | vs cold |", "|---|---|---|---|---|"]
    try:
        for name, template in (("cmake", CMAKE_RECIPE), ("cpp_extension", EXT_RECIPE)):
            if opts.only in (None, name):
                print(f"compile_cache: {name} ...", file=sys.stderr)
                rows += path_rows(name, template, opts, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{opts.tool}; {opts.units} heavy C++ units (`<regex>`) + 1 (cmake: a HIP unit for "
          f"gfx942; cpp_extension: the module unit), -j{opts.jobs}; measured "
          f"{datetime.date.today()} on {platform.node()} ({os.cpu_count()} cpus).\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
