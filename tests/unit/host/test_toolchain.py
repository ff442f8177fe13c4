"""toolchain.find_dists: the host's distributions read from their dist-info files (a cache hit
must not import importlib.metadata), with the answers importlib.metadata gives.

Real metadata: this interpreter's installed distributions, and small site directories made in
tmp_path (what pip writes: ``<name>-<version>.dist-info/METADATA``)."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from rocmbuild.core.errors import ToolchainError
from rocmbuild.host import toolchain


def test_same_versions_as_importlib_metadata() -> None:
    names = sorted({d.metadata["Name"] for d in importlib.metadata.distributions()})
    assert len(names) > 5
    found = toolchain.find_dists([*names, "no-such-dist-here"])
    assert {n: v for n, (_, v) in found.items()} == \
        {n: importlib.metadata.version(n) for n in names}


def _dist(site: Path, dirname: str, version: str, info: str = "METADATA") -> None:
    d = site / dirname
    d.mkdir(parents=True)
    (d / info).write_text(f"Metadata-Version: 2.1\nName: x\nVersion: {version}\n\nVersion: 9\n")


def test_fixture_site_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _dist(first, "Flash_Attn-2.8.3.dist-info", "2.8.3")
    _dist(second, "flash_attn-1.0.dist-info", "1.0")  # later on the path: not the one used
    _dist(second, "old_pkg-0.1.egg-info", "0.1", info="PKG-INFO")
    (second / "broken-1.0.dist-info").mkdir()  # no METADATA: installed, version unknown
    (tmp_path / "file").write_text("not a directory")
    paths = [str(tmp_path / "file"), str(tmp_path / "gone"), str(first), str(second)]
    got = toolchain.find_dists(["flash-attn", "FLASH.ATTN", "old-pkg", "broken", "nope"], paths)
    assert {n: v for n, (_, v) in got.items()} == {
        "flash-attn": "2.8.3", "FLASH.ATTN": "2.8.3", "old-pkg": "0.1", "broken": None}
    assert got["flash-attn"][0] == first / "Flash_Attn-2.8.3.dist-info"


def test_torch_info_reads_version_py(tmp_path: Path) -> None:
    """A ROCm torch cannot be installed here: its dist-info and torch/version.py are a fixture."""
    _dist(tmp_path, "torch-2.5.1+rocm6.2.dist-info", "2.5.1+rocm6.2")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "hip: Optional[str] = '6.2.41133'\ncuda = None\n")
    info = toolchain.torch_info([str(tmp_path)])
    assert (info.version, info.hip, info.cuda) == ("2.5.1+rocm6.2", "6.2.41133", None)
    assert info.location == str(tmp_path / "torch")
    assert toolchain.torch_info([str(tmp_path / "empty")]).version == ""


def _torch_site(site: Path, marker: str | None) -> Path:
    """A site dir with a torch dist-info and package; ``marker``: the build-only marker's text."""
    _dist(site, "torch-2.13.0+cpu.dist-info", "2.13.0+cpu")
    pkg = site / "torch"
    pkg.mkdir()
    (pkg / "version.py").write_text("hip: Optional[str] = '7.2.53211'  # rocmbuild\n"
                                    "rocm: Optional[str] = '7.2.4'\n")
    if marker is not None:
        (pkg / toolchain.BUILD_ONLY_MARKER).write_text(marker)
    return pkg


def test_a_build_only_torch_names_its_sdk(tmp_path: Path) -> None:
    _torch_site(tmp_path, '{"format": 1, "sdk": "/sdk/usr", "build_only": true}')
    info = toolchain.torch_info([str(tmp_path)])
    assert (info.kind, info.hip, info.rocm, info.build_only_sdk) == \
        ("rocm", "7.2.53211", "7.2.4", "/sdk/usr")


def test_a_real_torch_is_not_build_only(tmp_path: Path) -> None:
    _torch_site(tmp_path, None)
    assert toolchain.torch_info([str(tmp_path)]).build_only_sdk == ""


@pytest.mark.parametrize("text", ["not json", '{"sdk": 3}', '{"sdk": ""}', "[1]",
                                  '{"sdk": "' + "x" * 5000 + '"}'])
def test_a_bad_marker_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    pkg = _torch_site(tmp_path, text)
    with pytest.raises(ToolchainError) as exc:
        toolchain.torch_info([str(tmp_path)])
    assert str(pkg / toolchain.BUILD_ONLY_MARKER) in exc.value.message
    assert "\n" not in exc.value.message and exc.value.hint


def test_a_marker_that_is_a_link_or_a_fifo_is_refused(tmp_path: Path) -> None:
    pkg = _torch_site(tmp_path, None)
    (tmp_path / "elsewhere.json").write_text('{"sdk": "/sdk/usr"}')
    (pkg / toolchain.BUILD_ONLY_MARKER).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ToolchainError, match="not a regular file|link"):
        toolchain.torch_info([str(tmp_path)])
    (pkg / toolchain.BUILD_ONLY_MARKER).unlink()
    os.mkfifo(pkg / toolchain.BUILD_ONLY_MARKER)
    with pytest.raises(ToolchainError, match="not a regular file"):
        toolchain.torch_info([str(tmp_path)])
