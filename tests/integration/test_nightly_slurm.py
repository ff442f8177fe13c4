"""`rocmbuild nightly --executor slurm` end to end against a real single-node Slurm (the
``slurm`` module fixture of test_slurm.py: slurmctld + slurmd of Debian's slurm-wlm on
127.0.0.1): the real command submits the matrix as an sbatch array with ``--no-wait``, a second
nightly is refused while the array is out, one task is cancelled with scancel while it runs,
and ``--collect`` waits, collects, promotes the green cell and writes the report. The cells
are the small recipes of test_nightly.py (a local git repository, a failing path recipe, a
sleeping one); real git, pip and the validate stage (kernel gate SKIPPED: no GPU here)."""

from __future__ import annotations

import contextlib
import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from tests.conftest import rocmbuild
from tests.integration import slurm_cluster
from tests.integration.test_nightly import _path_recipe, _repo
from tests.integration.test_slurm import slurm, wait_for

__all__ = ["slurm"]  # the module fixture: one cluster for this module

OK = "follow.default.default.gfx942"
F = "fails.default.default.gfx942"
C = "slow.default.default.gfx942"


def test_no_wait_collect_completed_failed_cancelled(slurm: slurm_cluster.Cluster,
                                                    tmp_path: Path) -> None:
    d = tmp_path
    head = _repo(d, "upstream-follow")
    (d / "follow.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-follow"
[source]
git = "upstream-follow"
commit = "{head}"
ref = "main"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
[options.flavour]
env = "DEMO_FLAVOUR"
default = "plain"
help = "an option of the test recipe (the cell sets it: it reaches the wheel's provenance)"
choices = ["plain", "spicy"]
[validate]
imports = ["demo"]
""")
    _path_recipe(d, "fails", "raise SystemExit('boom: this cell fails on purpose')")
    pid_file = d / "slow.pid"
    _path_recipe(d, "slow", f"import os, time; open({str(pid_file)!r}, 'w')"
                 ".write(str(os.getpid())); time.sleep(300)")
    config = d / "nightly.toml"
    config.write_text(f"""[[matrix]]
recipes = ["follow.toml"]
archs = ["gfx942"]
timeout = "10m"
options = {{ flavour = "spicy" }}
[[matrix]]
recipes = ["fails.toml", "slow.toml"]
archs = ["gfx942"]
timeout = "10m"
[publish]
index = "index"
[reports]
dir = "reports"
[executor]
kind = "slurm"
shared_dir = "{d}"
poll = "0.2s"
time = "1h"
""")
    t0 = time.monotonic()
    sub = rocmbuild("nightly", "--config", str(config), "--no-wait", "--json", cwd=d)
    submit_s = time.monotonic() - t0
    assert sub.returncode == 0, sub.stderr
    pending = json.loads(sub.stdout)
    rid, run_dir = pending["run"], Path(pending["run_dir"])
    assert pending["cells"] == 3 and run_dir == d / "reports" / rid
    assert not (run_dir / "report.json").exists()
    submitted = json.loads((run_dir / "slurm.json").read_text())
    task = {c["cell"]: f"{c['job_id']}_{c['task']}" for c in submitted["cells"]}
    assert list(task) == [OK, F, C]
    try:
        # While the array is out a second nightly is refused (Busy) and names the run.
        again = rocmbuild("nightly", "--config", str(config), cwd=d)
        assert again.returncode == 15, again.stderr
        assert f"nightly run {rid}'s Slurm tasks" in again.stderr and "--collect" in again.stderr
        wait_for("the slow cell's build runs", pid_file.is_file, timeout=120)
        slurm.sh("scancel", task[C])
        res = rocmbuild("nightly", "--config", str(config), "--collect", rid, "--json", cwd=d)
    finally:  # the cancelled build's step, should Slurm have left it behind
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), 9)
    assert res.returncode == 14, res.stderr  # CellsFailed
    line = next(x for x in res.stderr.splitlines() if x.startswith("cells failed:"))
    assert F in line and C in line and OK not in line
    report = json.loads(res.stdout)
    assert report["run"] == rid and report["executor"] == "slurm" and report["ok"] is False
    cells = {c["cell"]: c for c in report["cells"]}
    assert (cells[OK]["status"], cells[OK]["end"], cells[OK]["promoted"]) == (
        "success", "completed", True)
    assert (cells[F]["status"], cells[F]["end"], cells[F]["promoted"]) == (
        "failed", "failed", False)
    assert "build error" in cells[F]["reason"] and cells[F]["exit_code"] == 6
    assert (cells[C]["status"], cells[C]["end"], cells[C]["promoted"]) == (
        "failed", "cancelled", False)
    assert "cancelled while running" in cells[C]["reason"]
    assert cells[OK]["peak_rss_bytes"] > 0 and cells[OK]["wheel_size"] > 0
    for cid in (OK, F, C):
        assert (run_dir / "cells" / cid / "log.txt").stat().st_size > 0
    assert "boom: this cell fails on purpose" in (run_dir / "cells" / F / "log.txt").read_text()
    stable = {f["filename"] for j in (d / "index" / "stable" / "simple").glob("*/index.json")
              for f in json.loads(j.read_text())["files"]}
    assert stable == {cells[OK]["wheel"]}
    with zipfile.ZipFile(next((d / "index").rglob(cells[OK]["wheel"]))) as z:
        prov = json.loads(z.read(next(n for n in z.namelist()
                                      if n.endswith(".dist-info/rocmbuild.json"))))
    assert prov["plan"]["options"] == {"flavour": "spicy"}, prov  # the cell's option
    saved = json.loads((run_dir / "report.json").read_text())
    assert {c["cell"]: c["end"] for c in saved["cells"]} == {
        OK: "completed", F: "failed", C: "cancelled"}
    assert (d / "reports" / "index.html").is_file() and (run_dir / "summary.md").is_file()
    timing = {t["cell"]: t for t in json.loads((run_dir / "slurm.json").read_text())["tasks"]}
    print(f"submit {submit_s:.2f}s; submit->start "
          f"{[timing[c]['submit_to_start_s'] for c in (OK, F, C)]}; end->collected "
          f"{[timing[c]['end_to_collected_s'] for c in (OK, F, C)]}")
    # collected once: a second --collect says so
    twice = rocmbuild("nightly", "--config", str(config), "--collect", rid, cwd=d)
    assert twice.returncode == 2 and "was collected already" in twice.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["--no-wait"], "usage error: --no-wait: only with the Slurm executor"),
    (["--collect", "x", "--only", "a"], "usage error: --collect: give it alone"),
    (["--collect", "../x"], "usage error: --collect: '../x' is neither a run id"),
    (["--validate-pending", "--dry-run"], "usage error: --validate-pending: give it alone"),
    (["--validate-pending", "x", "--collect", "y"], "usage error: --validate-pending: give it "
     "alone"),
    (["--validate-pending", "../r"], "usage error: --validate-pending: '../r' is not a run id")])
def test_bad_flag_combinations(tmp_path: Path, args: list[str], says: str) -> None:
    """Bad uses of --no-wait / --collect / --validate-pending: one line, a hint, exit 2 (no
    Slurm needed)."""
    (tmp_path / "p.toml").write_text('schema_version = 1\n[package]\nname = "p"\n'
                                     '[source]\npath = "."\n')
    config = tmp_path / "nightly.toml"
    config.write_text('[[matrix]]\nrecipes = ["p.toml"]\narchs = ["gfx942"]\n'
                      '[publish]\nindex = "index"\n')
    res = rocmbuild("nightly", "--config", str(config), "--executor", "local", *args)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(says) and "hint:" in res.stderr
    assert "Traceback" not in res.stderr


def test_collect_refuses_a_config_changed_since_the_run(tmp_path: Path) -> None:
    """``--collect`` checks the config's bytes against the sha256 the run's manifest has (the
    one check the cells make, ``cell.same_config``): a config edited anywhere (here only a
    comment, not its index or stages) is refused, one line, exit 2, naming the file, before
    anything is collected or promoted. The manifest is a real run's, of a cell that cannot be
    planned (a followed branch its local git upstream lacks: nothing is built); without its
    report.json it is the run a ``--no-wait`` leaves to collect (no Slurm needed to refuse)."""
    d = tmp_path
    head = _repo(d, "upstream-gone")
    (d / "gone.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-gone"
[source]
git = "{d / 'upstream-gone'}"
commit = "{head}"
ref = "no-such-branch"
[arch]
supported = ["gfx942"]
""")
    config = d / "nightly.toml"
    config.write_text('[[matrix]]\nrecipes = ["gone.toml"]\narchs = ["gfx942"]\nfollow = true\n'
                      '[publish]\nindex = "index"\n[reports]\ndir = "reports"\n')
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d)
    assert first.returncode == 14, first.stderr
    rid = json.loads(first.stdout)["run"]
    (d / "reports" / rid / "report.json").unlink()  # not collected yet
    config.write_text(config.read_text() + "# edited after the run started\n")
    res = rocmbuild("nightly", "--config", str(config), "--collect", rid, cwd=d)
    assert res.returncode == 2, res.stderr
    first_line, *rest = res.stderr.strip().splitlines()
    assert first_line.startswith(f"usage error: --config: {config}: changed since run {rid} "
                                 "read it (sha256 "), res.stderr
    assert first_line.endswith("--collect would promote and report what the run did not plan")
    assert len(rest) == 1 and rest[0].startswith("hint: put the file back as it was"), rest
    assert not (d / "reports" / rid / "report.json").exists()
