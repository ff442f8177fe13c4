"""Static index benchmark: 1,000 synthetic wheels across 50 projects.

Measures, in one run:
  1. publishing all 1,000 wheels in one transaction (copy + pages),
  2. regenerating every page of the stage from its wheels (reads each zip's METADATA),
  3. adding one wheel to the full index, and checks that only that project's pages and the
     root pages got new inodes (unrelated pages untouched).

Usage: python benchmarks/bench_index.py [--wheels 1000] [--projects 50]
Goal: regeneration < 2 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rocmbuild.artifacts.wheel import read_wheel  # noqa: E402
from rocmbuild.publish.static_index import StaticIndex  # noqa: E402


def synth_wheel(out: Path, name: str, version: str) -> Path:
    dist = name.replace("-", "_")
    path = out / f"{dist}-{version}-cp311-cp311-linux_x86_64.whl"
    di = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}/__init__.py", f"V = {version!r}\n" + "#" * 2000)
        zf.writestr(
            f"{di}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.10\n",
        )
        zf.writestr(
            f"{di}/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
        )
        zf.writestr(f"{di}/RECORD", "")
    return path


def stat_pages(stage: Path) -> dict[str, int]:
    return {str(p.relative_to(stage)): p.stat().st_ino for p in (stage / "simple").rglob("*.*")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", type=int, default=1000)
    ap.add_argument("--projects", type=int, default=50)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        per = a.wheels // a.projects
        paths = [
            synth_wheel(src, f"proj-{p:02d}", f"1.{v}+rocm6.2.gfx942")
            for p in range(a.projects)
            for v in range(per)
        ]
        t = time.perf_counter()
        infos = [read_wheel(p) for p in paths]
        t_read = time.perf_counter() - t
        idx = StaticIndex(Path(tmp) / "index")
        t = time.perf_counter()
        idx.publish(infos)
        t_publish = time.perf_counter() - t
        t_regen = idx.regenerate("stable")
        stage = idx.root / "stable"
        before = stat_pages(stage)
        extra = synth_wheel(src, "proj-07", "9.0")
        t = time.perf_counter()
        idx.publish([read_wheel(extra)])
        t_add = time.perf_counter() - t
        after = stat_pages(stage)
        changed = sorted(k for k in after if before.get(k) != after[k])
        expect = [
            "simple/index.html",
            "simple/index.json",
            "simple/proj-07/index.html",
            "simple/proj-07/index.json",
        ]
        ok = changed == expect
    print(f"read+hash {len(paths)} wheels: {t_read:.3f} s; cpus {os.cpu_count()}",
          file=sys.stderr)
    print(f"{len(paths):,} synthetic wheels (2 kB each, local versions like "
          f"`1.3+rocm6.2.gfx942`) across {a.projects} projects, temp dir on the local disk.")
    print()
    print("| measurement | result | goal |")
    print("|---|---|---|")
    print(f"| regenerate every page of the stage from its wheels (reads each zip's METADATA, "
          f"hashes) | {t_regen:.2f} s | < 2 s |")
    print(f"| publish all {len(paths):,} wheels in one transaction (copy + fsync each file + "
          f"pages + commit) | {t_publish:.2f} s | |")
    print(f"| add one wheel to the {len(paths):,}-wheel index | {t_add:.3f} s "
          f"({t_add / t_regen:.0%} of a full regeneration) | |")
    touched = ("root `index.html`/`index.json` + that project's two pages only" if ok
               else "UNEXPECTED: " + ", ".join(f"`{c}`" for c in changed))
    print(f"| pages given a new inode by that add | {touched} | unrelated pages untouched |")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
