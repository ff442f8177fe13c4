"""flash-attn's CK variant built for gfx942 against the build-only ROCm torch, from the PyPI sdist
2.8.3.post1, with ``--opt flash-attn.ck_units=smoke`` (one forward kernel, the four dispatch
APIs and the seven glue files: 12 units). Heavy: about 6 minutes on 2 cores, so it runs by hand
(``ROCMBUILD_HEAVY=1 scripts/test.sh tests/integration/test_ck_smoke.py``;
docs/dev/benchmarks-notebook.md has the figures).

Real parts: the sdist from PyPI, patch 0003, setup.py's own ROCm path (its generate.py codegen,
cpp_extension's hipify and ninja, the build-only torch's hipcc over clang-22), Debian's ROCm
7.2.4 SDK, the tag, audit and link check, and publish. What cannot exist here: loading the
wheel (stub HIP libraries, no AMD GPU)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.conftest import rocmbuild
from tests.integration.test_build_only_torch import _cli, _env, pytestmark, torch_dir  # noqa: F401

pytestmark = [pytestmark, pytest.mark.heavy]


def test_ck_smoke_build_for_gfx942(torch_dir: Path, tmp_path: Path,  # noqa: F811
                                   workdir: dict[str, str]) -> None:
    work = Path(workdir["ROCMBUILD_WORKDIR"])
    res = _cli("build", "flash-attn", "--arch", "gfx942", "--source", "pypi", "--opt",
               "flash-attn.ck_units=smoke", "--opt", "flash-attn.opt_dim=128", workdir=work,
               cache=Path(workdir["ROCMBUILD_CACHE_DIR"]))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    out = res.stdout + res.stderr
    (wheel,) = sorted((work / "wheels").glob("flash_attn-*.whl"))
    assert "+rocm7.2.torch2.13.cxx11abitrue.buildonly.partial.gfx942" in wheel.name
    assert "device code for gfx942; links: " in out and "all resolve" in out
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(next(zf.read(n) for n in zf.namelist()
                               if n.endswith(".dist-info/rocmbuild.json")))
        assert any(n.startswith("flash_attn_2_cuda") and n.endswith(".so")
                   for n in zf.namelist())
    assert prov["release"] == "2.8.3" and prov["plan"]["options"]["ck_units"] == "smoke"
    assert len(prov["unpublishable"]) == 2  # build-only torch, partial
    pub = rocmbuild("publish", str(wheel), "--index", str(tmp_path / "index"), env=_env(work))
    assert pub.returncode == 9 and "never published" in pub.stderr
