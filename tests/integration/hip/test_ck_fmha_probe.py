"""The ck-fmha-probe recipe for real: the flash-attn sdist (the real PyPI file, pinned by sha256,
kept in pytest's download cache) comes in as a [[downloads]] entry, probes/ck-fmha's CMakeLists
runs the sdist's own generate.py and compiles ONE light Composable Kernel attention unit (d64
fp16 forward, no mask, lse or dropout) with setup.py's flags for gfx942 through the cmake backend
and the real HIP compiler (scripts/install-hip-toolchain.sh's clang-22); the audit stage must find
gfx942 in the library. Nothing is faked; the kernel itself cannot run here (no AMD GPU)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild

LIGHT = "fmha_fwd_d64_fp16_batch_*_psddv_nlogits_nbias_nmask_nlse_ndropout_*"
OPTS = ("--opt", f"ck-fmha-probe.units={LIGHT}")


def test_ck_fmha_probe_counts_builds_and_audits_one_unit(
        tmp_path: Path, workdir: dict[str, str]) -> None:
    plan = rocmbuild("plan", "ck-fmha-probe", "--arch", "gfx942", *OPTS, "--units", "--json",
                     env=workdir)
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert data["units"]["count"] == 1
    assert data["units"]["settings"] == {"OPT_DIM": "64", "CK_FMHA_DIRECTIONS": "fwd",
                                         "CK_FMHA_UNITS": LIGHT}
    assert data["options"] == {"directions": "fwd", "opt_dim": "64", "units": LIGHT}

    res = rocmbuild("build", "ck-fmha-probe", "--arch", "gfx942", *OPTS, env=workdir)
    assert res.returncode == 0, res.stderr
    assert "device code for gfx942" in res.stderr, res.stderr
    log = next(Path(workdir["ROCMBUILD_WORKDIR"], "logs", "ck-fmha-probe").glob("*/build.log"))
    text = log.read_text()
    assert "ck-fmha-probe: 1 unit(s) for gfx942" in text
    assert "upstream clang: without setup.py's inline flags" in text
    # setup.py's defines reach the unit; the inline flags (hip-lang::device adds them) do not
    ninja = next(Path(workdir["ROCMBUILD_WORKDIR"], "src", "ck-fmha-probe").glob(
        "*/_rocmbuild_cmake/build.ninja")).read_text()
    assert "-DCK_TILE_FMHA_FWD_FAST_EXP2=1" in ninja and "-enable-post-misched=0" in ninja
    assert "amdgpu-early-inline-all" not in ninja and "amdgpu-function-calls" not in ninja
    wheel = next(Path(workdir["ROCMBUILD_WORKDIR"], "wheels").glob("ck_fmha_probe-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        chosen = zf.read("ck_fmha_probe/share/units.txt").decode().split()
        prov = json.loads(zf.read(next(n for n in names if n.endswith("rocmbuild.json"))))
    assert "ck_fmha_probe/lib/libck_fmha.so" in names, names
    assert len(chosen) == 1 and chosen[0].startswith("fmha_fwd_d64_fp16_batch_"), chosen
    assert prov["plan"]["options"]["units"] == LIGHT  # the provenance holds the options
