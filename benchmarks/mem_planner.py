"""The learned MAX_JOBS planner under a real memory cgroup (issue 13): 0 OOM kills and at least
90 % of the throughput of the best fixed -j that does not OOM.

A generated C++ project of --units compile units (each a large initializer table: g++ really
holds a few hundred MB while it parses one) is built by the real CLI through the cmake backend
(cmake + ninja + g++, ccache off), every configuration from a clean tree (``--force``), inside one
cgroup v1 memory cgroup (swap off) whose limit fits about --limit-units units at once (one unit's
peak is measured first, in the same cgroup without a limit). Configurations:

  * fixed -j 1, fixed -j 2;
  * unthrottled: ``--jobs`` --unthrottled (default 8, more than this machine's cpus);
  * learned: a learning build (no ``--jobs``: the recipe's guess, ``mem_per_job_gb = 0.1``, so it
    plans by cpus alone), then the measured build with no ``--jobs`` in the same workspace: it
    plans with the learned p95 + 15 %.

Per configuration: MAX_JOBS and its reason (the build record's, else ``plan --json`` run in the
cgroup just before), the cgroup's oom_kill counter delta, whether rocmbuild retried or failed,
wall time of the whole ``rocmbuild build``, units/min and the ratio to the best fixed -j without
an OOM kill. Needs root and a writable cgroup v1 memory controller.

    PYTHONPATH=src python benchmarks/mem_planner.py [--units 8] [--values 1500000]
        [--limit-units 2.5] [--unthrottled 8] [--json out.json] [--docs docs/benchmarks.md]

``--docs`` writes the result between ``<!-- bench:mem_planner -->`` and
``<!-- /bench:mem_planner -->`` in that file (appended when the markers are missing).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration import memcg  # noqa: E402

MiB = 1024**2
NAME = "mem_planner"
OVERHEAD_MB = 160  # rocmbuild, cmake, ninja, the launchers: in the cgroup besides the compilers
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
    """1-minute load average when the build started."""
    cpu_s: float = 0.0
    """CPU seconds (user + system) of the build's processes: against wall time, how much of the
    machine's cores the build got."""

    @property
    def ok(self) -> bool:
        return not self.outcome.startswith("failed")

    @property
    def per_min(self) -> float | None:
        return self.units * 60 / self.wall_s if self.ok else None


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
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "CCACHE_", "SCCACHE_", "ROCMBUILD_"))
           and not (k.startswith("CMAKE_") and k.endswith("_COMPILER_LAUNCHER"))}
    env.update(CCACHE_DISABLE="1", COLUMNS="200", ROCMBUILD_WORKDIR=str(workdir),
               ROCMBUILD_PROGRESS_SECONDS="0")
    return env


def build(cg: Path, config: str, recipe: Path, workdir: Path, jobs: int | None, units: int,
          *, fixed: bool) -> Row:
    """One ``rocmbuild build --force`` in ``cg``, measured."""
    rb = [sys.executable, "-m", "rocmbuild"]
    flags = ["--arch", "gfx942", *(["--jobs", str(jobs)] if jobs is not None else [])]
    env = child_env(workdir)
    plan = json.loads(subprocess.run(
        memcg.inside(cg, [*rb, "plan", str(recipe), *flags, "--json"]), env=env, cwd=REPO,
        capture_output=True, text=True, check=True).stdout)
    max_jobs, reason = int(plan["jobs"]), str(plan["jobs_reason"])
    load = os.getloadavg()[0]
    before = memcg.oom_kills(cg)
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    res = subprocess.run(memcg.inside(cg, [*rb, "build", str(recipe), *flags, "--force"]),
                         env=env, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    kills = memcg.oom_kills(cg) - before
    (workdir / f"{config.replace(' ', '_')}.stderr").write_text(res.stderr)
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
               round(load, 1), round(cpu, 1))


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs, once waited for)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def baseline(rows: Sequence[Row]) -> Row | None:
    """The best fixed -j that finished without an OOM kill."""
    good = [r for r in rows if r.fixed and r.ok and r.oom_kills == 0]
    return max(good, key=lambda r: r.per_min or 0.0, default=None)


def render(rows: Sequence[Row]) -> str:
    """The Markdown table (pure)."""
    best = baseline(rows)
    out = ["| config | MAX_JOBS | reason | OOM kills | outcome | wall s | units/min "
           "| vs best fixed | CPU s | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = r.per_min
        ratio = (f"{rate / best.per_min:.2f}" if rate is not None and best is not None
                 and best.per_min else "-")
        reason = r.reason.replace("|", "/")
        out.append(f"| {r.config} | {r.max_jobs} | {reason} | {r.oom_kills} | {r.outcome} "
                   f"| {r.wall_s:.1f} | {f'{rate:.2f}' if rate is not None else '-'} | {ratio} "
                   f"| {r.cpu_s:.0f} | {r.load:.1f} |")
    return "\n".join(out) + "\n"


def verdict(rows: Sequence[Row]) -> str:
    """The goal, checked on the measured learned build (the last row named ``learned``)."""
    best = baseline(rows)
    learned = next((r for r in reversed(rows) if r.config == "learned"), None)
    if best is None or learned is None or learned.per_min is None or best.per_min is None:
        return "goal: not measurable (no fixed -j without OOM, or the learned build failed)"
    ratio = learned.per_min / best.per_min
    met = learned.oom_kills == 0 and ratio >= 0.9
    return (f"goal (0 OOM kills, >= 90 % of {best.config}): {learned.oom_kills} OOM kills, "
            f"{ratio * 100:.0f} % -> {'met' if met else 'NOT met'}")


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
    ap.add_argument("--limit-units", type=float, default=2.5,
                    help=f"the cgroup's limit in units' peaks, plus {OVERHEAD_MB} MiB "
                    "(default 2.5)")
    ap.add_argument("--unthrottled", type=int, default=8, help="--jobs of the unthrottled build")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--docs", type=Path, help="write the result block into this Markdown file")
    opts = ap.parse_args(argv)
    if opts.units < 3 or opts.values < 1000 or opts.limit_units <= 0 or opts.unthrottled < 1:
        ap.error("--units >= 3, --values >= 1000, --limit-units > 0, --unthrottled >= 1")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    why = memcg.v1_unavailable()
    if why is not None:
        print(f"mem_planner: {why}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-memplanner-"))
    recipe = write_project(base, opts.units, opts.values)
    started = datetime.datetime.now(datetime.UTC)
    with memcg.v1_cgroup("rocmbuild-bench") as cg:
        peak = unit_peak(cg, base / "src/u0.cpp", base / "u0.o")
    limit = int(opts.limit_units * peak) + OVERHEAD_MB * MiB
    print(f"one unit: {peak / MiB:.0f} MiB peak; cgroup limit {limit / MiB:.0f} MiB",
          file=sys.stderr)
    plan: list[tuple[str, str, int | None, bool]] = [
        ("fixed -j 1", "j1", 1, True), ("fixed -j 2", "j2", 2, True),
        (f"unthrottled -j {opts.unthrottled}", "jmax", opts.unthrottled, False),
        ("learning (recipe's guess)", "learned", None, False),
        ("learned", "learned", None, False)]
    rows = []
    for config, ws, jobs, fixed in plan:
        # a fresh cgroup each: the page cache an earlier build left charged would count as use
        with memcg.v1_cgroup("rocmbuild-bench") as cg:
            memcg.set_limit(cg, limit)
            row = build(cg, config, recipe, base / ws, jobs, opts.units, fixed=fixed)
        print(f"{row.config}: MAX_JOBS {row.max_jobs}, {row.oom_kills} OOM kills, "
              f"{row.outcome}, {row.wall_s:.1f} s", file=sys.stderr)
        rows.append(row)
    table = render(rows)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1024**3
    head = (f"Measured {started:%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
            f"({os.cpu_count()} cpus, {ram:.0f} GB), {opts.units} g++ units of {opts.values} "
            f"table entries ({peak / MiB:.0f} MiB peak each), "
            f"cgroup v1 limit {limit / MiB:.0f} MiB "
            f"({opts.limit_units} units + {OVERHEAD_MB} MiB), swap off.")
    text = f"{head}\n\n{table}\n{verdict(rows)}\n"
    print(text)
    if opts.json:
        opts.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    if opts.docs:
        opts.docs.write_text(replace_block(opts.docs.read_text(), text))
    print(f"logs: {base}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
