"""A stack in the nightly matrix (``stacks = [...]``, docs/stacks.md): a cell per member and arch
set in one group, carried in the manifest, and promoted only when every cell of the group is
green. The stack names the small test recipes (tests/recipes/stack-*.toml); the outcomes are
given, the index and the report are real directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import config, run
from rocmbuild.nightly.model import CellOutcome, End

RECIPES = Path(__file__).parents[2] / "recipes"


def _config(tmp_path: Path, matrix: str) -> Path:
    (tmp_path / "small.toml").write_text(
        "schema_version = 1\n" + "".join(f'[[members]]\nrecipe = "{RECIPES / r}.toml"\n'
                                         for r in ("stack-pure", "stack-ext")))
    p = tmp_path / "nightly.toml"
    p.write_text(f'workdir = "w"\n[[matrix]]\n{matrix}\n[publish]\nindex = "index"\n'
                 '[reports]\ndir = "reports"\n')
    return p


def test_a_stack_expands_to_one_group_per_arch_set(tmp_path: Path) -> None:
    cfg = config.load(_config(tmp_path, 'stacks = ["small.toml"]\narchs = ["gfx942", '
                                        '"gfx90a,gfx942"]\ntimeout = "1h"'))
    assert [(c.id, c.group) for c in cfg.cells] == [
        ("stack-pure.default.default.gfx942", "small.gfx942"),
        ("stack-ext.default.default.gfx942", "small.gfx942"),
        ("stack-pure.default.default.gfx90a-gfx942", "small.gfx90a-gfx942"),
        ("stack-ext.default.default.gfx90a-gfx942", "small.gfx90a-gfx942")]
    assert all(c.timeout_s == 3600 and c.recipe.endswith(".toml") for c in cfg.cells)


def test_a_stack_member_twice_in_the_matrix_and_a_bad_stack_are_one_line(tmp_path: Path
                                                                         ) -> None:
    with pytest.raises(UsageError, match=r"matrix\[0\]: cell stack-pure.default.default.gfx942 "
                       "is already in the matrix"):
        config.load(_config(tmp_path, f'recipes = ["{RECIPES / "stack-pure.toml"}"]\n'
                                      'stacks = ["small.toml"]\narchs = ["gfx942"]'))
    with pytest.raises(UsageError, match=r"nightly.toml: matrix\[0\].stacks: unknown stack "
                       "'nope'"):
        config.load(_config(tmp_path, 'stacks = ["nope"]\narchs = ["gfx942"]'))


def _finish(tmp_path: Path, statuses: dict[str, Status]) -> dict[str, CellOutcome]:
    cfg = config.load(_config(tmp_path, 'stacks = ["small.toml"]\narchs = ["gfx942"]\n'
                                        '[[matrix]]\nrecipes = ["hip-attention-probe"]\n'
                                        'archs = ["gfx942"]'))
    data = {"run": "20261201T000000Z", "started": "2026-12-01T00:00:00Z", "cells": [
        {"cell": {"id": c.id, **({"group": c.group} if c.group else {})}, "decision": "build"}
        for c in cfg.cells]}
    built = {cid: CellOutcome(cid, st, End.COMPLETED if st is Status.SUCCESS else End.FAILED,
                              wheel=f"{cid}.whl", version="1.0", project=cid.split(".")[0])
             for cid, st in statuses.items()}
    report = run.finish(cfg, data, built, "")
    return {o.cell_id: o for o in report.outcomes}


PURE, EXT, PROBE = ("stack-pure.default.default.gfx942", "stack-ext.default.default.gfx942",
                    "hip-attention-probe.default.default.gfx942")


def test_a_green_member_of_a_stack_with_a_failed_member_is_not_promoted(tmp_path: Path) -> None:
    out = _finish(tmp_path, {PURE: Status.SUCCESS, EXT: Status.FAILED, PROBE: Status.SUCCESS})
    assert out[PURE].status is Status.SUCCESS and not out[PURE].promoted
    assert out[PURE].reason == f"not promoted: stack small.gfx942 is not green ({EXT} not)"
    # a cell on its own is promoted as before (here the staging stage lacks its wheel: the
    # promote is tried, and fails, so the gate let it through)
    assert out[PROBE].reason.startswith("promote failed"), out[PROBE]


def test_a_stack_whose_members_are_all_green_is_promoted(tmp_path: Path) -> None:
    out = _finish(tmp_path, {PURE: Status.SUCCESS, EXT: Status.SUCCESS, PROBE: Status.FAILED})
    assert out[PURE].reason.startswith("promote failed") and \
        out[EXT].reason.startswith("promote failed"), out
