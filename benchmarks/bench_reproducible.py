"""Reproducible wheels, repeated: cold builds of one recipe in workspaces at different paths, and a
`--force` rebuild in the first, all give the same sha256; with the wall time of each build.

The tests build each of these once and compare it with one rebuild (`rocmbuild verify`:
tests/integration/test_verify_wheels.py, tests/integration/hip/test_reproducible_cmake.py); the
further repeats, which the suite used to run, are here:

  * flash-attn, Triton variant, from the pinned PyPI sdist (downloaded once, shared);
  * the cmake backend's vecadd (tests/fixtures/cmake-hip, gfx90a+gfx942) with the detected HIP
    compiler (skipped, with the reason, where there is none).

    python benchmarks/bench_reproducible.py [--builds 3] [--only triton|cmake]

Exits 1 when two builds of one recipe differ (the table is printed first).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.conftest import TRITON_ARGS  # noqa: E402
from tests.integration.hip.conftest import VECADD_RECIPE  # noqa: E402

CMAKE_ARGS = ("build", "{recipe}", "--arch", "gfx90a,gfx942")
Row = tuple[str, str, float, str]
"""(recipe, which build, wall s, sha256)"""


def build(argv: list[str], workdir: Path, downloads: Path, *more: str) -> tuple[float, str]:
    """(wall s, sha256 of the one wheel) of a `rocmbuild` run in ``workdir``."""
    cache = workdir / "cache"
    if not cache.exists():
        cache.mkdir(parents=True)
        (cache / "downloads").symlink_to(downloads)
    env = {**os.environ, "ROCMBUILD_WORKDIR": str(workdir), "ROCMBUILD_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "rocmbuild", *argv, *more], env=env,
                         capture_output=True, text=True)
    took = time.perf_counter() - t
    if res.returncode != 0:
        sys.exit(f"rocmbuild {' '.join(argv)} in {workdir}: exit {res.returncode}\n{res.stderr}")
    (wheel,) = (workdir / "wheels").glob("*.whl")
    return took, hashlib.sha256(wheel.read_bytes()).hexdigest()


def series(name: str, slug: str, argv: list[str], base: Path, builds: int) -> list[Row]:
    """``builds`` cold builds in workspaces whose paths differ in length (``<slug>/w``,
    ``<slug>/wx``, ...), then `--force` in the first (its compile cache is warm, as a user's)."""
    downloads = base / "downloads"
    downloads.mkdir(exist_ok=True)
    rows = []
    spaces = [base / slug / ("w" + "x" * i) for i in range(builds)]
    for ws in spaces:
        took, sha = build(argv, ws, downloads)
        rows.append((name, f"cold, `{ws.relative_to(base)}`", took, sha))
        print(f"{name}: {rows[-1][1]} {took:.1f} s {sha[:12]}", file=sys.stderr)
    took, sha = build(argv, spaces[0], downloads, "--force")
    rows.append((name, f"`--force`, `{spaces[0].relative_to(base)}`", took, sha))
    print(f"{name}: --force {took:.1f} s {sha[:12]}", file=sys.stderr)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", type=int, default=3, help="cold builds per recipe (>= 2)")
    ap.add_argument("--only", choices=("triton", "cmake"), default=None)
    opts = ap.parse_args()
    if opts.builds < 2:
        ap.error("--builds: at least 2")
    rows: list[Row] = []
    notes = []
    with tempfile.TemporaryDirectory(prefix="bench-repro-") as tmp:
        base = Path(tmp)
        if opts.only in (None, "triton"):
            rows += series("flash-attn triton", "triton", ["build", *TRITON_ARGS], base,
                           opts.builds)
        if opts.only in (None, "cmake"):
            from rocmbuild.core.errors import ToolchainError
            from rocmbuild.host.compiler import detect

            try:
                c = detect()
            except ToolchainError as e:
                notes.append(f"- cmake vecadd: skipped, no HIP compiler ({e})")
            else:
                recipe = base / "vecadd.toml"
                recipe.write_text(VECADD_RECIPE.format(src=REPO / "tests/fixtures/cmake-hip"))
                argv = [a.format(recipe=recipe) for a in CMAKE_ARGS]
                rows += series(f"cmake vecadd ({Path(c.path).name})", "cmake", argv, base,
                               opts.builds)
    if not rows:
        print("\n".join(notes), file=sys.stderr)
        return 77  # benchmarks/run.py: cannot run on this machine
    print("| recipe | build | wall s | sha256 |")
    print("|---|---|---|---|")
    for name, what, took, sha in rows:
        print(f"| {name} | {what} | {took:.1f} | `{sha[:12]}...` |")
    print()
    differ = []
    for name in dict.fromkeys(r[0] for r in rows):
        shas = {r[3] for r in rows if r[0] == name}
        n = sum(r[0] == name for r in rows)
        print(f"- {name}: {n} builds, " + ("the same sha256" if len(shas) == 1
                                            else f"{len(shas)} different sha256"))
        if len(shas) > 1:
            differ.append(name)
    print("\n".join(notes))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
