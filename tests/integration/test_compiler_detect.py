"""HIP compiler detection order and the values handed to builds.

Faked: a ROCm install (fixture root with opt/rocm/llvm/bin/amdclang++ and bin/hipcc as tiny shell
scripts that print a clang version) and toolchain.json files, because no AMD ROCm exists here.
The real compilers are exercised by tests/integration/hip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmbuild.core.errors import ToolchainError
from rocmbuild.host import compiler


def fake_exe(path: Path, version: str = "19.0.0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'AMD clang version {version} (roc-6.2.0)'\n")
    path.chmod(0o755)
    return path


def fake_rocm(root: Path, *, amdclang: bool = True, hipcc: bool = True) -> Path:
    rocm = root / "opt/rocm"
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info/version").write_text("6.2.0\n")
    if amdclang:
        fake_exe(rocm / "llvm/bin/amdclang++")
    fake_exe(rocm / "llvm/bin/clang++")
    if hipcc:
        fake_exe(rocm / "bin/hipcc")
    return rocm


def toolchain(d: Path, names: list[str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    comps = [{"name": n, "path": str(fake_exe(d / f"bin/clang++-{n[-2:]}", n[-2:] + ".1.0")),
              "kind": "clang", "rocm_path": "/usr", "device_lib_path": f"/dl/{n}",
              "flags": ["--rocm-path=/usr", f"--rocm-device-lib-path=/dl/{n}"]} for n in names]
    (d / "toolchain.json").write_text(json.dumps({"format": 1, "compilers": comps}))
    return d


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    for v in ("ROCMBUILD_HIP_COMPILER", "ROCMBUILD_HIP_FLAGS", "ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("ROCMBUILD_TOOLCHAIN_DIR", str(tmp_path / "no-toolchain"))
    compiler._version_cache.clear()


def test_real_rocm_amdclang_first(tmp_path, monkeypatch):
    rocm = fake_rocm(tmp_path / "root")
    toolchain(tmp_path / "tc", ["clang-19"])
    monkeypatch.setenv("ROCMBUILD_TOOLCHAIN_DIR", str(tmp_path / "tc"))
    c = compiler.detect(root=tmp_path / "root")
    assert c.path == str(rocm / "llvm/bin/amdclang++") and c.kind == "amdclang"
    assert c.version == "19.0.0" and c.rocm_path == str(rocm)
    assert c.flags == (f"--rocm-path={rocm}",)
    assert c.cmake_defines["CMAKE_HIP_PLATFORM"] == "amd"


def test_rocm_path_env_wins_over_opt_rocm(tmp_path, monkeypatch):
    root = tmp_path / "root"
    fake_rocm(root)
    other = fake_rocm(tmp_path / "other")
    (other.parent.parent / "opt/rocm").rename(root / "opt/rocm-6.2.0")
    monkeypatch.setenv("ROCM_PATH", "/opt/rocm-6.2.0")
    c = compiler.detect(root=root)
    assert c.path == str(root / "opt/rocm-6.2.0/llvm/bin/amdclang++")
    assert c.source.startswith("ROCM_PATH")


def test_hipcc_only_when_no_rocm_clang(tmp_path):
    rocm = fake_rocm(tmp_path / "root", amdclang=False)
    (rocm / "llvm/bin/clang++").rename(rocm / "llvm/bin/not-clang")
    c = compiler.detect(root=tmp_path / "root")
    assert c.kind == "hipcc" and c.flags == ()
    fake_exe(rocm / "llvm/bin/clang++")
    assert compiler.detect(root=tmp_path / "root").kind == "clang"  # ROCm's clang++ beats hipcc


def test_explicit_hipcc_builds_through_rocm_clang(tmp_path):
    rocm = fake_rocm(tmp_path / "root")
    c = compiler.detect(str(rocm / "bin/hipcc"))
    assert c.kind == "hipcc" and c.rocm_path == str(rocm)
    # CMake's HIP language needs clang itself, not the hipcc wrapper
    assert c.build_env(["gfx942"])["HIP_CXX"] == str(rocm / "llvm/bin/clang++")


def test_debian_usr_is_not_a_rocm_candidate(tmp_path, monkeypatch):
    root = tmp_path / "root"
    fake_exe(root / "usr/bin/hipcc")
    monkeypatch.setenv("ROCM_PATH", "/usr")
    with pytest.raises(ToolchainError) as ei:
        compiler.detect(root=root)
    assert "install-hip-toolchain.sh" in ei.value.hint


def test_toolchain_json_prefers_clang22(tmp_path, monkeypatch):
    tc = toolchain(tmp_path / "tc", ["clang-19", "clang-22"])
    monkeypatch.setenv("ROCMBUILD_TOOLCHAIN_DIR", str(tc))
    c = compiler.detect(root=tmp_path / "empty")
    assert c.path.endswith("clang++-22") and c.version == "22.1.0"
    assert c.device_lib_path == "/dl/clang-22"
    env = c.build_env(["gfx90a", "gfx942"], jobs=3)
    assert env == {"HIP_CXX": c.path, "HIP_ARCHS": "gfx90a;gfx942",
                   "HIP_FLAGS": "--rocm-path=/usr --rocm-device-lib-path=/dl/clang-22",
                   "HIP_PLATFORM": "amd", "CMAKE_BUILD_PARALLEL_LEVEL": "3"}
    monkeypatch.setenv("ROCMBUILD_HIP_FLAGS", "--rocm-path=/x -DFOO=1")
    assert compiler.detect(root=tmp_path / "empty").flags == ("--rocm-path=/x", "-DFOO=1")


def test_explicit_compiler(tmp_path, monkeypatch):
    tc = toolchain(tmp_path / "tc", ["clang-19", "clang-22"])
    monkeypatch.setenv("ROCMBUILD_TOOLCHAIN_DIR", str(tc))
    c19 = str(tc / "bin/clang++-19")
    c = compiler.detect(c19, root=tmp_path / "empty")
    assert c.path == c19 and "--rocm-device-lib-path=/dl/clang-19" in c.flags
    assert c.source == "--hip-compiler (toolchain.json)"
    monkeypatch.setenv("ROCMBUILD_HIP_COMPILER", str(tmp_path / "nope/clang++"))
    with pytest.raises(ToolchainError, match="ROCMBUILD_HIP_COMPILER: HIP compiler .* not found"):
        compiler.detect(root=tmp_path / "empty")


def test_hip_env_forces_amd_platform():
    assert compiler.hip_env({"HIP_PLATFORM": "nvidia", "X": "1"}) == {"HIP_PLATFORM": "amd",
                                                                       "X": "1"}
