"""A stack in the nightly matrix (``stacks = [...]``, docs/stacks.md): a cell per member and arch
set in one group, carried in the manifest, and promoted only when every cell of the group is
green. The stack names the small test recipes (tests/recipes/stack-*.toml); the outcomes are
given, the index and the report are real directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import config, controller
from rocmbuild.nightly.model import CellOutcome, End, Held

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
    report = controller.finish(cfg, data, built, "")
    return {o.cell_id: o for o in report.outcomes}


PURE, EXT, PROBE = ("stack-pure.default.default.gfx942", "stack-ext.default.default.gfx942",
                    "hip-attention-probe.default.default.gfx942")


def test_a_green_member_of_a_stack_with_a_failed_member_is_not_promoted(tmp_path: Path) -> None:
    out = _finish(tmp_path, {PURE: Status.SUCCESS, EXT: Status.FAILED, PROBE: Status.SUCCESS})
    assert out[PURE].status is Status.SUCCESS and not out[PURE].promoted
    assert out[PURE].reason == f"not promoted: stack small.gfx942 is not green ({EXT} not)"
    assert (out[PURE].held, out[PURE].held_why) == (Held.STACK, out[PURE].reason)
    assert out[PROBE].held is Held.NO and out[EXT].held is Held.NO
    # a cell on its own is promoted as before (here the staging stage lacks its wheel: the
    # promote is tried, and fails, so the gate let it through)
    assert out[PROBE].reason.startswith("promote failed"), out[PROBE]


def test_a_stack_whose_members_are_all_green_is_promoted(tmp_path: Path) -> None:
    out = _finish(tmp_path, {PURE: Status.SUCCESS, EXT: Status.SUCCESS, PROBE: Status.FAILED})
    assert out[PURE].reason.startswith("promote failed") and \
        out[EXT].reason.startswith("promote failed"), out


CK = "ck-fmha-probe.default.default.gfx942"


def _stack(tmp_path: Path, name: str, directions: str) -> None:
    (tmp_path / f"{name}.toml").write_text(
        f'schema_version = 1\n[[members]]\nrecipe = "ck-fmha-probe"\n'
        f'options = {{ directions = "{directions}" }}\n')


@pytest.mark.parametrize(("matrix", "entry"), [
    ('recipes = ["ck-fmha-probe"]\narchs = ["gfx942"]\n[[matrix]]\nrecipes = ["ck-fmha-probe"]'
     '\narchs = ["gfx942"]\noptions = { directions = "bwd" }', 1),
    ('stacks = ["fwd.toml"]\narchs = ["gfx942"]\n[[matrix]]\nrecipes = ["ck-fmha-probe"]\n'
     'archs = ["gfx942"]\noptions = { directions = "bwd" }', 1),
    ('recipes = ["ck-fmha-probe"]\noptions = { directions = "bwd" }\nstacks = ["fwd.toml"]\n'
     'archs = ["gfx942"]', 0),
    ('stacks = ["fwd.toml", "bwd.toml"]\narchs = ["gfx942"]', 0),
])
def test_two_cells_that_differ_only_in_options_cannot_be(tmp_path: Path, matrix: str,
                                                        entry: int) -> None:
    """Options are not part of a cell id (``ck-fmha-probe.default.default.gfx942`` with any
    options): so two cells that differ only in their options would be one id for two builds
    (one cells/<id>/, result.json, pending record and report line, overwriting each other).
    The config refuses the second one, whichever way it comes (two matrix entries, a stack's
    member and a recipe entry, two stacks), before anything is planned."""
    _stack(tmp_path, "fwd", "fwd")
    _stack(tmp_path, "bwd", "bwd")
    with pytest.raises(UsageError) as info:
        config.load(_config(tmp_path, matrix))
    assert info.value.message == (f"nightly.toml: matrix[{entry}]: cell {CK} is already in "
                                  "the matrix, from matrix[0]")


def test_a_cell_carries_its_options_under_the_id_without_them(tmp_path: Path) -> None:
    _stack(tmp_path, "fwd", "fwd")
    cfg = config.load(_config(tmp_path, 'stacks = ["fwd.toml"]\narchs = ["gfx942"]\n[[matrix]]\n'
                                        'recipes = ["ck-fmha-probe"]\narchs = ["gfx90a"]\n'
                                        'options = { directions = "bwd", opt_dim = 128 }'))
    assert [(c.id, c.options) for c in cfg.cells] == [
        (CK, (("directions", "fwd"),)),
        ("ck-fmha-probe.default.default.gfx90a", (("directions", "bwd"), ("opt_dim", "128")))]
