"""OS errors inside the stages on real disks: a small tmpfs mounted by the test (root only;
skipped with mount's reason elsewhere) that fills up, or is remounted read-only, under the
workdir's logs, the cache's downloads and the index directory. Each run goes through the real
CLI and must end with the stage's own error class (exit code), one error line naming the path,
a hint, no traceback, the internal-error guard not reached, and no partial file left behind.
Files in the way of those directories are the corpus's (tests/corpus/case_oserrors.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.cli import INTERNAL_ERROR_LINE
from tests.conftest import rocmbuild
from tests.integration.conftest import tmpfs
from tests.integration.test_corpus import small_wheel

RECIPE = """schema_version = 1
[package]
name = "demo"
[source]
path = "{src}"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
"""


def _error_line(res: subprocess.CompletedProcess[str], kind: str, code: int) -> str:
    out = res.stdout + res.stderr
    assert "Traceback" not in out and INTERNAL_ERROR_LINE not in out, out
    assert res.returncode == code, out
    lines = res.stderr.splitlines()
    errors = [i for i, x in enumerate(lines) if x.startswith(f"{kind}: ")]
    assert len(errors) == 1, out
    assert any(x.startswith("hint: ") for x in lines[errors[0] + 1:]), out
    return lines[errors[0]]


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _remount_ro(mnt: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)


def _project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "demo").mkdir(parents=True)
    (src / "setup.py").write_text('from setuptools import setup\n'
                                  'setup(name="demo", version="1.0", packages=["demo"])\n')
    (src / "demo" / "__init__.py").write_text("VALUE = 1\n")
    recipe = tmp_path / "r.toml"
    recipe.write_text(RECIPE.format(src=src))
    return recipe


def _wheel(dest: Path, name: str, blob: int = 0) -> Path:
    """A pure-Python wheel ``name`` 1.0 with ``blob`` random (incompressible) bytes in it."""
    import base64

    path = dest / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": b"VALUE = 1\n", f"{name}/blob.bin": os.urandom(blob),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{n},sha256={digest.decode()},{len(data)}")
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def test_full_logs_disk_in_build(tmp_path: Path) -> None:
    """<workdir>/logs is a 4 KiB tmpfs: a stage that writes there runs out of space; the error
    is a build error (exit 6) saying so, and no wheel is delivered or cached."""
    recipe = _project(tmp_path)
    ws = tmp_path / "build"
    with tmpfs(ws / "logs", "4k") as logs:
        t0 = time.monotonic()
        res = rocmbuild("--workdir", str(ws), "build", str(recipe), "--arch", "gfx942")
        took = time.monotonic() - t0
        line = _error_line(res, "build error", 6)
        assert "No space left on device" in line and str(ws) in line, line
        assert not [p for p in _files(logs) if p.name.endswith(".whl")], _files(logs)
    assert not _files(ws / "wheels") and not _files(ws / "cache" / "wheels")
    print(f"full logs disk: exit 6 in {took:.1f}s: {line}", file=sys.stderr)


def test_full_cache_disk_while_downloading(tmp_path: Path) -> None:
    """The cache is a 128 KiB tmpfs; the sdist (file:// URL, its pin right) is 512 KiB: the
    download cannot be stored. A fetch error (exit 4) names the downloads directory, nothing
    is retried, no partial download (``.part-*``) is left."""
    data = _random_sdist()
    (tmp_path / "demo-1.0.tar.gz").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    recipe = tmp_path / "r.toml"
    recipe.write_text('schema_version = 1\n[package]\nname = "demo"\n[source]\n'
                      f'sdist = {{ url = "file://{tmp_path}/demo-1.0.tar.gz", '
                      f'sha256 = "{sha}" }}\n')
    with tmpfs(tmp_path / "cache", "128k") as cache:
        t0 = time.monotonic()
        res = rocmbuild("--workdir", str(tmp_path / "build"), "--cache-dir", str(cache),
                        "build", str(recipe), "--arch", "gfx942")
        took = time.monotonic() - t0
        line = _error_line(res, "fetch error", 4)
        assert "No space left on device" in line and str(cache / "downloads" / sha) in line, line
        assert "retrying" not in res.stderr, res.stderr
        assert not _files(cache / "downloads"), _files(cache / "downloads")
    print(f"full cache disk: exit 4 in {took:.1f}s: {line}", file=sys.stderr)


def _random_sdist() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in (("demo-1.0/setup.py", b"from setuptools import setup\nsetup()\n"),
                           ("demo-1.0/blob.bin", os.urandom(512 << 10))):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tf.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def _served(idx: Path) -> dict[str, bytes]:
    """What the index serves: every file reachable through its stage symlinks."""
    out: dict[str, bytes] = {}
    for stage in (p for p in idx.iterdir() if p.is_symlink()):
        for f in stage.rglob("*"):
            if f.is_file():
                out[str(f.relative_to(idx))] = f.read_bytes()
    return out


def test_full_index_disk_while_publishing(tmp_path: Path) -> None:
    """The index is a 256 KiB tmpfs holding one published wheel; a 512 KiB wheel does not fit.
    A publish error (exit 9) names the index, the served tree is unchanged, nothing partial is
    left (no temp files, no new generation), and a small wheel still publishes afterwards."""
    first, big, after = (_wheel(tmp_path, n, b) for n, b in
                         (("okpkg", 0), ("bigpkg", 512 << 10), ("afterpkg", 0)))
    ws = str(tmp_path / "build")
    with tmpfs(tmp_path / "idx", "256k") as idx:
        rocmbuild("--workdir", ws, "publish", str(first), "--index", str(idx), check=True)
        before, files_before = _served(idx), _files(idx)
        t0 = time.monotonic()
        res = rocmbuild("--workdir", ws, "publish", str(big), "--index", str(idx),
                        "--stage", "staging")
        took = time.monotonic() - t0
        line = _error_line(res, "publish error", 9)
        assert "No space left on device" in line and str(idx) in line, line
        assert _served(idx) == before
        assert _files(idx) == files_before, set(_files(idx)) ^ set(files_before)
        rocmbuild("--workdir", ws, "publish", str(after), "--index", str(idx), "--stage",
                  "staging", check=True)
    print(f"full index disk: exit 9 in {took:.1f}s: {line}", file=sys.stderr)


@pytest.fixture
def ro_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "ro", "1m") as mnt:
        _remount_ro(mnt)
        yield mnt


def test_read_only_index(tmp_path: Path, ro_disk: Path) -> None:
    """An index directory on a read-only file system: a publish error (exit 9) naming it."""
    res = rocmbuild("--workdir", str(tmp_path / "build"), "publish", str(small_wheel(tmp_path)),
                    "--index", str(ro_disk))
    line = _error_line(res, "publish error", 9)
    assert "Read-only file system" in line and str(ro_disk) in line, line


def test_read_only_workdir_source_tree(tmp_path: Path, ro_disk: Path) -> None:
    """<workdir>/src on a read-only file system (the workdir itself writable): the fetch stage
    cannot copy the source there; a fetch error (exit 4) naming the path."""
    recipe = _project(tmp_path)
    ws = tmp_path / "build"
    ws.mkdir()
    (ws / "src").symlink_to(ro_disk)
    res = rocmbuild("--workdir", str(ws), "build", str(recipe), "--arch", "gfx942",
                    env={"ROCMBUILD_PREFLIGHT": "off"})  # past the preflight's free-space check
    line = _error_line(res, "fetch error", 4)
    assert "Read-only file system" in line and str(ws / "src") in line, line
