"""The compile cache in a torch cpp_extension build (docs/compile-cache.md): setup.py with
CppExtension/BuildExtension through `pip wheel --no-build-isolation`, torch's ninja file
compiling with CXX = rocmbuild's ccache wrapper. Real torch (the CPU wheel in the venv), real
g++ and ccache; the units use only Python's C API (torch's headers would cost ~15 s a unit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import rocmbuild
from tests.fixtures.compile_units import EXT_RECIPE, torch_extension


def test_cpp_extension_second_build_hits(tmp_path: Path) -> None:
    src = torch_extension(tmp_path / "src", 3)
    recipe = tmp_path / "ccext.toml"
    recipe.write_text(EXT_RECIPE.format(src=src))
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_COMPILE_CACHE": "ccache"}
    args = ("build", str(recipe), "--arch", "gfx942", "--jobs", "2")
    cold = rocmbuild(*args, env=env)
    assert cold.returncode == 0, cold.stderr
    assert "compile cache: 0/4 hits (0 %) (ccache)" in cold.stderr, cold.stderr
    log = next((tmp_path / "w/logs").rglob("build.log")).read_text()
    # torch's ninja file compiles with our CXX wrapper, and not with a second ccache of its own
    units = [ln for ln in log.splitlines() if re.match(r"\s*\[\d/4( \d+)?\] ", ln)]
    assert len(units) == 4 and all("_rocmbuild_launch/host/" in ln for ln in units), units
    assert not [ln for ln in units if re.match(r"\s*\[\d/4\] \S*ccache ", ln)], units
    warm = rocmbuild(*args, "--force", "--json", env=env)
    assert warm.returncode == 0, warm.stderr
    assert "compile cache: 4/4 hits (100 %) (ccache)" in warm.stderr, warm.stderr
    assert json.loads(warm.stdout)["compile_cache"]["hit_rate"] == 1.0
