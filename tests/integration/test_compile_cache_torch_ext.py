"""The compile cache and per-unit memory in a torch cpp_extension build (docs/compile-cache.md,
docs/long-builds.md): setup.py with CppExtension/BuildExtension through `pip wheel
--no-build-isolation`, torch's ninja file compiling with CXX = rocmbuild's wrapper script
(memlog.py, then ccache, then g++), setuptools linking through the same script. Real torch (the
CPU wheel in the venv), real g++ and ccache; the units use only Python's C API (torch's headers
would cost ~15 s a unit). Without a compile cache the same wrappers run memlog.py alone: that
case runs setuptools' own compile and C++ link directly (no pip, no torch: a few seconds)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from rocmbuild.buildtools import compilecache
from rocmbuild.cache import learned
from rocmbuild.core.run import run
from rocmbuild.stages.build import memlog_argv
from tests.conftest import rocmbuild
from tests.fixtures.compile_units import EXT_RECIPE, torch_extension

MiB = 1 << 20


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_cpp_extension_second_build_hits_and_units_are_measured(tmp_path: Path) -> None:
    src = torch_extension(tmp_path / "src", 3)
    recipe = tmp_path / "ccext.toml"
    recipe.write_text(EXT_RECIPE.format(src=src))
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_COMPILE_CACHE": "ccache"}
    args = ("build", str(recipe), "--arch", "gfx942", "--jobs", "2")
    cold = rocmbuild(*args, env=env)
    assert cold.returncode == 0, cold.stderr
    assert "compile cache: 0/4 hits (0 %) (ccache)" in cold.stderr, cold.stderr
    (logs,) = (p for p in (tmp_path / "w/logs/ccext").iterdir() if p.name[0] != ".")
    log = (logs / "build.log").read_text()
    # torch's ninja file compiles with our CXX wrapper, and not with a second ccache of its own
    units = [ln for ln in log.splitlines() if re.match(r"\s*\[\d/4( \d+)?\] ", ln)]
    assert len(units) == 4 and all("_rocmbuild_launch/host/" in ln for ln in units), units
    assert not [ln for ln in units if re.match(r"\s*\[\d/4\] \S*ccache ", ln)], units
    # memlog.py saw each unit once, with the compiler's real peak (g++'s cc1plus on <map>:
    # tens of MiB), and the link setuptools ran through the same CXX script, as no unit
    recs = _lines(logs / "units.jsonl")
    compiled = sorted(Path(str(r["out"])).name for r in recs if r["unit"])
    assert compiled == ["module.o", "u0.o", "u1.o", "u2.o"], recs
    assert all(r["rc"] == 0 and int(str(r["rss"])) > 20 * MiB for r in recs if r["unit"]), recs
    (link,) = (r for r in recs if not r["unit"])
    assert str(link["out"]).endswith(".so"), link
    (file,) = (tmp_path / "w/cache/learned/ccext").glob("*.json")
    cold_units = json.loads(file.read_text())["units"]
    assert sorted(cold_units) == [f"build/temp.linux-x86_64-cpython-311/csrc/{n}.o"
                                  for n in ("module", "u0", "u1", "u2")], cold_units
    warm = rocmbuild(*args, "--force", "--json", env=env)
    assert warm.returncode == 0, warm.stderr
    assert "compile cache: 4/4 hits (100 %) (ccache)" in warm.stderr, warm.stderr
    assert json.loads(warm.stdout)["compile_cache"]["hit_rate"] == 1.0
    # the hits took little memory: the cold build's peaks stay what was learned
    assert len(_lines(logs / "units.jsonl")) == 5
    assert json.loads(file.read_text())["units"] == cold_units
    plan = rocmbuild("plan", str(recipe), "--arch", "gfx942", env=env)
    assert plan.returncode == 0, plan.stderr
    p95 = learned.percentile(list(cold_units.values()), 0.95) / learned.GiB
    reason = next(ln for ln in plan.stdout.splitlines() if ln.startswith("MAX_JOBS"))
    assert f"/ {p95 * 1.15:.3g} GiB per job ({p95:.3g} GiB p95 measured over 4 units + 15 %)" \
        in reason, reason


SETUP = """from setuptools import Extension, setup
setup(name="plain", version="0", ext_modules=[
    Extension("plain", ["a.cpp", "b.cpp"], language="c++")])
"""


def test_without_a_cache_setuptools_compiles_and_links_through_memlog(tmp_path: Path) -> None:
    """--compile-cache none: CC/CXX are the same one-word scripts with memlog.py alone.
    setuptools derives its C++ link command from CXX (and LDSHARED from CC); through the
    scripts the link runs and is recorded as no unit."""
    (tmp_path / "a.cpp").write_text(
        '#include <Python.h>\nextern int b();\nstatic PyModuleDef m = {PyModuleDef_HEAD_INIT, '
        '"plain", "", -1, nullptr};\nPyMODINIT_FUNC PyInit_plain() { b(); '
        "return PyModule_Create(&m); }\n")
    (tmp_path / "b.cpp").write_text("#include <string>\nint b() { return std::string(\"b\")"
                                    ".size(); }\n")
    (tmp_path / "setup.py").write_text(SETUP)
    units = tmp_path / "units.jsonl"
    env = {**os.environ, **compilecache.wrappers(os.environ, tmp_path / "launch", None,
                                                 memlog_argv(units))}
    assert Path(env["CXX"]).parent == tmp_path / "launch/host"
    res = run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path, env=env,
              capture=True)
    assert "launch/host/" in res.output  # the commands setuptools ran are our scripts
    recs = _lines(units)
    assert sorted((r["unit"], Path(str(r["out"])).suffix) for r in recs) == [
        (False, ".so"), (True, ".o"), (True, ".o")], recs
    assert all(r["rc"] == 0 and int(str(r["rss"])) > 5 * MiB for r in recs), recs
    assert len(learned.read_units(units, tmp_path)) == 2
    (so,) = tmp_path.glob("plain*.so")
    check = run([sys.executable, "-c", "import plain"], cwd=tmp_path, capture=True)
    assert check.returncode == 0 and so.stat().st_size > 0
