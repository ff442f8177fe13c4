"""Build benchmarks for the flash-attn Triton variant (real PyPI sdist), measured in one run:

1. no-op rebuild (`rocmbuild flash-attn ...` with a cache hit, whole CLI process) vs a bare
   `pip wheel --no-build-isolation` of the same source. Goal: <= 0.3 s and >= 20x faster.
2. orchestrator overhead on a cold build (fresh workspace, download already cached) vs by hand
   (extract the sdist; when the plan has a build environment, make a venv that sees the host's
   packages and pip-install the same build requirements into it, as rocmbuild's env stage does:
   each one even where the host has it, and the host's pip, which runs the build;
   then `pip wheel --no-build-isolation` with the same environment). Goal (issue 13): <= 1 s.

3. the cache hit itself, in process (``--noop-only`` measures just this and 1.): entry.json
   checked, the wheel hashed (sha256 proves the bytes are the recorded ones), a copy delivered.

Run: .venv/bin/python benchmarks/bench_build.py [--repeat N] [--noop-only]. Prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import site
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ARGS = ["flash-attn", "--arch", "gfx942", "--variant", "triton", "--source", "pypi"]


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noop-repeat", type=int, default=10)
    ap.add_argument("--noop-only", action="store_true",
                    help="measure only the no-op rebuild and the cache hit (no cold builds)")
    opts = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-bench-"))
    # byte-code caching on, as on a user's machine (without it every start compiles each module)
    user_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {
        **user_env,
        "ROCMBUILD_WORKDIR": str(base / "build"),
        "ROCMBUILD_CACHE_DIR": str(base / "cache"),
        "ROCMBUILD_VERBOSITY": "0",
    }
    rb = [sys.executable, "-m", "rocmbuild"]
    timed(rb + ARGS, env)  # warm: download + first build
    if opts.noop_only:
        noop_only(rb, env, base, opts.noop_repeat)
        return
    plan = json.loads(
        subprocess.run(
            rb + ["plan", *ARGS, "--json"], env=env, check=True, capture_output=True, text=True
        ).stdout
    )
    archive = next((base / "cache" / "downloads").rglob("*.tar.gz"))
    bare_env = {**user_env, **plan["env"]}
    requires = (plan.get("build_env") or {}).get("requires") or []

    bare, bare_pip_only, cold, noop = [], [], [], []
    for i in range(opts.repeat):
        # by hand: extract + pip wheel
        work = base / f"hand{i}"
        t = time.perf_counter()
        with tarfile.open(archive) as tf:
            tf.extractall(work, filter="data")
        tree = next(work.iterdir())
        python = sys.executable
        if requires:  # the recipe's build environment, made by hand
            venv = work / "venv"
            timed([sys.executable, "-m", "venv", "--without-pip", str(venv)], user_env)
            # the host's packages (torch) after the venv's own, as rocmbuild's view of them
            (next((venv / "lib").glob("python3*")) / "site-packages" / "host.pth").write_text(
                "".join(f"{d}\n" for d in site.getsitepackages()))
            python = str(venv / "bin" / "python")
            # the same set as the env stage installs: every requirement into the venv even if
            # the host has it (the env's view leaves build tools out), and the host's pip
            pip = importlib.metadata.version("pip")
            same = [*requires, *([] if any(r.startswith("pip") for r in requires)
                                 else [f"pip=={pip}"])]
            timed([sys.executable, "-m", "pip", "--python", python, "install", "--no-input",
                   "--ignore-installed", *same], user_env)
        argv = [python if a == "python" else a.replace("{wheel_tmp}", str(work / "out"))
                for a in plan["commands"][0]]
        t_pip = timed(argv, bare_env, cwd=tree)
        bare.append(time.perf_counter() - t)
        bare_pip_only.append(t_pip)
        # a cold build in a fresh workspace that shares only the verified download
        cold_cache = base / f"cold{i}" / "cache"
        cold_cache.mkdir(parents=True)
        (cold_cache / "downloads").symlink_to(base / "cache" / "downloads")
        cold.append(
            timed(
                rb + ARGS,
                {
                    **env,
                    "ROCMBUILD_WORKDIR": str(base / f"cold{i}"),
                    "ROCMBUILD_CACHE_DIR": str(cold_cache),
                },
            )
        )
    for _ in range(opts.noop_repeat):
        noop.append(timed(rb + ARGS, env))

    med = statistics.median
    rows = [
        ("bare `pip wheel` (tree already extracted)", med(bare_pip_only)),
        ("by hand: extract sdist" + (" + build env" if requires else "") + " + `pip wheel`",
         med(bare)),
        ("rocmbuild cold build (fresh workspace)", med(cold)),
        ("rocmbuild no-op rebuild (cache hit, whole CLI)", med(noop)),
    ]
    print(f"| measurement (median of {opts.repeat}; no-op {opts.noop_repeat}) | wall s |")
    print("|---|---|")
    for name, v in rows:
        print(f"| {name} | {v:.3f} |")
    print()
    print(
        f"- no-op vs bare pip wheel: {med(bare_pip_only) / med(noop):.1f}x faster "
        f"({med(noop):.3f} s; goal <= 0.3 s and >= 20x)"
    )
    print(
        f"- cold-build overhead vs by hand: {med(cold) - med(bare):+.2f} s "
        f"({100 * (med(cold) / med(bare) - 1):+.1f} %; goal <= 1 s); pairs run interleaved"
    )
    print(f"- host: {os.cpu_count()} cpus, python {sys.version.split()[0]}")


def noop_only(rb: list[str], env: dict[str, str], base: Path, repeat: int) -> None:
    from rocmbuild.cache import store as cache

    noop = [timed(rb + ARGS, env) for _ in range(repeat)]
    (entry,) = (base / "cache" / "wheels").iterdir()
    first, again = "deliver: a fresh copy into the wheel dir", \
        "deliver: the wheel dir already holds the bytes (hashed, kept)"
    parts: dict[str, list[float]] = {"lookup (check entry.json, sha256 of the wheel)": [],
                                     first: [], again: []}
    size = 0
    for _ in range(repeat):
        t = time.perf_counter()
        hit = cache.lookup(base / "cache", entry.name)
        parts["lookup (check entry.json, sha256 of the wheel)"].append(time.perf_counter() - t)
        assert hit is not None
        size = hit.size
        for name in (first, again):
            t = time.perf_counter()
            out = cache.deliver(hit, base / "deliver")
            parts[name].append(time.perf_counter() - t)
        out.unlink()
    med = statistics.median
    print(f"| measurement (median of {repeat}) | wall s |")
    print("|---|---|")
    print(f"| rocmbuild no-op rebuild (cache hit, whole CLI) | {med(noop):.3f} |")
    for name, v in parts.items():
        print(f"| {name}, in process | {med(v):.4f} |")
    print()
    print(f"- wheel: {size / 1e6:.2f} MB; no-op {med(noop):.3f} s (goal <= 0.3 s)")
    print(f"- host: {os.cpu_count()} cpus, python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
