"""A ROCm root laid out as Debian packages ROCm (scripts/install-rocm-sdk.sh's tree: multiarch lib
dirs, header-only libraries' CMake configs under share/cmake, no .info/version, the version in
rocm-core's rocm_version.h) told by its share/rocmbuild/rocm-sdk.json, next to AMD's /opt/rocm
layout (make_rocm_root), which must keep reading as before. Both are small fixture trees here;
tests/integration/test_rocm72_sdk.py reads the real tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core import components as table
from rocmbuild.core.errors import ToolchainError
from rocmbuild.host import components, toolchain
from rocmbuild.host import detect as hostmod
from tests.conftest import make_rocm_root

MULTIARCH = "lib/x86_64-linux-gnu"
BITCODE = "lib/llvm-22/lib/clang/22/amdgcn/bitcode"


@pytest.fixture(autouse=True)
def _no_rocm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(var, raising=False)


def debian_sdk(prefix: Path, facts: dict[str, object] | None = None) -> Path:
    """<prefix>/usr as install-rocm-sdk.sh leaves it (files empty where only presence counts)."""
    root = prefix / "usr"
    (root / "include/rocm-core").mkdir(parents=True)
    (root / "include/rocm-core/rocm_version.h").write_text(
        "#define ROCM_VERSION_MAJOR 7\n#define ROCM_VERSION_MINOR 2\n"
        "#define ROCM_VERSION_PATCH 4\n")
    (root / "include/hip").mkdir()
    (root / "include/hip/hip_version.h").write_text(
        "#define HIP_VERSION_MAJOR 7\n#define HIP_VERSION_MINOR 2\n"
        "#define HIP_VERSION_PATCH 53211\n")
    (root / "include/hip/hip_runtime.h").write_text("")
    for name in ("hip", "hipblas", "hiprand", "rocrand", "hipblaslt", "rocblas"):
        d = root / MULTIARCH / "cmake" / name
        d.mkdir(parents=True)
        (d / f"{name}-config.cmake").write_text("")
    for name in ("rocprim", "hipcub"):
        d = root / "share/cmake" / name
        d.mkdir(parents=True)
        (d / f"{name}-config.cmake").write_text("")
    (root / BITCODE).mkdir(parents=True)
    (root / BITCODE / "ocml.bc").write_bytes(b"")
    f = root / toolchain.SDK_FACTS
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(facts if facts is not None else {
        "format": 1, "version": "7.2.4", "layout": "debian",
        "device_lib_path": str(root / BITCODE)}))
    return root


def test_a_debian_tree_is_an_sdk_with_its_version_components_and_device_libs(
        tmp_path: Path) -> None:
    root = debian_sdk(tmp_path / "rocm-7.2")
    found = toolchain.find_rocm_root(str(root))
    assert found is not None
    assert (found.kind, found.layout, found.version, found.hip_version) == (
        "rocm", "debian", "7.2.4", "7.2.53211")
    assert found.version_from == "include/rocm-core/rocm_version.h"
    assert found.device_lib_path == str((root / BITCODE).resolve())
    assert found.components is not None
    assert {"hip", "hipblas", "hiprand", "rocrand", "hipblaslt", "rocblas", "rocprim",
            "hipcub"} <= set(found.components)
    assert components.evidence(root, table.COMPONENTS["rocprim"]) == \
        "share/cmake/rocprim/rocprim-config.cmake"
    assert components.evidence(root, table.COMPONENTS["hipblas"]) == \
        f"{MULTIARCH}/cmake/hipblas/hipblas-config.cmake"


def test_amds_layout_reads_as_before(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1")
    found = toolchain.find_rocm_root(str(root))
    assert found is not None
    assert (found.layout, found.device_lib_path, found.version) == ("", "", "6.4.1")


def test_a_saved_host_keeps_the_layout(tmp_path: Path) -> None:
    root = debian_sdk(tmp_path / "rocm-7.2")
    detected = hostmod.detect(rocm_path=str(root), fs_root=tmp_path / "fs", want_compiler=False,
                              site_paths=[])
    data = detected.to_json()
    assert data["rocm_root"]["layout"] == "debian"
    f = tmp_path / "host.json"
    f.write_text(json.dumps(data))
    assert hostmod.load(f) == replace(detected, origin=str(f))
    plain = hostmod.detect(rocm_path=str(make_rocm_root(tmp_path / "amd")),
                           fs_root=tmp_path / "fs", want_compiler=False, site_paths=[])
    assert "layout" not in plain.to_json()["rocm_root"]  # AMD's: as host files had it


def _link(root: Path) -> None:
    f = root / toolchain.SDK_FACTS
    other = root.parent / "elsewhere.json"
    other.write_text(f.read_text())
    f.unlink()
    f.symlink_to(other)


def _write(text: str) -> Callable[[Path], None]:
    return lambda root: (root / toolchain.SDK_FACTS).write_text(text)


@pytest.mark.parametrize(("spoil", "needle"), [
    (_link, "symbolic link"),
    (_write("{not json"), "rocm-sdk.json"),
    (_write('{"layout": "debian", "device_lib_path": "' + "/" * 70000 + '"}'), "larger than"),
    (_write('{"layout": "opt", "device_lib_path": "x"}'), "layout: 'opt' is not \"debian\""),
    (_write('{"layout": "debian", "device_lib_path": 7}'), "device_lib_path: expected a string"),
    (_write('{"layout": "debian", "device_lib_path": "/usr/lib"}'),
     "device_lib_path: '/usr/lib' is not a directory inside"),
    (_write("[1, 2]"), "expected an object"),
])
def test_bad_facts_files_are_one_line_errors(tmp_path: Path, spoil: Callable[[Path], None],
                                             needle: str) -> None:
    root = debian_sdk(tmp_path / "rocm-7.2")
    spoil(root)
    with pytest.raises(ToolchainError) as exc:
        toolchain.find_rocm_root(str(root))
    msg = exc.value.message
    assert "\n" not in msg and needle in msg and "rocm-sdk.json" in msg, msg
    assert exc.value.hint and "install-rocm-sdk.sh" in exc.value.hint


def test_bundling_searches_the_runtime_dir_not_the_stubs(tmp_path: Path) -> None:
    from rocmbuild.buildtools import bundle

    runtime = tmp_path / "rocm-7.2/runtime/usr/lib/x86_64-linux-gnu"
    runtime.mkdir(parents=True)
    root = debian_sdk(tmp_path / "rocm-7.2")
    facts = json.loads((root / toolchain.SDK_FACTS).read_text())
    (root / toolchain.SDK_FACTS).write_text(json.dumps({**facts, "runtime_lib": str(runtime)}))
    assert toolchain.sdk_runtime_lib(root) == runtime.resolve()
    dirs = bundle.search_dirs(root)
    assert dirs[0] == runtime.resolve() and root / "lib" not in dirs
    amd = make_rocm_root(tmp_path / "amd")
    assert bundle.search_dirs(amd)[0] == amd / "lib"  # AMD's layout: as before
    (root / toolchain.SDK_FACTS).write_text(json.dumps({**facts, "runtime_lib": "/usr/lib"}))
    with pytest.raises(ToolchainError) as exc:
        toolchain.sdk_runtime_lib(root)
    assert "runtime_lib: '/usr/lib' is not a directory inside" in exc.value.message
