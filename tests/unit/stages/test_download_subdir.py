"""A [[downloads]] entry's ``subdir`` (sources.download.fetch_downloads): the variable receives
that directory of the extracted archive (vLLM's TRITON_KERNELS_SRC_DIR wants the
triton_kernels package inside a ROCm/triton archive, not the archive's top); an archive without
it fails naming the download. Real tar.gz archives read through file:// URLs into a real cache."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from rocmbuild.core.errors import FetchError
from rocmbuild.recipe.tables import Download
from rocmbuild.sources.download import fetch_downloads


def _tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _download(archive: Path, subdir: str) -> Download:
    return Download(name="triton-kernels", url=archive.as_uri(),
                    sha256=hashlib.sha256(archive.read_bytes()).hexdigest(), extract=True,
                    env="TRITON_KERNELS_SRC_DIR", subdir=subdir)


def test_the_variable_gets_the_subdirectory(tmp_path: Path) -> None:
    archive = _tgz(tmp_path / "triton.tar.gz", {
        "triton-669b31ac/python/triton_kernels/triton_kernels/__init__.py": b"x = 1\n",
        "triton-669b31ac/README.md": b"readme\n"})
    sub = "python/triton_kernels/triton_kernels"
    ((var, where),) = fetch_downloads([_download(archive, sub)], tmp_path / "cache")
    assert var == "TRITON_KERNELS_SRC_DIR" and where.name == "triton_kernels"
    assert (where / "__init__.py").read_bytes() == b"x = 1\n"
    ((_, top),) = fetch_downloads([_download(archive, "")], tmp_path / "cache")
    assert top / sub == where and (top / "README.md").is_file()


def test_an_archive_without_it_fails_naming_the_download(tmp_path: Path) -> None:
    archive = _tgz(tmp_path / "other.tar.gz", {"triton-x/README.md": b"readme\n"})
    with pytest.raises(FetchError, match="downloads triton-kernels: the archive has no "
                                         "directory 'python/triton_kernels/triton_kernels'"):
        fetch_downloads([_download(archive, "python/triton_kernels/triton_kernels")],
                        tmp_path / "cache")
