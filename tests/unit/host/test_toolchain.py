"""toolchain.find_dists: the host's distributions read from their dist-info files (a cache hit
must not import importlib.metadata), with the answers importlib.metadata gives.

Real metadata: this interpreter's installed distributions, and small site directories made in
tmp_path (what pip writes: ``<name>-<version>.dist-info/METADATA``)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

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
