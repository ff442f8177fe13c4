"""The cmake probe wheel (tests/fixtures/cmake-hip) is reproducible, for real: the session's cold
build (conftest.vecadd_build, real HIP compiler) and `rocmbuild verify`'s cold rebuild in a
temporary workspace of its own (another build directory, a fresh cache sharing only downloads)
give the same sha256; verify of a wheel whose header was changed after the build names that
member and exits 13, with diffoscope's report when diffoscope is installed. With clang's default
CUIDs the .so differed (a hash of the source file's absolute path); the build's CUID launcher
(launchers/cuid.py) names each unit after its path inside the tree instead. Further repeats of
the cold build (more workspaces, timings) are benchmarks/bench_reproducible.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild


def test_a_cold_rebuild_in_another_workspace_is_identical(tmp_path: Path,
                                                          vecadd_build: dict) -> None:
    a: Path = vecadd_build["wheel"]
    sha = hashlib.sha256(a.read_bytes()).hexdigest()
    record = json.loads(a.with_name(a.name + ".build.json").read_text())
    assert record["sha256"] == sha
    # a copy changed after the build: verify rebuilds (cold, in its own workspace) and names the
    # member; its rebuild has the sha256 of the session's build, so the two workspaces agree
    tampered = tmp_path / "tampered" / a.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(a) as zin, zipfile.ZipFile(tampered, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data + b"// changed\n" if info.filename.endswith(".h") else data)
    res = rocmbuild("verify", str(tampered), "--recipe", str(vecadd_build["recipe"]), "--json",
                    env=vecadd_build["env"])
    assert res.returncode == 13, res.stderr
    assert "temporary workspace" in res.stderr
    data = json.loads(res.stdout)
    assert data["status"] == "differs"
    assert data["rebuilt"] == a.name and data["rebuilt_sha256"] == sha
    assert data["differences"][0]["name"] == "vecadd/include/vecadd.h"
    assert data["differences"][0]["what"] == "content"
    if shutil.which("diffoscope"):  # scripts/setup.sh installs diffoscope-minimal
        assert "// changed" in data["diffoscope"] and "vecadd.h" in data["diffoscope"]
    else:
        assert data["diffoscope"] is None
    assert [x for x in res.stderr.splitlines() if x.startswith("not reproduced:")] == [
        f"not reproduced: {a.name}: the rebuild differs (sha256 "
        f"{data['rebuilt_sha256'][:12]}, the wheel {data['sha256'][:12]}); first: "
        "vecadd/include/vecadd.h (content)"]
