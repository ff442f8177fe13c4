"""The nightly controller stays cheap (issue 26): a no-change `rocmbuild nightly` (the real run,
not --dry-run: lock, host detection, plan and decide every cell, manifest, the SKIP cells'
promotion check, report, history page, .prom) over 60 cells whose cached wheels are 300 MB.
Goal: under 5 s. Each cell's lookup used to hash its wheel (twice: the decision and the SKIP
outcome); now the verified stamp (``rocmbuild.cache.stamp``) vouches for an unchanged wheel and
only delivery hashes.

Setup (slow once): 30 path-source recipes x 2 archs = 60 cells; `nightly --dry-run --json`
gives each cell's cache key; each key gets a cache entry (``cache.store``, validation passed)
holding a small real wheel, which is published to the staging stage and promoted; then each
entry's wheel is replaced by a sparse file of ``--size-mb`` (``truncate``: it hashes as zeros,
so the recorded sha256 is computed once) and entry.json records its size and sha256. The wheel
names are the benchmark's own (``ctlcellNN-1.0-py3-none-any.whl``), not what a build of the
recipe would name: the controller reads them from the cache entry and the index only.

Then, interleaved in one run: the old path (the tree at ``--old-ref``, the commit before the
stamp: every lookup hashes; run from ``git archive`` of it, and only when every cell still
SKIPs with it), the first run of the new code (no stamps yet: one hash per cell, then stamped),
and ``--repeat`` stamped runs (the goal's figure: their median). Wall and CPU time of the whole
CLI process.

Run: .venv/bin/python benchmarks/bench_nightly_controller.py [--cells 60] [--size-mb 300]
     [--repeat 3] [--old-ref 8ca4083]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
ARCHS = ("gfx90a", "gfx942")
GOAL_S = 5.0


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _recipes(base: Path, n: int) -> list[str]:
    names = []
    for i in range(n):
        name = f"ctl{i:02d}"
        src = base / f"{name}-src" / "demo"
        src.mkdir(parents=True)
        (src / "__init__.py").write_text(f"VALUE = {i}\n")
        (base / f"{name}-src" / "setup.py").write_text(
            f'from setuptools import setup\nsetup(name="{name}", version="1.0")\n')
        (base / f"{name}.toml").write_text(f"""schema_version = 1
[package]
name = "{name}"
[source]
path = "{name}-src"
[arch]
supported = {json.dumps(list(ARCHS))}
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
""")
        names.append(f"{name}.toml")
    return names


def _wheel(d: Path, project: str) -> Path:
    """A small valid wheel (METADATA, WHEEL, RECORD) named for ``project`` 1.0."""
    path = d / f"{project}-1.0-py3-none-any.whl"
    info = f"{project}-1.0.dist-info"
    files = {f"{project}/__init__.py": b"",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n"
                                 .encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as z:
        rows = []
        for name, data in files.items():
            z.writestr(name, data)
            rows.append(f"{name},,")
        z.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    return path


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    return env


def setup(base: Path, cells: int, size: int) -> tuple[Path, list[str]]:
    from rocmbuild.cache import store as cache
    from rocmbuild.publish import api as pub

    recipes = _recipes(base, (cells + len(ARCHS) - 1) // len(ARCHS))
    config = base / "nightly.toml"
    config.write_text(f"""workdir = "build"
cache_dir = "cache"
[[matrix]]
recipes = {json.dumps(recipes)}
archs = {json.dumps(list(ARCHS))}
[publish]
index = "index"
[reports]
dir = "reports"
history = 5
""")
    res = subprocess.run([sys.executable, "-m", "rocmbuild", "nightly", "--config", str(config),
                          "--dry-run", "--json"], cwd=base, env=_env(REPO / "src"),
                         capture_output=True, text=True, check=True)
    planned = json.loads(res.stdout)
    _say(f"setup: {len(planned)} cells planned; storing, publishing, promoting")
    wheels, keys = base / "wheels-small", []
    wheels.mkdir()
    for i, p in enumerate(planned):
        w = _wheel(wheels, f"ctlcell{i:02d}")
        cache.store(base / "cache", p["cache_key"], w, hashlib.sha256(w.read_bytes()).hexdigest(),
                    {"recipe": p["cell"].split(".")[0], "variant": None, "archs": [],
                     "duration_s": 1.0}, validation=cache.Validation("passed", None, time.time()),
                    keep_source=True)
        keys.append(p["cache_key"])
    index = str(base / "index")
    pub.publish(sorted(wheels.iterdir()), pub.PublishOptions(index=index, stage="staging"))
    for i in range(len(planned)):
        pub.promote(pub.PromoteOptions(index=index, project=f"ctlcell{i:02d}", version="1.0"))
    _say(f"setup: {size >> 20} MiB sparse wheels, hashing one")
    zeros = base / "zeros.whl"
    with open(zeros, "wb") as f:
        f.truncate(size)
    with open(zeros, "rb") as f:
        sha = hashlib.file_digest(f, "sha256").hexdigest()
    zeros.unlink()
    for key in keys:
        d = base / "cache" / "wheels" / key
        meta = json.loads((d / "entry.json").read_text())
        tmp = d / (meta["wheel"] + ".tmp")
        with open(tmp, "wb") as f:
            f.truncate(size)
        os.replace(tmp, d / meta["wheel"])
        (d / "entry.json").write_text(json.dumps({**meta, "size": size, "sha256": sha},
                                                 indent=2, sort_keys=True))
    time.sleep(2.1)  # the stamp's racy window (RACY_NS) after the wheels' last change
    return config, keys


def one_run(config: Path, src: Path) -> tuple[float, float]:
    cpu0, t0 = _child_cpu(), time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "rocmbuild", "nightly", "--config", str(config),
                          "--json"], cwd=config.parent, env=_env(src), capture_output=True,
                         text=True)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if res.returncode != 0:
        raise RuntimeError(f"nightly exited {res.returncode}: {res.stderr[-2000:]}")
    statuses = {c["status"] for c in json.loads(res.stdout)["cells"]}
    if statuses != {"skipped"}:
        raise RuntimeError(f"not a no-change run: {statuses}: {res.stderr[-2000:]}")
    return wall, cpu


def old_tree(base: Path, ref: str) -> Path | None:
    """``ref``'s src/ (git archive), or None when this checkout lacks the commit."""
    ok = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{ref}^{{commit}}"],
                        capture_output=True).returncode == 0
    if not ok:
        return None
    out = base / "old"
    out.mkdir()
    blob = subprocess.run(["git", "-C", str(REPO), "archive", ref, "src"], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=blob, check=True)
    return out / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=60)
    ap.add_argument("--size-mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old-ref", default="8ca4083")
    ap.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    a = ap.parse_args()
    if a.cells < len(ARCHS) or a.cells % len(ARCHS):
        ap.error(f"--cells: a multiple of {len(ARCHS)} (recipes x {', '.join(ARCHS)})")
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-ctl-"))
    try:
        config, keys = setup(base, a.cells, a.size_mb << 20)
        stamps = [base / "cache" / "wheels" / k / "verified.json" for k in keys]
        rows: list[tuple[str, float, float]] = []
        old = old_tree(base, a.old_ref)
        if old is not None:
            _say(f"old path ({a.old_ref}) ...")
            try:
                wall, cpu = one_run(config, old)
                assert not any(s.exists() for s in stamps), "the old tree wrote stamps"
                rows.append((f"old path ({a.old_ref}: every lookup hashes)", wall, cpu))
            except RuntimeError as exc:  # its keys differ from today's: not comparable
                _say(f"old path not comparable: {exc}")
        _say("first run, no stamps ...")
        wall, cpu = one_run(config, REPO / "src")
        assert all(s.is_file() for s in stamps), "the first run wrote no stamps"
        rows.append(("first run after the build (no stamps: one hash per cell)", wall, cpu))
        walls, cpus = [], []
        for i in range(a.repeat):
            _say(f"stamped run {i + 1}/{a.repeat} ...")
            w, c = one_run(config, REPO / "src")
            walls.append(w)
            cpus.append(c)
        stamped = statistics.median(walls)
        rows.append((f"stamped (median of {a.repeat}; best {min(walls):.2f} s)", stamped,
                     statistics.median(cpus)))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            _say(f"kept {base}")
    print(f"A no-change `rocmbuild nightly` (the real run: every cell SKIPPED) over {len(keys)} "
          f"cells whose cached wheels are {a.size_mb} MB sparse files; whole CLI process. "
          f"Load average {os.getloadavg()[0]:.1f} at the end.\n")
    print("| run | wall s | CPU s (user + system) |\n|---|---|---|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    if old is not None and len(rows) == 3:
        print(f"\nThe old path takes {rows[0][1] / stamped:.1f}x the stamped run's wall time "
              f"({rows[0][2] / rows[2][2]:.1f}x its CPU time).")
    print(f"\nGoal < {GOAL_S:g} s: {'met' if stamped < GOAL_S else 'NOT met'} "
          f"({stamped:.2f} s).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
