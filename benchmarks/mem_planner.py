"""The learned MAX_JOBS planner under a real memory cgroup (issue 13): 0 OOM kills and at least
90 % of the throughput of the best fixed -j that does not OOM.

A generated C++ project of --units compile units (each a large initializer table: g++ really
holds a few hundred MB while it parses one) is built by the real CLI through the cmake backend
(cmake + ninja + g++, ccache off), every build from a clean tree (``--force``), each in a fresh
memory cgroup (swap off; cgroup v1, or v2 where the host has no v1 memory controller). One unit's
peak is measured first (alone, in a cgroup without a limit); the limit is then ``--limit-units``
units' peaks + OVERHEAD_MB (default 1.5 units: the tightest that fits one job, so memory allows 1
job where the cpus would allow more), or ``--limit-ram`` of this machine's RAM (the issue's "half
of RAM": 0.5).

First pass, one build each:

  * fixed -j 1, fixed -j 2 (--fixed; under the tight limit -j 2 is OOM-killed, rocmbuild's OOM
    retry halves it and the build finishes, reported as "retried");
  * unthrottled: ``--jobs`` --unthrottled (default 8, more than this machine's cpus);
  * learning: no ``--jobs``, so the recipe's guess (``mem_per_job_gb = 0.1``: it plans by cpus
    alone); it measures every unit. On a many-core host the guess's jobs can be OOM-killed twice
    and fail before enough units are measured: --learning-jobs N learns at a fixed -j instead.

Then --rounds rounds (default 3) of the best fixed -j of the first pass that was not OOM-killed
and the learned build (no ``--jobs``, in the learning build's workspace: it plans with the learned
p95 + 15 %), in alternating order (fixed first in odd rounds, learned first in even ones), so that
a machine whose other load drifts during the run hurts both alike. The verdict's ratio is the best
fixed's median wall time over the learned build's median wall time, both over the same rounds.

Per build: MAX_JOBS and its reason (the build record's, else ``plan --json`` run in the cgroup
just before), the cgroup's oom_kill counter delta, whether rocmbuild retried or failed, wall time
of the whole ``rocmbuild build``, the CPU seconds of its processes, the cgroup's peak anonymous
memory (``memory.stat`` total_rss on v1, anon on v2, sampled every 0.1 s: rocmbuild, cmake,
ninja and the compilers together, the headroom under the limit) and the mean 1-minute load
average while it ran. Rows of repeated builds show medians. Needs root and a writable memory
controller, cgroup v1 or v2 (exit 77 otherwise: the harness's "cannot run here").

    PYTHONPATH=src python benchmarks/mem_planner.py [--units 8] [--values 1500000]
        [--limit-units 1.5 | --limit-ram 0.5] [--rounds 3] [--fixed 1,2] [--unthrottled 8]
        [--learning-jobs N] [--json out.json] [--docs docs/dev/benchmarks-notebook.md]

``--docs`` writes the result between ``<!-- bench:mem_planner -->`` and
``<!-- /bench:mem_planner -->`` in that file (appended when the markers are missing).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration import memcg  # noqa: E402

MiB = 1024**2
NAME = "mem_planner"
SKIPPED = 77  # benchmarks/run.py: cannot run on this machine
OVERHEAD_MB = 160  # rocmbuild, cmake, ninja, the launchers, page cache: besides the compilers
RECIPE = """schema_version = 1
[package]
name = "memunits"
version = "1.0.0"
[source]
path = "{src}"
[build]
backend = "cmake"
mem_per_job_gb = 0.1
python_requires = ["cmake", "ninja"]
"""


@dataclass(frozen=True)
class Row:
    """One build."""

    config: str
    fixed: bool
    """A fixed -j (a candidate for the baseline)."""
    max_jobs: int
    reason: str
    oom_kills: int
    outcome: str
    """"ok", "retried: ..." or "failed (exit N): ..."."""
    wall_s: float
    units: int
    load: float
    """Mean 1-minute load average while the build ran (the build's own jobs included)."""
    cpu_s: float = 0.0
    """CPU seconds (user + system) of the build's processes: against wall time, how much of the
    machine's cores the build got."""
    peak_mib: float = 0.0
    """The cgroup's peak anonymous memory (sampled): every process of the build together."""
    round: int = 0
    """0: the first pass; 1..N: the repeated rounds."""

    @property
    def ok(self) -> bool:
        return not self.outcome.startswith("failed")

    @property
    def per_min(self) -> float | None:
        return self.units * 60 / self.wall_s if self.ok else None


@dataclass(frozen=True)
class Summary:
    """The builds of one configuration in one phase (the first pass, or the rounds)."""

    config: str
    runs: tuple[Row, ...]

    @property
    def label(self) -> str:
        n = len(self.runs)
        return f"{self.config} (rounds, median of {n})" if self.runs[0].round else self.config

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    @property
    def oom_kills(self) -> int:
        return sum(r.oom_kills for r in self.runs)

    def median(self, field: str) -> float:
        return float(statistics.median(float(getattr(r, field)) for r in self.runs))

    @property
    def per_min(self) -> float | None:
        return self.runs[0].units * 60 / self.median("wall_s") if self.ok else None


def unit_source(i: int, values: int) -> str:
    """One compile unit: a table of ``values`` numbers (different in every unit)."""
    nums = ",".join(str((k * (2 * i + 3) * 2654435761) % 1000003) for k in range(values))
    return (f"extern const unsigned table_{i}[] = {{{nums}}};\n"
            f"unsigned unit_{i}(unsigned k) {{ return table_{i}[k % {values}]; }}\n")


def write_project(base: Path, units: int, values: int) -> Path:
    """The C++ project and its recipe; returns the recipe."""
    src = base / "src"
    src.mkdir(parents=True)
    names = [f"u{i}.cpp" for i in range(units)]
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(memunits LANGUAGES CXX)\n"
        f"add_library(memunits SHARED {' '.join(names)})\n"
        "install(TARGETS memunits LIBRARY DESTINATION lib)\n")
    for i, name in enumerate(names):
        (src / name).write_text(unit_source(i, values))
    recipe = base / "memunits.toml"
    recipe.write_text(RECIPE.format(src=src))
    return recipe


def unit_peak(cg: Path, src: Path, out: Path) -> int:
    """Peak RSS (bytes) of g++ compiling ``src`` in ``cg`` (as CMake's Release flags would)."""
    proc = subprocess.Popen(memcg.inside(cg, ["c++", "-O3", "-fPIC", "-c", str(src), "-o",
                                              str(out)]))
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"calibration compile failed with {proc.returncode}")
    return int(usage.ru_maxrss) * 1024


def child_env(workdir: Path) -> dict[str, str]:
    """This environment without what would change the builds' jobs, cache or output; the HIP
    compiler stays (on a host without ROCm, ``ROCMBUILD_HIP_COMPILER=/usr/bin/g++`` lets the
    cmake backend plan this C++-only project)."""
    env = {k: v for k, v in os.environ.items()
           if (k == "ROCMBUILD_HIP_COMPILER"
               or not k.startswith(("SLURM_", "CCACHE_", "SCCACHE_", "ROCMBUILD_")))
           and not (k.startswith("CMAKE_") and k.endswith("_COMPILER_LAUNCHER"))}
    env.update(CCACHE_DISABLE="1", COLUMNS="200", ROCMBUILD_WORKDIR=str(workdir),
               ROCMBUILD_PROGRESS_SECONDS="0")
    return env


@contextmanager
def sampling(cg: Path) -> Iterator[dict[str, float]]:
    """Samples ``cg``'s anonymous memory (every 0.1 s) and the 1-minute load average (every
    second) while the block runs; yields a dict that holds ``peak_mib`` and ``load`` after it."""
    out = {"peak_mib": 0.0, "load": os.getloadavg()[0]}
    stop = threading.Event()
    loads: list[float] = []

    def sample() -> None:
        peak, tick = 0, 0
        while True:
            peak = max(peak, memcg.anon_bytes(cg))
            if tick % 10 == 0:
                loads.append(os.getloadavg()[0])
            out["peak_mib"] = peak / MiB
            tick += 1
            if stop.wait(0.1):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out["load"] = statistics.fmean(loads) if loads else out["load"]


def build(cg: Path, config: str, recipe: Path, workdir: Path, jobs: int | None, units: int,
          *, fixed: bool, round_no: int = 0) -> Row:
    """One ``rocmbuild build --force`` in ``cg``, measured."""
    rb = [sys.executable, "-m", "rocmbuild"]
    flags = ["--arch", "gfx942", *(["--jobs", str(jobs)] if jobs is not None else [])]
    env = child_env(workdir)
    plan = json.loads(subprocess.run(
        memcg.inside(cg, [*rb, "plan", str(recipe), *flags, "--json"]), env=env, cwd=REPO,
        capture_output=True, text=True, check=True).stdout)
    max_jobs, reason = int(plan["jobs"]), str(plan["jobs_reason"])
    before = memcg.oom_kills(cg)
    cpu0 = _children_cpu()
    with sampling(cg) as seen:
        t0 = time.perf_counter()
        res = subprocess.run(memcg.inside(cg, [*rb, "build", str(recipe), *flags, "--force"]),
                             env=env, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    kills = memcg.oom_kills(cg) - before
    log = f"{config.replace(' ', '_')}.{round_no}.stderr"
    (workdir / log).write_text(res.stderr)
    outcome = "ok"
    if res.returncode != 0:
        lines = res.stderr.splitlines()
        err = next((ln for ln in lines if ln.startswith("build error: ")),
                   next((ln for ln in lines if "error" in ln), ""))
        outcome = f"failed (exit {res.returncode}): {err[:160]}"
    else:
        records = sorted((workdir / "wheels").glob("memunits-*.whl.build.json"),
                         key=lambda p: p.stat().st_mtime)
        if records:
            record = json.loads(records[-1].read_text())
            max_jobs = int(record["jobs"]["max_jobs"])
            reason = str(record["jobs"]["reason"])
            if record.get("oom_retry"):
                outcome = f"retried: {record['oom_retry']}"
    return Row(config, fixed, max_jobs, reason, kills, outcome, round(wall, 1), units,
               round(seen["load"], 1), round(cpu, 1), round(seen["peak_mib"]), round_no)


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs, once waited for)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def baseline(rows: Sequence[Row]) -> Row | None:
    """The best fixed -j of the first pass that finished without an OOM kill: the one the
    rounds repeat."""
    good = [r for r in rows if r.fixed and r.ok and r.oom_kills == 0 and r.round == 0]
    return max(good, key=lambda r: r.per_min or 0.0, default=None)


def summaries(rows: Sequence[Row]) -> list[Summary]:
    """The rows grouped by configuration and phase (first pass, rounds), in order of appearance."""
    groups: dict[tuple[str, bool], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.config, r.round > 0), []).append(r)
    return [Summary(config, tuple(runs)) for (config, _), runs in groups.items()]


def reference(rows: Sequence[Row]) -> Summary | None:
    """The best fixed -j over the rounds (the first pass's best when there are no rounds)."""
    best = baseline(rows)
    if best is None:
        return None
    found = [s for s in summaries(rows) if s.config == best.config]
    return found[-1]


def _cell(values: set[str]) -> str:
    return " / ".join(sorted(values))


def _same_cgroup(reason: str) -> str:
    """``reason`` with each build's own cgroup name made one (``rocmbuild-bench-*``), so that
    repeated builds that planned alike show one reason."""
    return re.sub(r"rocmbuild-bench-[0-9a-f]{8}", "rocmbuild-bench-*", reason)


def render(rows: Sequence[Row]) -> str:
    """The Markdown table, one line per configuration and phase (pure)."""
    ref = reference(rows)
    out = ["| config | MAX_JOBS | reason | OOM kills | outcome | wall s | units/min "
           "| vs best fixed | CPU s | peak MiB | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries(rows):
        rate = s.per_min
        best = ref.per_min if ref is not None else None
        ratio = f"{rate / best:.2f}" if rate is not None and best else "-"
        jobs = _cell({str(r.max_jobs) for r in s.runs})
        reason = _cell({_same_cgroup(r.reason) for r in s.runs}).replace("|", "/")
        outcome = _cell({r.outcome for r in s.runs}).replace("|", "/")
        out.append(f"| {s.label} | {jobs} | {reason} | {s.oom_kills} | {outcome} "
                   f"| {s.median('wall_s'):.1f} | {f'{rate:.2f}' if rate is not None else '-'} "
                   f"| {ratio} | {s.median('cpu_s'):.0f} | {s.median('peak_mib'):.0f} "
                   f"| {s.median('load'):.1f} |")
    return "\n".join(out) + "\n"


def rounds_line(rows: Sequence[Row]) -> str:
    """Each round's wall times and ratio: ``round 1: fixed -j 1 95.0 s, learned 97.1 s (0.98)``."""
    parts = []
    for n in sorted({r.round for r in rows if r.round > 0}):
        these = [r for r in rows if r.round == n]
        walls = ", ".join(f"{r.config} {r.wall_s:.1f} s" for r in these)
        fixed = next((r for r in these if r.fixed), None)
        learned = next((r for r in these if r.config == "learned"), None)
        ratio = (f" ({fixed.wall_s / learned.wall_s:.2f})"
                 if fixed is not None and learned is not None and learned.ok and fixed.ok
                 else "")
        parts.append(f"round {n}: {walls}{ratio}")
    return "; ".join(parts)


def verdict(rows: Sequence[Row]) -> str:
    """The goal, checked on the learned builds against the best fixed -j: medians of the same
    rounds (the first pass's learned build when there are no rounds)."""
    ref = reference(rows)
    learned = [s for s in summaries(rows) if s.config == "learned"]
    if ref is None or not learned or learned[-1].per_min is None or ref.per_min is None:
        return "goal: not measurable (no fixed -j without OOM, or a learned build failed)"
    got = learned[-1]
    rate, best = got.per_min, ref.per_min
    assert rate is not None
    ratio = rate / best
    met = got.oom_kills == 0 and ratio >= 0.9
    n = len(got.runs)
    over = f"medians of {n} rounds" if got.runs[0].round else "one build each"
    return (f"goal (0 OOM kills, >= 90 % of {ref.config}'s throughput; {over}): "
            f"{got.oom_kills} OOM kills, {ratio * 100:.0f} % -> {'met' if met else 'NOT met'}")


def replace_block(text: str, block: str) -> str:
    """``text`` with the ``bench:mem_planner`` block replaced (appended when missing)."""
    start, end = f"<!-- bench:{NAME} -->", f"<!-- /bench:{NAME} -->"
    new = f"{start}\n{block.rstrip()}\n{end}"
    i, j = text.find(start), text.find(end)
    if i >= 0 and j > i:
        return text[:i] + new + text[j + len(end):]
    return text.rstrip("\n") + "\n\n" + new + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--units", type=int, default=8, help="compile units (default 8)")
    ap.add_argument("--values", type=int, default=1_500_000,
                    help="numbers in each unit's table: its memory (default 1500000)")
    limit = ap.add_mutually_exclusive_group()
    limit.add_argument("--limit-units", type=float, default=1.5,
                       help=f"the cgroup's limit in units' peaks, plus {OVERHEAD_MB} MiB "
                       "(default 1.5: the tightest that fits one job)")
    limit.add_argument("--limit-ram", type=float, metavar="FRACTION",
                       help="the cgroup's limit as a fraction of this machine's RAM instead "
                       "(0.5: the issue's half of RAM)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of [best fixed -j, learned] after the first pass (default 3)")
    ap.add_argument("--fixed", type=_jobs_list, default=(1, 2),
                    help="the fixed --jobs of the first pass, comma-separated (default 1,2)")
    ap.add_argument("--unthrottled", type=int, default=8, help="--jobs of the unthrottled build")
    ap.add_argument("--learning-jobs", type=int,
                    help="--jobs of the learning build (default: none, the recipe's guess)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--docs", type=Path, help="write the result block into this Markdown file")
    opts = ap.parse_args(argv)
    if (opts.units < 3 or opts.values < 1000 or opts.limit_units <= 0 or opts.unthrottled < 1
            or opts.rounds < 1 or (opts.limit_ram is not None and not 0 < opts.limit_ram <= 1)
            or (opts.learning_jobs is not None and opts.learning_jobs < 1)):
        ap.error("--units >= 3, --values >= 1000, --limit-units > 0, 0 < --limit-ram <= 1, "
                 "--rounds >= 1, --unthrottled >= 1, --learning-jobs >= 1")
    return opts


def _jobs_list(text: str) -> tuple[int, ...]:
    try:
        jobs = tuple(int(x) for x in text.split(","))
    except ValueError:
        jobs = ()
    if not jobs or min(jobs) < 1 or len(set(jobs)) != len(jobs):
        raise argparse.ArgumentTypeError(f"{text!r}: distinct whole numbers >= 1, e.g. 1,2")
    return jobs


def ram_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    why = memcg.unavailable()
    if why is not None:
        print(f"mem_planner: {why}", file=sys.stderr)
        return SKIPPED
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-memplanner-"))
    recipe = write_project(base, opts.units, opts.values)
    started = datetime.datetime.now(datetime.UTC)
    with memcg.cgroup("rocmbuild-bench") as cg:
        version = 1 if (cg / "memory.limit_in_bytes").exists() else 2
        peak = unit_peak(cg, base / "src/u0.cpp", base / "u0.o")
    if opts.limit_ram is not None:
        limit = int(opts.limit_ram * ram_bytes())
        how = f"{opts.limit_ram:g} of RAM"
    else:
        limit = int(opts.limit_units * peak) + OVERHEAD_MB * MiB
        how = f"{opts.limit_units:g} units + {OVERHEAD_MB} MiB"
    print(f"one unit: {peak / MiB:.0f} MiB peak; cgroup limit {limit / MiB:.0f} MiB ({how})",
          file=sys.stderr)
    rows: list[Row] = []

    def one(config: str, ws: str, jobs: int | None, fixed: bool, round_no: int = 0) -> None:
        # a fresh cgroup each: the page cache an earlier build left charged would count as use
        with memcg.cgroup("rocmbuild-bench") as cg:
            memcg.set_limit(cg, limit)
            row = build(cg, config, recipe, base / ws, jobs, opts.units, fixed=fixed,
                        round_no=round_no)
        print(f"{row.config} (round {round_no}): MAX_JOBS {row.max_jobs}, {row.oom_kills} OOM "
              f"kills, {row.outcome}, {row.wall_s:.1f} s, {row.cpu_s:.0f} CPU s, peak "
              f"{row.peak_mib:.0f} MiB, load {row.load:.1f}", file=sys.stderr)
        rows.append(row)

    learning = ("learning (recipe's guess)" if opts.learning_jobs is None
                else f"learning (-j {opts.learning_jobs})")
    first: list[tuple[str, str, int | None, bool]] = [
        *((f"fixed -j {j}", f"j{j}", j, True) for j in opts.fixed),
        (f"unthrottled -j {opts.unthrottled}", "jmax", opts.unthrottled, False),
        (learning, "learned", opts.learning_jobs, False)]
    for config, ws, jobs, fixed in first:
        one(config, ws, jobs, fixed)
    best = baseline(rows)
    if best is not None:
        pair = [next(c for c in first if c[0] == best.config),
                ("learned", "learned", None, False)]
        for n in range(1, opts.rounds + 1):
            for config, ws, jobs, fixed in pair if n % 2 else pair[::-1]:
                one(config, ws, jobs, fixed, n)
    ram = ram_bytes() / 1024**3
    head = (f"Measured {started:%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
            f"({os.cpu_count()} cpus, {ram:.0f} GB), {opts.units} g++ units of {opts.values} "
            f"table entries ({peak / MiB:.0f} MiB peak each), "
            f"cgroup v{version} limit {limit / MiB:.0f} MiB ({how}), swap off; "
            f"{opts.rounds} rounds of [{best.config if best else '-'}, learned] after the "
            "first pass, in alternating order.")
    text = f"{head}\n\n{render(rows)}\n{rounds_line(rows)}\n\n{verdict(rows)}\n"
    print(text)
    if opts.json:
        opts.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    if opts.docs:
        opts.docs.write_text(replace_block(opts.docs.read_text(), text))
    print(f"logs: {base}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
