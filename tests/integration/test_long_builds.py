"""Progress, ETA, the kept .ninja_log and learned memory with real tools, in seconds:

- a real ninja (a generated build.ninja of 24 units that sleep briefly) run through run.run with
  rocmbuild's NINJA_STATUS: the plain lines carry N/M, the running count and an ETA; a second
  run plans its ETA from the first run's .ninja_log;
- launchers/memlog.py in front of a real compile (the exit status and a kill pass through);
- the real CLI building a small C++ cmake project (12 units, real c++ and ninja): the build
  keeps build.ninja_log next to build.log, measures every unit, and the next `plan` says
  "measured over 12 units". Nothing is faked: no GPU is needed for C++ units."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from rocmbuild.buildtools import progress
from rocmbuild.cache import learned
from rocmbuild.core.run import run
from rocmbuild.host import detect as host
from rocmbuild.stages.build import memlog_launcher
from tests.conftest import rocmbuild

UNITS = 24


def _ninja_tree(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    rules = ["rule slow", "  command = sleep 0.15 && touch $out", "  description = CC $out"]
    builds = [f"build obj/u{i:02d}.o: slow" for i in range(UNITS)]
    (d / "build.ninja").write_text("\n".join([*rules, *builds]) + "\n")
    return d


def _ninja(d: Path, shown: progress.Display) -> None:
    env = {**os.environ, "NINJA_STATUS": progress.NINJA_STATUS}
    try:
        run(["ninja", "-j", "2"], cwd=d, env=env, on_line=shown, log_path=d / "ninja.out")
    finally:
        shown.stop()


def test_real_ninja_lines_have_n_m_running_and_an_eta(tmp_path: Path) -> None:
    d = _ninja_tree(tmp_path / "b")
    said: list[str] = []
    _ninja(d, progress.Display("building demo", 2, emit=said.append, tty=False, every=3600))
    assert len(said) == 9, said  # one at each 10 %
    for line in said:
        assert re.fullmatch(r"  building demo: \[\d+/24\] \d+ %, [12] running, \d+s elapsed"
                            r"(, ETA \d+s \(rate\))?(, peak [\d.]+ GiB)?", line), line
    assert sum("ETA" in s for s in said) >= 7, said  # from the 3rd unit after the first on
    assert "[24/24 " in (d / "ninja.out").read_text()  # ninja took rocmbuild's status format

    # the next build of the same units: an ETA from the first one's .ninja_log at once
    previous = progress.load_ninja_log(d / ".ninja_log")
    assert len(previous) == UNITS and all(0.1 < s < 5 for s in previous.values())
    run(["ninja", "-t", "clean"], cwd=d, capture=True)
    said2: list[str] = []
    _ninja(d, progress.Display("building demo", 2, previous, emit=said2.append, tty=False,
                               every=3600))
    assert "(previous build)" in said2[0], said2
    # ~2.2 s of sleeps left on 2 jobs at 10 %: the previous log's figure is about right
    m = re.search(r"ETA (\d+)s", said2[0])
    assert m and 1 <= int(m[1]) <= 6, said2[0]


def test_memlog_passes_status_and_signals_through(tmp_path: Path) -> None:
    units = tmp_path / "units.jsonl"
    launcher = memlog_launcher(units, None).split(";")
    src = tmp_path / "a.cpp"
    src.write_text("int f() { return 1; }\n")
    ok = run([*launcher, "c++", "-c", str(src), "-o", str(tmp_path / "a.o")], capture=True)
    assert ok.returncode == 0 and (tmp_path / "a.o").is_file()
    # (sh's "-o x.o" is its $0: the output memlog records)
    bad = run([*launcher, "sh", "-c", "exit 3", "-o", "x.o"], check=False, capture=True)
    killed = run([*launcher, "sh", "-c", "kill -9 $$", "-o", "x.o"], check=False,
                 capture=True)
    assert (bad.returncode, killed.returncode) == (3, -9)
    assert run([*launcher, "c++", "-dumpversion"], capture=True).returncode == 0  # no output
    recs = [json.loads(ln) for ln in units.read_text().splitlines()]
    assert [r["rc"] for r in recs] == [0, 3, -9]  # the version query wrote nothing
    assert recs[0]["out"] == str(tmp_path / "a.o") and recs[0]["rss"] > 1 << 20
    assert learned.read_units(units) == {str(tmp_path / "a.o"): recs[0]["rss"]}


N = 12
RECIPE = """schema_version = 1
[package]
name = "manyunits"
version = "1.0.0"
[source]
path = "{src}"
[build]
backend = "cmake"
mem_per_job_gb = 4
python_requires = ["cmake", "ninja"]
"""


def test_cmake_build_keeps_ninja_log_and_learns_unit_memory(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(manyunits LANGUAGES CXX)\n"
        f"add_library(many SHARED {' '.join(f'u{i}.cpp' for i in range(N))})\n"
        "install(TARGETS many LIBRARY DESTINATION lib)\n")
    for i in range(N):
        (src / f"u{i}.cpp").write_text(f"#include <vector>\nint f{i}() {{ return {i}; }}\n")
    recipe = tmp_path / "manyunits.toml"
    recipe.write_text(RECIPE.format(src=src))
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_PROGRESS_SECONDS": "3600"}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--jobs", "2", env=env)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "building manyunits" in ln]
    assert lines and all(re.search(r": \[\d+/\d+\] \d+ %, [0-9]+ running, ", ln)
                         for ln in lines), res.stderr
    (logs,) = (p for p in (tmp_path / "w/logs/manyunits").iterdir() if p.name[0] != ".")
    kept = progress.load_ninja_log(logs / "build.ninja_log")
    assert sum(k.endswith(".o") for k in kept) == N, kept
    assert (logs / "build.log").is_file()
    # every unit measured; cmake's configure checks (try_compile's cmTC_*) are not units
    assert sorted(learned.read_units(logs / "units.jsonl")) == sorted(
        f"CMakeFiles/many.dir/u{i}.cpp.o" for i in range(N))
    (file,) = (tmp_path / "w/cache/learned/manyunits").glob("*.json")
    assert json.loads(file.read_text())["archs"] == ["gfx942"]
    plan = rocmbuild("plan", str(recipe), "--arch", "gfx942", env=env)
    assert plan.returncode == 0, plan.stderr
    reason = next(ln for ln in plan.stdout.splitlines() if ln.startswith("MAX_JOBS"))
    assert f"p95 measured over {N} units + 15 %" in reason, reason
    other = rocmbuild("plan", str(recipe), "--arch", "gfx90a", env=env)  # nothing learned
    assert "measured" not in other.stdout and "4 GiB per job" in other.stdout, other.stdout
    # a controller planning for a node (--host: 64 cpus, 256 GiB) with the shared cache
    node = host.detect(dists=("cmake", "ninja")).to_json()
    node.update(cpus=64, memory={"usable_bytes": 256 << 30, "source": "node's MemAvailable"})
    (tmp_path / "node.json").write_text(json.dumps(node))
    ctl = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--host", str(tmp_path / "node.json"),
                    "--cache-dir", str(tmp_path / "w/cache"), env={"ROCMBUILD_WORKDIR": str(
                        tmp_path / "controller")})
    assert ctl.returncode == 0, ctl.stderr
    assert re.search(rf"^MAX_JOBS 64: min\(64 cpus( \([a-z ]+\))?, "
                     rf"floor\(256.0 GiB usable \(node's "
                     rf"MemAvailable\) / .* measured over {N} units", ctl.stdout, re.M), ctl.stdout
