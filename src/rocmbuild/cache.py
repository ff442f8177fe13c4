"""Content-addressed wheel cache: ``<cache>/wheels/<key>/`` holds the tagged wheel and
``entry.json``. The key (Plan.cache_key) covers the rendered recipe, source pin, patch hashes,
archs, variant, toolchain versions, Python tag and torch version, so a hit means the same inputs.
Entries are written to a temp directory, fsynced and renamed into place: a reader never sees half
of one, and a crash never leaves a torn one behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild import fsutil
from rocmbuild.errors import CacheError


@dataclass(frozen=True)
class Entry:
    key: str
    wheel: Path
    sha256: str
    meta: dict[str, Any]


def _dir(cache: Path, key: str) -> Path:
    return cache / "wheels" / key


def lookup(cache: Path, key: str) -> Entry | None:
    d = _dir(cache, key)
    try:
        meta = json.loads((d / "entry.json").read_text())
    except (OSError, ValueError):
        return None
    wheel = d / meta["wheel"]
    if not wheel.is_file() or wheel.stat().st_size != meta.get("size"):
        return None
    return Entry(key, wheel, meta["sha256"], meta)


def store(cache: Path, key: str, wheel: Path, sha256: str, meta: dict[str, Any]) -> Entry:
    final = _dir(cache, key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key[:12]}-"))
    try:
        shutil.move(str(wheel), tmp / wheel.name)  # a copy when the cache is on another disk
        fsutil.fsync_file(tmp / wheel.name)
        full = {
            **meta,
            "wheel": wheel.name,
            "sha256": sha256,
            "size": (tmp / wheel.name).stat().st_size,
            "stored_at": time.time(),
        }
        fsutil.write_atomic(tmp / "entry.json", json.dumps(full, indent=2, sort_keys=True))
        if final.exists():
            shutil.rmtree(final)  # --force rebuild replaces the old entry
        os.replace(tmp, final)
        fsutil.fsync_dir(final.parent)
    except OSError as exc:
        raise CacheError(
            f"{final}: cannot store the wheel: {exc}",
            hint="check free disk and permissions of the cache directory "
            "(--cache-dir / ROCMBUILD_CACHE_DIR)",
        ) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Entry(key, final / wheel.name, sha256, full)


def deliver(entry: Entry, wheel_dir: Path) -> Path:
    """Put the cached wheel into ``wheel_dir`` (hard link when possible), atomically."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    dest = wheel_dir / entry.wheel.name
    if (
        dest.is_file()
        and dest.stat().st_size == entry.wheel.stat().st_size
        and (dest.stat().st_ino == entry.wheel.stat().st_ino)
    ):
        return dest
    fsutil.copy_atomic(entry.wheel, dest, link=True)
    return dest
