"""Build and validate as two Slurm arrays, for real: a private single-node Slurm (slurmctld +
slurmd of Debian's slurm-wlm on 127.0.0.1, tests/integration/slurm_cluster.py) whose node
declares one GPU GRES without a device (gres.conf ``Name=gpu Count=1 File=/dev/null``: Slurm
counts and schedules it, binds nothing) in a second partition ``gpu``. With ``gpu_partition``
set, each cell's build runs on the default partition and its validation as a second array on
``gpu`` with ``--gres=gpu:1``, each task after its build task (``--dependency=aftercorr``,
``--kill-on-invalid-dep=yes``): a green cell is validated there and promoted; a cell whose
build fails has its validation task cancelled by Slurm; a cell whose validation needs what the
node lacks stays pending (not promoted, its record kept for ``--validate-pending``). No GPU
here: the kernel gate is SKIPPED, the GRES is a count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import rocmbuild
from tests.integration import slurm_cluster
from tests.integration.test_nightly import _path_recipe
from tests.integration.test_nightly_pending import _recipe

OK = "plain.default.default.gfx942"
NEEDY = "needy.default.default.gfx942"
F = "fails.default.default.gfx942"


@pytest.fixture(scope="module")
def gpu_slurm() -> Iterator[slurm_cluster.Cluster]:
    yield from slurm_cluster.serve(lambda: slurm_cluster.cluster(gpu=True))


def test_build_then_validate_on_the_gpu_partition(gpu_slurm: slurm_cluster.Cluster,
                                                 tmp_path: Path) -> None:
    d = tmp_path
    _recipe(d, "plain", "")
    _recipe(d, "needy", 'requires = ["nightly-helper"]')
    _path_recipe(d, "fails", "raise SystemExit('boom: this cell fails on purpose')")
    (d / "links").mkdir()
    config = d / "nightly.toml"
    config.write_text(f"""[[matrix]]
recipes = ["plain.toml", "needy.toml", "fails.toml"]
archs = ["gfx942"]
timeout = "10m"
[publish]
index = "index"
[reports]
dir = "reports"
[executor]
kind = "slurm"
shared_dir = "{d}"
partition = "debug"
gpu_partition = "gpu"
gpu_gres = "gpu:1"
poll = "0.2s"
""")
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(d / "links")}
    res = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert res.returncode == 14, res.stderr  # the failed build
    cells = {c["cell"]: c for c in json.loads(res.stdout)["cells"]}
    ok, needy, fails = cells[OK], cells[NEEDY], cells[F]
    assert (ok["status"], ok["validation"], ok["promoted"]) == ("success", "passed", True), ok
    assert "validation passed on" in ok["reason"]
    assert (needy["status"], needy["validation"], needy["promoted"]) == (
        "success", "pending", False), needy
    assert "still pending" in needy["reason"] and "nightly-helper" in needy["reason"]
    assert (fails["status"], fails["validation"]) == ("failed", "")
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    sub = json.loads((run_dir / "slurm.json").read_text())
    build, check = sub["jobs"]
    assert check["after"] == build["job_id"] and "after" not in build
    assert (build["partition"], build["gpus"]) == ("debug", 0)
    assert (check["partition"], check["gpus"]) == ("gpu", 1)
    assert [c["cell"] for c in sub["validations"]] == [OK, NEEDY, F]
    task = {c["cell"]: f"{c['job_id']}_{c['task']}" for c in sub["validations"]}
    shown = gpu_slurm.sh("scontrol", "-o", "show", "job", task[OK])
    assert "Partition=gpu" in shown and "gpu:1" in shown, shown
    assert "JobState=COMPLETED" in shown
    # the failed build's validation never ran: Slurm cancelled it (invalid dependency)
    failed_check = gpu_slurm.sh("scontrol", "-o", "show", "job", task[F])
    assert "JobState=CANCELLED" in failed_check, failed_check
    assert not (run_dir / "cells" / F / "validate.json").exists()
    assert (run_dir / "cells" / OK / "validate.log").stat().st_size > 0
    stable = {f["filename"] for j in (d / "index" / "stable" / "simple").glob("*/index.json")
              for f in json.loads(j.read_text())["files"]}
    assert stable == {ok["wheel"]}
    assert next(d.rglob(f"pending/{NEEDY}.json")).is_file()
    assert not list(d.rglob(f"pending/{OK}.json"))
    summary = (run_dir / "summary.md").read_text()
    assert "| built, validated |" in summary and "| built, pending validation |" in summary
