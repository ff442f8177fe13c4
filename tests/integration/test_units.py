"""`plan --units` on the real flash-attn sdist (PyPI, pinned by sha256; kept in pytest's
download cache): the sdist's own CK generate.py lists the units setup.py would compile, for the
default OPT_DIM and for --opt flash-attn.opt_dim=128. No compiler runs. The main line's and the
fork's generate.py calls (--targets, --optdim) run against a fake generator
(tests/fixtures/fake-ck-fmha): their CK checkouts cannot be fetched here."""

from __future__ import annotations

import json

import pytest

from rocmbuild.pipeline import units
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.conftest import REPO, rocmbuild
from tests.unit.plan.test_render import HOST


def flash(line: str = "2.8-fork", **kw: object):  # type: ignore[no-untyped-def]
    recipe = load(find_recipe("flash-attn")).on_line(line)
    return render(recipe, Target(**kw), HOST)  # type: ignore[arg-type]


def test_flash_attn_unit_counts(workdir: dict[str, str]) -> None:
    base = ("plan", "flash-attn", "--source", "pypi", "--release", "2.8-fork", "--arch", "gfx942",
            "--units")
    res = rocmbuild(*base, "--opt", "flash-attn.opt_dim=128", env=workdir)
    assert res.returncode == 0, res.stderr
    assert "compile units: 697 (OPT_DIM=128)" in res.stdout, res.stdout
    assert "option   opt_dim=128" in res.stdout
    full = rocmbuild(*base, "--json", env=workdir)
    assert full.returncode == 0, full.stderr
    data = json.loads(full.stdout)
    assert data["units"]["count"] == 2775 and data["options"] == {"ck_units": "all",
                                                                "opt_dim": "32,64,128,256"}
    # the Triton variant compiles nothing (unit_count = "none", a pip-wheel build): not counted
    tri = rocmbuild(*base, "--variant", "triton", env=workdir)
    assert tri.returncode == 0, tri.stderr
    assert "compile units: not counted (no counter for this backend)" in tri.stdout


FAKE_CK = REPO / "tests/fixtures/fake-ck-fmha"


@pytest.mark.parametrize(("arch", "opt_dim", "count", "shown"), [
    ("gfx942", None, 4 * (4 + 1), "OPT_DIM=32,64,128,256, targets=gfx942"),
    ("gfx90a,gfx942", None, 4 * (8 + 1), "OPT_DIM=32,64,128,256, targets=gfx90a,gfx942"),
    ("gfx90a,gfx942:sramecc+", "128", 4 * (2 + 1), "OPT_DIM=128, targets=gfx90a,gfx942"),
])
def test_main_counts_per_arch_set_and_opt_dim(arch: str, opt_dim: str | None, count: int,
                                              shown: str) -> None:
    """plan --units on the main line calls generate.py as main's setup.py does: --optdim and
    --targets with the plan's gfx names. The generator is a fake (tests/fixtures/fake-ck-fmha):
    main's CK (c56c6750) cannot be fetched here; the fake's count follows both arguments, so
    this fails if either does not reach it. Real counts for main are not known."""
    plan = flash("main", arch=arch, options=(("opt_dim", opt_dim),) if opt_dim else ())
    assert plan.unit_count == "ck-fmha-targets"
    got = units.count(plan, [FAKE_CK])
    assert got.count == count and got.line() == f"compile units: {count} ({shown})"
    assert "--optdim --targets" in got.how


def test_fork_count_passes_neither_optdim_nor_targets() -> None:
    """The fork's setup.py passes no --optdim and no --targets: the fake then lists its own
    defaults (4 dims, one target), and the count says no OPT_DIM."""
    got = units.count(flash(arch="gfx90a,gfx942"), [FAKE_CK])
    assert got.count == 4 * (4 + 1) and got.settings == () and "--optdim" not in got.how
