"""`plan --units` on the real flash-attn sdist (PyPI, pinned by sha256; kept in pytest's
download cache): the sdist's own CK generate.py lists the units setup.py would compile, for the
default OPT_DIM and for --opt flash-attn.opt_dim=128. No compiler runs."""

from __future__ import annotations

import json

from tests.conftest import rocmbuild


def test_flash_attn_unit_counts(workdir: dict[str, str]) -> None:
    base = ("plan", "flash-attn", "--source", "pypi", "--arch", "gfx942", "--units")
    res = rocmbuild(*base, "--opt", "flash-attn.opt_dim=128", env=workdir)
    assert res.returncode == 0, res.stderr
    assert "compile units: 697 (OPT_DIM=128)" in res.stdout, res.stdout
    assert "option   opt_dim=128" in res.stdout
    full = rocmbuild(*base, "--json", env=workdir)
    assert full.returncode == 0, full.stderr
    data = json.loads(full.stdout)
    assert data["units"]["count"] == 2775 and data["options"] == {"opt_dim": "32,64,128,256"}
    # the Triton variant compiles nothing (unit_count = "none", a pip-wheel build): not counted
    tri = rocmbuild(*base, "--variant", "triton", env=workdir)
    assert tri.returncode == 0, tri.stderr
    assert "compile units: not counted (no counter for this backend)" in tri.stdout
