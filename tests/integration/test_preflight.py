"""The resource preflight on a real small disk: a build records the disk its tree took (in the
build record and the cache's learned/disk/), and the next build of that recipe, with its
workdir on a 1 MiB tmpfs, is refused before anything is fetched because the measured tree does
not fit, though the recipe's own estimate (build.disk_gb) would. Real: the tmpfs (mount, as
root; skipped where mounting is not allowed), pip, setuptools, statvfs."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from tests.conftest import rocmbuild
from tests.integration.conftest import tmpfs

RECIPE = """schema_version = 1
[package]
name = "roomy"
[source]
path = "src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 0.1
disk_gb = 0.0001
python_requires = ["setuptools", "wheel"]
"""


def test_measured_tree_decides_the_next_builds_disk_need(tmp_path: Path) -> None:
    src = tmp_path / "src" / "roomy"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "data.bin").write_bytes(b"\x01" * (2 << 20))  # 2 MiB in the tree (and the wheel)
    (tmp_path / "src/setup.py").write_text(
        'from setuptools import setup\nsetup(name="roomy", version="1.0", packages=["roomy"],'
        ' package_data={"roomy": ["data.bin"]})\n')
    recipe = tmp_path / "roomy.toml"
    recipe.write_text(RECIPE)
    cache = tmp_path / "cache"
    first = rocmbuild("--workdir", str(tmp_path / "build"), "--cache-dir", str(cache), "build",
                      str(recipe), "--arch", "gfx942")
    assert first.returncode == 0, first.stderr
    learned = json.loads((cache / "learned/disk/roomy.default.json").read_text())
    assert learned["tree_bytes"] > 2 << 20
    record = next((tmp_path / "build/wheels").glob("*.build.json"))
    assert json.loads(record.read_text())["disk"]["tree_bytes"] == learned["tree_bytes"]

    with tmpfs(tmp_path / "small", "1m") as small:
        start = time.monotonic()
        res = rocmbuild("--workdir", str(small), "--cache-dir", str(cache), "build",
                        str(recipe), "--arch", "gfx942", "--force")
        took = time.monotonic() - start
        assert res.returncode == 10, res.stderr
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("toolchain error: ")]
        assert len(errors) == 1, res.stderr
        assert re.search(rf"free at {small}, the build needs ~[\d.]+ MiB \(the last build's "
                         r"tree took [\d.]+ MiB, \+20%\)", errors[0]), errors[0]
        assert "hint: free space there, or point --workdir" in res.stderr
        assert "[1/" not in res.stderr  # nothing fetched
        assert took < 30
        warned = rocmbuild("--workdir", str(small), "--cache-dir", str(cache), "build",
                           str(recipe), "--arch", "gfx942", "--force",
                           env={"ROCMBUILD_PREFLIGHT": "warn"})
        assert "(ROCMBUILD_PREFLIGHT=warn: building anyway)" in warned.stderr
        assert "[1/" in warned.stderr
