"""Build and validate as two steps, for real: a local nightly of a small path recipe whose
validation needs a runtime module this host's validation environment cannot get
(``[validate] requires = ["nightly-helper"]``, with pip told to use only an empty find-links
directory: pip's real "no matching distribution", exit 10 ToolchainError, which is how validate
says "cannot run here", as it does for triton on a CPU host). The cell's wheel is built, goes to
staging marked pending, is not promoted, and the report says where and how it will be validated.
Then ``nightly --validate-pending`` with the requirement satisfied (the helper's wheel, built by
real pip, in the find-links directory: the GPU host's environment) validates it from the cache
and promotes it; the report, page and .prom are written again. No GPU here (the kernel gate is
SKIPPED either way, as ``build --validate`` records it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import rocmbuild

CELL = "needy.default.default.gfx942"
PLAIN = "plain.default.default.gfx942"
SETUP = 'from setuptools import setup\nsetup(name="{name}", version="1.0", packages=["{pkg}"])\n'


def _recipe(d: Path, name: str, validate: str) -> None:
    src = d / f"{name}-src"
    (src / "demo").mkdir(parents=True)
    (src / "demo/__init__.py").write_text("VALUE = 1\n")
    (src / "setup.py").write_text(SETUP.format(name=f"nightly-{name}", pkg="demo"))
    (d / f"{name}.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-{name}"
[source]
path = "{name}-src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
[validate]
imports = ["demo"]
{validate}
""")


def _helper_wheel(d: Path, out: Path) -> None:
    """The validation's runtime dependency, a real wheel built by pip."""
    src = d / "helper-src"
    (src / "nightly_helper").mkdir(parents=True)
    (src / "nightly_helper/__init__.py").write_text("")
    (src / "setup.py").write_text(SETUP.format(name="nightly-helper", pkg="nightly_helper"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)], check=True)


def _stage(d: Path, stage: str) -> set[str]:
    p = d / "index" / stage / "simple"
    return {f["filename"] for j in p.glob("*/index.json")
            for f in json.loads(j.read_text())["files"]}


def test_pending_then_validated_elsewhere(tmp_path: Path) -> None:
    d = tmp_path
    _recipe(d, "needy", 'requires = ["nightly-helper"]')
    _recipe(d, "plain", "")
    links = d / "links"
    links.mkdir()
    config = d / "nightly.toml"
    config.write_text("""[[matrix]]
recipes = ["needy.toml", "plain.toml"]
archs = ["gfx942"]
[publish]
index = "index"
[reports]
dir = "reports"
""")
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert first.returncode == 0, first.stderr  # built, pending: not a failed cell
    cells = {c["cell"]: c for c in json.loads(first.stdout)["cells"]}
    needy, plain = cells[CELL], cells[PLAIN]
    assert needy["status"] == "success" and needy["validation"] == "pending", needy
    assert needy["promoted"] is False
    assert "NOT VALIDATED" in needy["reason"] and "--validate-pending" in needy["reason"]
    assert "nightly-helper" in needy["reason"]
    assert plain["validation"] == "passed" and plain["promoted"] is True
    assert _stage(d, "staging") == {needy["wheel"], plain["wheel"]}
    assert _stage(d, "stable") == {plain["wheel"]}  # the pending wheel is never promoted
    rec = json.loads(next(d.rglob(f"pending/{CELL}.json")).read_text())
    assert rec["cell"] == CELL and rec["wheel"] == needy["wheel"]
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    summary = (run_dir / "summary.md").read_text()
    assert "built, pending validation" in summary and "--validate-pending" in summary
    prom = (d / "reports" / "rocmbuild.prom").read_text()
    assert f'rocmbuild_nightly_cell_validation_pending{{cell="{CELL}"}} 1' in prom
    assert f'rocmbuild_nightly_cell_validated{{cell="{CELL}"}} 0' in prom
    assert f'rocmbuild_nightly_cell_built{{cell="{CELL}"}} 1' in prom

    # this host still cannot: it stays pending, exit 10, nothing promoted
    again = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert again.returncode == 10, again.stderr
    assert "still pending" in again.stdout and _stage(d, "stable") == {plain["wheel"]}

    # the validation host: the requirement is there now
    _helper_wheel(d, links)
    done = rocmbuild("nightly", "--config", str(config), "--validate-pending", "--json",
                     cwd=d, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert [(r["cell"], r["validation"], r["promoted"]) for r in got] == [(CELL, "passed", True)]
    assert _stage(d, "stable") == {needy["wheel"], plain["wheel"]}
    assert not list(d.rglob(f"pending/{CELL}.json"))
    report = json.loads((run_dir / "report.json").read_text())
    after = {c["cell"]: c for c in report["cells"]}[CELL]
    assert after["validation"] == "passed" and after["promoted"] is True
    assert "then validation passed on" in after["reason"], after
    prom = (d / "reports" / "rocmbuild.prom").read_text()
    assert f'rocmbuild_nightly_cell_validation_pending{{cell="{CELL}"}} 0' in prom
    assert f'rocmbuild_nightly_cell_validated{{cell="{CELL}"}} 1' in prom
    assert "built, validated" in (run_dir / "summary.md").read_text()
    # nothing left: a second call has nothing to do
    idle = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert idle.returncode == 0 and "no pending wheels" in idle.stderr
    # the next night: the cell's wheel is validated now, so it is skipped
    night2 = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert night2.returncode == 0, night2.stderr
    assert {c["cell"]: c["status"] for c in json.loads(night2.stdout)["cells"]} == {
        CELL: "skipped", PLAIN: "skipped"}
