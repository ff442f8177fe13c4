"""The nightly over the HIP probe (recipes/hip-attention-probe.toml) for gfx942 and
gfx90a+gfx942 (and gfx950 where the compiler has it: conftest.probe_archs): real device code
from the detected HIP compiler, validated (import in an isolated venv; the kernel gate SKIPPED:
no GPU here), staged and promoted; a second run skips both.

The two wheels come from this session's probe fixtures (conftest.build_probe, through the real
CLI): their cache entries are copied into the nightly's cache, which is content-addressed, so the
nightly finds them by key, verifies them and only validates (no third and fourth probe build in
CI). A key that did not match would make the nightly build: slower, still correct.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import rocmbuild


def _seed(cache: Path, *workspaces: Path) -> None:
    for ws in workspaces:
        for entry in (ws / "cache" / "wheels").iterdir():
            if entry.is_dir() and not (cache / "wheels" / entry.name).exists():
                shutil.copytree(entry, cache / "wheels" / entry.name)


def test_probe_cells_validated_staged_promoted_then_skipped(tmp_path, probe_wheel_2,
                                                             probe_wheel_942, probe_archs, hipc):
    _seed(tmp_path / "build" / "cache", probe_wheel_2.parent / "work",
          probe_wheel_942.parent / "work")
    config = tmp_path / "nightly.toml"
    config.write_text('[[matrix]]\nrecipes = ["hip-attention-probe"]\n'
                      f'archs = ["gfx942", "{",".join(probe_archs)}"]\ntimeout = "20m"\n'
                      '[publish]\nindex = "index"\n')
    env = {"ROCMBUILD_HIP_COMPILER": str(hipc.path)}
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    cells = {c["cell"]: c for c in json.loads(first.stdout)["cells"]}
    one, two = ("hip-attention-probe.default.default.gfx942",
                f"hip-attention-probe.default.default.{'-'.join(probe_archs)}")
    assert set(cells) == {one, two}
    for c in cells.values():
        assert c["status"] == "success" and c["promoted"] is True, c
        assert "validation passed" in c["reason"]
    assert f".{'.'.join(probe_archs)}-" in cells[two]["wheel"]
    assert ".gfx942-" in cells[one]["wheel"]
    served = {f["filename"] for f in json.loads(
        (tmp_path / "index/stable/simple/hipattn/index.json").read_text())["files"]}
    assert served == {cells[one]["wheel"], cells[two]["wheel"]}
    again = rocmbuild("nightly", "--config", str(config), "--json", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert {c["status"] for c in json.loads(again.stdout)["cells"]} == {"skipped"}
