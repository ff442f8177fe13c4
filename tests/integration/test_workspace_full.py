"""A real full disk under the workspace: a small tmpfs mounted by the test (root only; skipped
with the reason when mount is not permitted). The source archive is fine; extracting it does
not fit. rocmbuild must stop with a fetch error naming the path, a hint, no traceback, and leave
no partial tree behind."""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import rocmbuild
from tests.integration.conftest import tmpfs

SIZE_MB = 2
"""The tmpfs; the archive unpacks to 8 MiB of zeros (a 9 KiB download)."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", f"{SIZE_MB}m") as mnt:
        yield mnt


def _big_sdist() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in (("demo-1.0/setup.py", b"from setuptools import setup\nsetup()\n"),
                           ("demo-1.0/blob.bin", bytes(8 << 20))):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tf.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def test_full_disk_while_extracting(tmp_path: Path, small_disk: Path) -> None:
    data = _big_sdist()
    (tmp_path / "demo-1.0.tar.gz").write_bytes(data)
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        'schema_version = 1\n[package]\nname = "demo"\n[source]\n'
        f'sdist = {{ url = "file://{tmp_path}/demo-1.0.tar.gz", '
        f'sha256 = "{hashlib.sha256(data).hexdigest()}" }}\n')
    ws = small_disk / "build"
    t0 = time.monotonic()
    res = rocmbuild("--workdir", str(ws), "--cache-dir", str(tmp_path / "cache"),
                    "build", str(recipe), "--arch", "gfx942",
                    env={"ROCMBUILD_PREFLIGHT": "off"})  # the disk filling up, not foreseen
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert "Traceback" not in out and "internal error" not in out, out
    assert res.returncode == 4, out
    line = next(x for x in res.stderr.splitlines() if x.startswith("fetch error: "))
    assert "No space left on device" in line and str(ws) in line, line
    assert "hint: " in res.stderr
    src = ws / "src"
    left = [p for p in src.rglob("*")] if src.exists() else []
    assert not [p for p in left if p.is_file()], left  # no partial tree
    print(f"full disk: exit 4 in {took:.1f}s", file=sys.stderr)
