"""The nightly over the HIP probe (recipes/hip-attention-probe.toml) for gfx942 and
gfx90a+gfx942 (and gfx950 where the compiler has it: conftest.probe_archs): real device code
from the detected HIP compiler, validated as far as this host can (import in an isolated venv,
the audit) and staged, but left pending: its kernel gate (``hipattn``) has a kernel to check and
there is no GPU here, so neither wheel is promoted, and a second run does not skip them (their
validation is still to be done; each is a cache hit, pending again).

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
        assert (c["status"], c["validation"], c["promoted"]) == ("success", "pending", False), c
        assert "the kernel gate (hipattn) cannot run on this host: no GPU" in c["reason"], c
    assert f".{'.'.join(probe_archs)}-" in cells[two]["wheel"]
    assert ".gfx942-" in cells[one]["wheel"]
    staged = {f["filename"] for f in json.loads(
        (tmp_path / "index/staging/simple/hipattn/index.json").read_text())["files"]}
    assert staged == {cells[one]["wheel"], cells[two]["wheel"]}
    assert not (tmp_path / "index/stable/simple/hipattn").exists()
    again = rocmbuild("nightly", "--config", str(config), "--json", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert {(c["status"], c["validation"]) for c in json.loads(again.stdout)["cells"]} == {
        ("success", "pending")}
