"""The cmake probe wheel (tests/fixtures/cmake-hip) is reproducible, for real: two cold builds
with the real HIP compiler in two workspaces (so two build directories) give the same sha256,
and `rocmbuild verify` of a wheel whose header was changed after the build names that member
and exits 13, with diffoscope's report when diffoscope is installed. With clang's default CUIDs the
.so differed (a hash of the source file's absolute path); the build's CUID launcher
(launchers/cuid.py) names each unit after its path inside the tree instead."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

from tests.conftest import REPO, rocmbuild
from tests.integration.hip.test_cmake_backend import RECIPE


def _build(recipe: Path, workdir: Path) -> Path:
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942",
                    env={"ROCMBUILD_WORKDIR": str(workdir)})
    assert res.returncode == 0, res.stderr
    (wheel,) = (workdir / "wheels").glob("*.whl")
    return wheel


def test_two_cold_builds_in_two_workspaces_are_identical(tmp_path: Path) -> None:
    recipe = tmp_path / "vecadd.toml"
    recipe.write_text(RECIPE.format(src=REPO / "tests/fixtures/cmake-hip"))
    a, b = _build(recipe, tmp_path / "one"), _build(recipe, tmp_path / "second-workspace")
    assert a.name == b.name
    assert hashlib.sha256(a.read_bytes()).hexdigest() == hashlib.sha256(b.read_bytes()).hexdigest()
    record = json.loads(a.with_name(a.name + ".build.json").read_text())
    assert record["sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
    # a copy changed after the build: verify rebuilds (a third cold build) and names the member
    tampered = tmp_path / "tampered" / a.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(a) as zin, zipfile.ZipFile(tampered, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data + b"// changed\n" if info.filename.endswith(".h") else data)
    res = rocmbuild("verify", str(tampered), "--recipe", str(recipe), "--json",
                    env={"ROCMBUILD_WORKDIR": str(tmp_path / "one")})
    assert res.returncode == 13, res.stderr
    data = json.loads(res.stdout)
    assert data["status"] == "differs"
    assert data["differences"][0]["name"] == "vecadd/include/vecadd.h"
    assert data["differences"][0]["what"] == "content"
    assert data["rebuilt_sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
    if shutil.which("diffoscope"):  # scripts/setup.sh installs diffoscope-minimal
        assert "// changed" in data["diffoscope"] and "vecadd.h" in data["diffoscope"]
    else:
        assert data["diffoscope"] is None
    assert [x for x in res.stderr.splitlines() if x.startswith("not reproduced:")] == [
        f"not reproduced: {a.name}: the rebuild differs (sha256 "
        f"{data['rebuilt_sha256'][:12]}, the wheel {data['sha256'][:12]}); first: "
        "vecadd/include/vecadd.h (content)"]
