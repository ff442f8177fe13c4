"""Run the benchmarks and refresh their blocks in docs/dev/benchmarks-notebook.md.

    python benchmarks/run.py [NAME ...] [--list] [--gpu] [--dry-run] [--doc PATH]

Each benchmark is a script in this directory, run as a child (``sys.executable SCRIPT ARGS``,
in the repository root, with ``src`` on PYTHONPATH). What it prints on stdout is Markdown: the
new body of its block in the doc, between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``.
Progress goes to stderr, which passes through to the terminal. The harness adds one line under
the body: ``Measured <date UTC> on <machine>`` and the command. Prose outside the blocks is
never touched; a block the doc does not have yet is appended at the end under its own heading.

A benchmark that exits non-zero (or prints nothing) keeps its old block; the harness runs the
others and then exits 1, naming the ones that failed. Exit 77 from a benchmark means "cannot run
on this machine" (no Slurm, no compiler): its block is kept and it is reported as skipped, not
failed. GPU benchmarks run only with ``--gpu``, and are skipped where no AMD (``/dev/kfd``) or
NVIDIA (``/proc/driver/nvidia/gpus``) device is visible. The doc is rewritten atomically after
each benchmark that succeeded.

Adding a benchmark is one line in ``BENCHMARKS``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / "benchmarks"
DOC = REPO / "docs" / "dev" / "benchmarks-notebook.md"
sys.path.append(str(REPO / "src"))  # rocmbuild for the machine facts (an installed one wins)
SKIPPED = 77
"""Exit code of a benchmark that cannot run on this machine (automake's convention)."""


@dataclass(frozen=True)
class Bench:
    script: str
    """File name under benchmarks/ (an absolute path is taken as it is)."""
    args: tuple[str, ...] = ()
    title: str = ""
    """Heading of the section appended when the doc has no block for it yet."""
    gpu: bool = False
    """Runs only with --gpu, on a machine with a GPU."""


BENCHMARKS: dict[str, Bench] = {
    "build": Bench("bench_build.py", ("--repeat", "5"), "Build: no-op rebuild and overhead"),
    "build_noop": Bench("bench_build.py", ("--noop-only", "--noop-repeat", "20"),
                        "Build: the cache hit"),
    "index": Bench("bench_index.py", (), "Static index"),
    "probe_archs": Bench("bench_probe_archs.py", ("--repeat", "2"), "HIP probe: 1 vs 2 archs"),
    "audit": Bench("bench_audit.py", ("--size-gb", "1", "--repeat", "3"), "Audit speed"),
    "slurm": Bench("bench_slurm.py", ("--grid", "1x5:2", "4x3:2", "4x3:0.5"),
                   "Nightly: Slurm overhead per cell"),
    "slurm_nodes": Bench("bench_slurm.py", ("--nodes", "2", "--grid", "1x5:2", "4x3:2", "4x3:0.5"),
                         "Nightly: Slurm overhead per cell, two nodes"),
    "noop_rebuild": Bench("noop_rebuild.py", ("--repeat", "20"),
                          "No-op rebuild: what a hit imports"),
    "compile_cache": Bench("compile_cache.py", ("--units", "8", "--jobs", "2"), "Compile cache"),
    "eta": Bench("eta.py", ("--units", "32", "--jobs", "2"), "Long builds: ETA error"),
    "ck_units": Bench("ck_units.py", (), "CK fmha units"),
    "reproducible": Bench("bench_reproducible.py", ("--builds", "3"),
                          "Reproducible wheels: repeated cold builds"),
    "nightly_controller": Bench("bench_nightly_controller.py", ("--repeat", "3"),
                                "Nightly: the controller with 300 MB cached wheels"),
    "mem_planner": Bench("mem_planner.py", (), "Learned MAX_JOBS under a memory cgroup"),
    "deepspeed_cpu_ops": Bench("deepspeed_cpu_ops.py", (), "DeepSpeed: the CPU ops build"),
    "attention_gate": Bench("attention_gate.py",
                            ("--out", "build/bench/attention-gate", "--markdown",
                             "--steps", "sdpa,faults,baseline"),
                            "Validator: attention gate on a GPU", gpu=True),
}


class HarnessError(Exception):
    """A bad argument or a doc whose markers do not pair up: one line, a hint, exit 2."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


# ---- the machine line ----------------------------------------------------------------------

def _first(path: Path, prefix: str) -> str | None:
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(prefix):
                return line.partition(":")[2].strip()
    except OSError:
        return None
    return None


def gpus() -> list[str]:
    """GPUs this machine shows: AMD through KFD's topology (gfx names), NVIDIA through the
    driver's /proc files (model names). No process is started."""

    found = [n["gfx"] for n in gpus.kfd_nodes()] if Path("/dev/kfd").exists() else []
    nv = Path("/proc/driver/nvidia/gpus")
    if nv.is_dir():
        found += [_first(d / "information", "Model") or "NVIDIA GPU" for d in sorted(nv.iterdir())]
    return found


def machine() -> str:
    """CPU model, usable cores, memory, kernel, Python, cgroup/Slurm limits, GPUs and the load
    average, in one phrase."""
    from rocmbuild.host import cgroups

    model = _first(Path("/proc/cpuinfo"), "model name") or platform.processor() or "unknown cpu"
    online = os.cpu_count() or 1
    cpus, cpu_src = cgroups.usable_cpus_why()
    total_kib = _first(Path("/proc/meminfo"), "MemTotal")
    mem = f"{int(total_kib.split()[0]) / 1024**2:.1f} GiB" if total_kib else "? GiB"
    parts = [model, f"{cpus} of {online} cpus" if cpus < online else f"{cpus} cpus",
             f"{mem} memory", f"{platform.system()} {platform.release()}",
             f"python {platform.python_version()}"]
    if cpu_src.startswith(("cgroup", "SLURM")):
        parts.append(f"cpus limited by {cpu_src}")
    usable, mem_src = cgroups.usable_memory()
    if mem_src.startswith(("cgroup", "SLURM")):
        parts.append(f"memory limited to {usable / 1024**3:.1f} GiB usable by {mem_src}")
    g = gpus()
    parts.append(", ".join(g) if g else "no GPU")
    try:
        parts.append(f"load average {os.getloadavg()[0]:.1f} at the start")
    except OSError:
        pass
    return ", ".join(parts)


def measured_line(bench: Bench, when: float, host: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
    cmd = " ".join(["benchmarks/" + Path(bench.script).name, *bench.args])
    return f"Measured {stamp} on {host}; `python {cmd}`."


# ---- the doc's blocks ----------------------------------------------------------------------

def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def blocks(text: str, doc: Path) -> dict[str, tuple[int, int]]:
    """Block name -> (start, end) of its body (the text between its marker lines). Markers must
    be on lines of their own, pair up in order and not repeat."""
    found: dict[str, tuple[int, int]] = {}
    open_: tuple[str, int] | None = None
    for m in re.finditer(r"^<!-- (/?)bench:([A-Za-z0-9_.-]+) -->[ \t]*$", text, re.M):
        closing, name = m.group(1) == "/", m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if not closing:
            if open_ is not None:
                raise HarnessError(f"{doc}:{line}: block {name!r} opens inside block "
                                   f"{open_[0]!r}", f"close it with <!-- /bench:{open_[0]} -->")
            if name in found:
                raise HarnessError(f"{doc}:{line}: block {name!r} appears twice",
                                   "keep one <!-- bench:NAME --> ... pair per benchmark")
            open_ = (name, m.end() + 1)
        else:
            if open_ is None or open_[0] != name:
                raise HarnessError(f"{doc}:{line}: <!-- /bench:{name} --> closes no open block",
                                   f"open it with <!-- bench:{name} --> above")
            found[name] = (open_[1], m.start())
            open_ = None
    if open_ is not None:
        raise HarnessError(f"{doc}: block {open_[0]!r} is never closed",
                           f"add <!-- /bench:{open_[0]} --> after its table")
    return found


def replace_block(text: str, name: str, body: str, title: str, doc: Path) -> str:
    """``text`` with block ``name``'s body replaced by ``body``; a block that is not there yet is
    appended at the end under ``## title``."""
    body = body.strip("\n") + "\n"
    where = blocks(text, doc).get(name)
    if where is None:
        start, end = _markers(name)
        sep = "" if text.endswith("\n\n") or not text else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{sep}## {title or name}\n\n{start}\n{body}{end}\n"
    a, b = where
    return text[:a] + body + text[b:]


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ---- running -------------------------------------------------------------------------------

def argv_of(bench: Bench, bench_dir: Path) -> list[str]:
    return [sys.executable, str(bench_dir / bench.script), *bench.args]


def child_env() -> dict[str, str]:
    src = str(REPO / "src")
    old = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": src + (os.pathsep + old if old else "")}


def run_one(name: str, bench: Bench, bench_dir: Path) -> tuple[str, str]:
    """("ok", stdout) / ("skipped", why) / ("failed", why)."""
    argv = argv_of(bench, bench_dir)
    print(f"== {name}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        res = subprocess.run(argv, cwd=REPO, env=child_env(), stdout=subprocess.PIPE,
                             text=True, check=False)
    except OSError as e:
        return "failed", f"could not start: {e.strerror or e}"
    took = f"{time.monotonic() - t0:.0f} s"
    if res.returncode == SKIPPED:
        return "skipped", (res.stdout.strip().splitlines() or ["cannot run here"])[-1]
    if res.returncode != 0:
        return "failed", f"exit {res.returncode} after {took}"
    if not res.stdout.strip():
        return "failed", f"printed nothing on stdout after {took}"
    return "ok", res.stdout


def main(argv: Sequence[str] | None = None, *, registry: Mapping[str, Bench] | None = None,
         bench_dir: Path = BENCH_DIR) -> int:
    reg = BENCHMARKS if registry is None else registry
    ap = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help="benchmarks to run (default: every CPU one; see --list)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--gpu", action="store_true",
                    help="also run the GPU benchmarks (skipped where no GPU is visible)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print what would run and which blocks it would replace or append")
    ap.add_argument("--doc", type=Path, default=DOC,
                    help="the Markdown file (default: %(default)s)")
    a = ap.parse_args(argv)
    try:
        return _main(a, reg, bench_dir)
    except HarnessError as e:
        print(f"error: {e}\n  hint: {e.hint}", file=sys.stderr)
        return 2


def _main(a: argparse.Namespace, reg: Mapping[str, Bench], bench_dir: Path) -> int:
    doc: Path = a.doc
    try:
        text = doc.read_text(encoding="utf-8")
    except OSError as e:
        raise HarnessError(f"{doc}: cannot read ({e.strerror or e})",
                           "pass the benchmarks doc with --doc PATH") from None
    have = blocks(text, doc)
    if a.list:
        for name, b in reg.items():
            where = "block in doc" if name in have else "no block yet"
            gpu = " [gpu]" if b.gpu else ""
            print(f"{name:<16} {' '.join([b.script, *b.args])}{gpu}  ({where})")
        return 0
    unknown = [n for n in a.names if n not in reg]
    if unknown:
        raise HarnessError(f"unknown benchmark {', '.join(unknown)}",
                           f"choose from {', '.join(reg)} (--list shows them)")
    names = list(dict.fromkeys(a.names)) or [n for n, b in reg.items() if a.gpu or not b.gpu]
    cpu_only = [n for n in names if reg[n].gpu and not a.gpu]
    if cpu_only:
        raise HarnessError(f"{', '.join(cpu_only)} needs a GPU", "add --gpu on a GPU host")
    if a.dry_run:
        for n in names:
            action = "replace its block" if n in have else f"append '## {reg[n].title or n}'"
            print(f"{n}: {' '.join(argv_of(reg[n], bench_dir))}  -> {action} in {doc}")
        return 0
    host = machine()
    has_gpu = bool(gpus())
    failed: list[str] = []
    skipped: list[str] = []
    for n in names:
        b = reg[n]
        if b.gpu and not has_gpu:
            status, out = "skipped", "no CUDA/HIP device visible"
        else:
            started = time.time()
            status, out = run_one(n, b, bench_dir)
        if status == "ok":
            body = out.rstrip("\n") + "\n\n" + measured_line(b, started, host)
            text = replace_block(doc.read_text(encoding="utf-8"), n, body, b.title, doc)
            write_atomic(doc, text)
            print(f"== {n}: block refreshed in {doc}", file=sys.stderr)
        else:
            (failed if status == "failed" else skipped).append(n)
            print(f"== {n}: {status}: {out}; its old block is kept", file=sys.stderr)
    if skipped:
        print(f"skipped: {', '.join(skipped)}", file=sys.stderr)
    if failed:
        print(f"FAILED: {', '.join(failed)} (their blocks were left as they were)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
