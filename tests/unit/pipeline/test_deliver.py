"""rocmbuild.pipeline.deliver: the one way a hit is served (the pipeline's and the memo's).

Real files on the real file system (tmp_path) and real locks; nothing is faked."""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

import pytest

from rocmbuild.cache import store as cache
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import ValidationError
from rocmbuild.pipeline import deliver
from tests.unit.cache.test_store import BYTES, KEY, NAME


def _ws(tmp_path: Path, validation: cache.Validation = cache.NOT_VALIDATED) -> Workspace:
    ws = Workspace(root=tmp_path / "w", cache=tmp_path / "c")
    src = tmp_path / NAME
    src.write_bytes(BYTES)
    cache.store(ws.cache, KEY, src, hashlib.sha256(BYTES).hexdigest(),
                {"recipe": "demo", "variant": None, "archs": ["gfx942"], "duration_s": 1.0},
                validation=validation)
    return ws


def _locked(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_hit_is_delivered_touched_and_the_locks_held_for_the_body(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    entry_dir = ws.cache / "wheels" / KEY
    os.utime(entry_dir, (1, 1))
    with deliver.held(ws, KEY, tmp_path / "out") as hit:
        assert hit is not None and hit.wheel == tmp_path / "out" / NAME
        assert hit.wheel.read_bytes() == BYTES and hit.entry.key == KEY
        assert _locked(ws.cache / "locks" / f"{KEY}.lock")
    assert not _locked(ws.cache / "locks" / f"{KEY}.lock")
    assert entry_dir.stat().st_mtime > 1  # prune's LRU sees the use


def test_a_miss_or_force_yields_none_under_the_locks(tmp_path: Path) -> None:
    ws = Workspace(root=tmp_path / "w", cache=tmp_path / "c")
    with deliver.held(ws, KEY, tmp_path / "out") as hit:
        assert hit is None and _locked(ws.cache / "locks" / f"{KEY}.lock")
    with deliver.held(_ws(tmp_path), KEY, tmp_path / "out", look=False) as hit:
        assert hit is None and not (tmp_path / "out").exists()


def test_its_bytes_in_broken_are_recorded_failed_and_not_delivered(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    ws.broken.mkdir(parents=True)
    (ws.broken / NAME).write_bytes(BYTES)
    with pytest.raises(ValidationError, match="failed validation"), \
            deliver.held(ws, KEY, tmp_path / "out"):
        pass
    entry = cache.lookup(ws.cache, KEY)
    assert entry is not None and entry.validation.status == "failed"
    assert not (tmp_path / "out").exists()
    with deliver.held(ws, KEY, tmp_path / "out", failed_too=True) as hit:  # build --validate
        assert hit is not None and hit.wheel.read_bytes() == BYTES


def test_a_failed_record_leaves_a_copy_in_broken(tmp_path: Path) -> None:
    ws = _ws(tmp_path, cache.Validation("failed", "r.md", 1.0))
    with pytest.raises(ValidationError, match=r"report r\.md"), \
            deliver.held(ws, KEY, tmp_path / "out"):
        pass
    assert (ws.broken / NAME).read_bytes() == BYTES  # publish's broken/ check refuses it


def test_other_bytes_of_the_same_name_in_broken_do_not_stop_a_hit(tmp_path: Path) -> None:
    """An older build's wheel of the same name failed; these bytes did not: delivered."""
    ws = _ws(tmp_path)
    ws.broken.mkdir(parents=True)
    (ws.broken / NAME).write_bytes(b"an older build")
    with deliver.held(ws, KEY, tmp_path / "out") as hit:
        assert hit is not None and hit.entry.validation.status == "not validated"
