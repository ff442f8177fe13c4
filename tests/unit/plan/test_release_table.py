"""docs/releases.md's table of ROCm x torch pairs and the flash-attn line each gets: every cell is
planned here (the CK variant, plan.planning.plan) and must name the line the planner picks, or
"none" where the planner finds no line. The hosts are Host values (a ROCm root and a ROCm torch
cannot exist on this machine): a ROCm SDK of that release with hipcc, and a ROCm torch of that
release built for it (``torch.version.rocm`` from ROCm 10 on, whose HIP versions differ)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import ToolchainError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan import planning
from rocmbuild.plan.render import Target
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe

DOC = Path(__file__).parents[3] / "docs" / "releases.md"
HIP = {"10.0": "7.15", "10.1": "7.16"}  # from ROCm 10 the HIP version is not the ROCm one
BASE = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")


def table() -> dict[tuple[str, str], str]:
    """(ROCm row, torch column) -> the cell's line name, or "none"."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| ROCm \\ torch |"))
    torches = [c.strip() for c in lines[start].strip("|").split("|")[1:]]
    out: dict[tuple[str, str], str] = {}
    for row in lines[start + 2:]:
        if not row.startswith("|"):
            break
        rocm, *cells = [c.strip() for c in row.strip("|").split("|")]
        for torch, cell in zip(torches, cells, strict=True):
            m = re.fullmatch(r"\**(?:`([^`]+)`|none \([A-Z]\))\**", cell)
            assert m, f"{DOC.name}: cell {rocm} x {torch}: {cell!r}"
            out[(rocm, torch)] = m.group(1) or "none"
    return out


def host(rocm: str, torch: str) -> Host:
    version = rocm.rstrip("+")
    hip = HIP.get(version, version)
    return replace(BASE, rocm_root=RocmRoot(Path(f"/opt/rocm-{version}.0"), f"{version}.0",
                                            "rocm", True, "ROCM_PATH"),
                   torch=TorchInfo(f"{torch}.0+rocm{version}", f"{hip}.0.12345-abcdef", None,
                                   rocm=f"{version}.0"))


def test_the_table_has_every_pair() -> None:
    cells = table()
    assert {r for r, _ in cells} == {"6.2", "6.3", "6.4", "7.0", "7.1", "7.2", "7.14", "10.0",
                                     "10.1+"}
    assert {t for _, t in cells} == {f"2.{m}" for m in range(5, 16)}
    assert len(cells) == 9 * 11


@pytest.mark.parametrize(("rocm", "torch"), sorted(table()))
def test_each_cell_is_what_the_planner_picks(rocm: str, torch: str) -> None:
    want = table()[(rocm, torch)]
    recipe = load(find_recipe("flash-attn"))
    if want == "none":
        with pytest.raises(ToolchainError, match="no release line fits this host"):
            planning.plan(recipe, Target(arch="gfx942", variant="ck"), host(rocm, torch))
        return
    plan = planning.plan(recipe, Target(arch="gfx942", variant="ck"), host(rocm, torch))
    assert plan.release == want
