"""A cell reads the config by its path when it runs (on a Slurm node, maybe hours after the
controller planned the run): the controller writes the sha256 of the config bytes it read into
the run's manifest, and the cell refuses a config whose bytes are not those any more (one line,
exit 2, naming the file), before it builds or publishes anything. For real: a local nightly of
a small path recipe writes the manifest (its own cell ran with the same bytes and passed), then
nightly.toml is edited to publish elsewhere and the cell's command is run directly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.conftest import rocmbuild

CELL = "plain.default.default.gfx942"
CONFIG = '[[matrix]]\nrecipes = ["plain.toml"]\narchs = ["gfx942"]\n' \
    '[publish]\nindex = "{index}"\n[reports]\ndir = "reports"\n'


def test_a_cell_refuses_a_config_edited_after_the_controller_read_it(tmp_path: Path) -> None:
    d = tmp_path
    (d / "plain-src/demo").mkdir(parents=True)
    (d / "plain-src/demo/__init__.py").write_text("VALUE = 1\n")
    (d / "plain-src/setup.py").write_text(
        'from setuptools import setup\nsetup(name="nightly-plain", version="1.0", '
        'packages=["demo"])\n')
    (d / "plain.toml").write_text('schema_version = 1\n[package]\nname = "nightly-plain"\n'
                                  '[source]\npath = "plain-src"\n[arch]\nsupported = '
                                  '["gfx942"]\n[build]\nmem_per_job_gb = 1\n'
                                  'python_requires = ["setuptools", "wheel"]\n')
    config = d / "nightly.toml"
    config.write_text(CONFIG.format(index="index"))
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d)
    assert first.returncode == 0, first.stderr  # its cell ran with the bytes the run read
    assert json.loads(first.stdout)["cells"][0]["promoted"] is True
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config_sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()

    config.write_text(CONFIG.format(index="elsewhere"))  # edited while the cell waits
    res = rocmbuild("--workdir", str(d / "build"), "nightly", "--config", str(config),
                    "--run-dir", str(run_dir), "--cell", CELL, cwd=d)
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("usage error:")]
    assert errors == [f"usage error: --config: {config}: changed since run {run_dir.name} "
                      f"read it (sha256 {hashlib.sha256(config.read_bytes()).hexdigest()[:12]}"
                      f", the run's {manifest['config_sha256'][:12]}): the cell would not "
                      "build or publish what the run planned"], res.stderr
    assert "hint:" in res.stderr and "Traceback" not in res.stderr
    assert not (d / "elsewhere").exists()  # nothing published where the run did not plan
    result = json.loads((run_dir / "cells" / CELL / "result.json").read_text())
    assert result["status"] == "failed" and result["exit_code"] == 2
    assert "changed since run" in result["reason"]
