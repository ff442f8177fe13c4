"""rocmbuild.cache.stamp: a lookup of an unchanged entry reads none of its wheel's bytes (the
verified stamp vouches for them), any other stat is a full hash, and delivery hashes what it
hands out, so what the stat cannot see is still never delivered.

Real files on the real file system (tmp_path); the bytes read are the kernel's own count
(``rchar`` in /proc/self/io). ``RACY_NS`` is set to 0 where a test needs a stamp at once (the
real value is 2 s: a stamp taken that soon after the wheel's last change is not trusted; the
last tests check that rule with the real value)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from rocmbuild.cache import stamp
from rocmbuild.cache import store as cache
from rocmbuild.core.config import Workspace
from rocmbuild.pipeline import deliver

KEY = "cd" * 32
NAME = "big-1.0+rocm7.2-py3-none-any.whl"
SIZE = 8 << 20
BYTES = bytes(range(256)) * (SIZE // 256)
SHA = hashlib.sha256(BYTES).hexdigest()


def _read() -> int:
    """Bytes this process has read so far (the kernel's count)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _lookup(cache_dir: Path) -> tuple[cache.Entry | None, int]:
    before = _read()
    entry = cache.lookup(cache_dir, KEY)
    return entry, _read() - before


def _ws(tmp_path: Path) -> Workspace:
    ws = Workspace(root=tmp_path / "w", cache=tmp_path / "c")
    src = tmp_path / NAME
    src.write_bytes(BYTES)
    cache.store(ws.cache, KEY, src, SHA, {"recipe": "big", "variant": None,
                                           "archs": ["gfx942"], "duration_s": 1.0},
                validation=cache.Validation("passed"))
    return ws


@pytest.fixture
def stamped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """An entry whose first lookup hashed it and wrote its stamp."""
    monkeypatch.setattr(stamp, "RACY_NS", 0)
    ws = _ws(tmp_path)
    entry, read = _lookup(ws.cache)
    assert entry is not None and entry.checked_by == "sha256" and read >= SIZE
    assert (ws.cache / "wheels" / KEY / stamp.NAME).is_file()
    return ws


def _wheel(ws: Workspace) -> Path:
    return ws.cache / "wheels" / KEY / NAME


def test_a_second_lookup_trusts_the_stamp_and_reads_no_wheel_byte(stamped: Workspace) -> None:
    for _ in range(3):
        entry, read = _lookup(stamped.cache)
        assert entry is not None and entry.checked_by == "stamp" and entry.sha256 == SHA
        assert read < 64 * 1024, read  # entry.json and the stamp, not 8 MiB of wheel


def _rot(ws: Workspace) -> None:
    """Same-size corruption the stat does not show (bit rot, a write below the file system):
    the bytes change, then the stamp is made to match the new stat again."""
    wheel = _wheel(ws)
    st = wheel.stat()
    with open(wheel, "r+b") as f:
        f.seek(SIZE // 2)
        f.write(b"\xff" * 16)
    os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns))
    stamp.write(wheel.parent, stamp.of(wheel.stat(), SHA, stamp.now()))


def test_what_the_stat_cannot_see_is_a_stamp_hit_but_never_delivered(
        stamped: Workspace, tmp_path: Path) -> None:
    _rot(stamped)
    entry, read = _lookup(stamped.cache)
    assert entry is not None and entry.checked_by == "stamp" and read < 64 * 1024
    with pytest.raises(cache.Corrupt) as exc:
        cache.deliver(entry, tmp_path / "out")
    assert f"entry.json records {SHA}" in exc.value.message and "discarded" in exc.value.message
    assert not (tmp_path / "out" / NAME).exists() and list((tmp_path / "out").iterdir()) == []
    assert not (stamped.cache / "wheels" / KEY).exists()  # discarded: the next build rebuilds


def test_copy_to_broken_hashes_too(stamped: Workspace, tmp_path: Path) -> None:
    _rot(stamped)
    entry = cache.lookup(stamped.cache, KEY)
    assert entry is not None
    with pytest.raises(cache.Corrupt):
        cache.copy_to(entry, tmp_path / "broken" / NAME)
    assert not (tmp_path / "broken" / NAME).exists()


def test_a_served_hit_with_rotten_bytes_is_a_miss_under_the_locks(
        stamped: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rot(stamped)
    with deliver.held(stamped, KEY, tmp_path / "out") as hit:
        assert hit is None  # the caller builds here
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not delivered, the entry is discarded; rebuilding" in err
    assert not (tmp_path / "out" / NAME).exists()


def test_an_intact_hit_is_delivered_hashed_once(stamped: Workspace, tmp_path: Path) -> None:
    before = _read()
    with deliver.held(stamped, KEY, tmp_path / "out") as hit:
        assert hit is not None and hit.entry.checked_by == "stamp"
    read = _read() - before
    assert hit.wheel.read_bytes() == BYTES
    assert SIZE <= read < 2 * SIZE, read  # the copy's one read, no lookup hash before it
    before = _read()
    with deliver.held(stamped, KEY, tmp_path / "out") as hit:  # a no-op: the copy is there
        assert hit is not None
    assert SIZE <= _read() - before < 2 * SIZE  # what is there is hashed, the cache's is not


def _touch(w: Path) -> None:
    os.utime(w, ns=(w.stat().st_atime_ns, w.stat().st_mtime_ns + 1))


def _same_size_same_mtime(w: Path) -> None:
    st = w.stat()
    with open(w, "r+b") as f:
        f.write(b"\0" * 16)
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))  # ctime still moves: no call sets it


def _new_inode(w: Path) -> None:
    shutil.copy2(w, w.with_suffix(".tmp"))  # same bytes and mtime, another inode
    os.replace(w.with_suffix(".tmp"), w)


def _edit_stamp(**change: object) -> object:
    def edit(w: Path) -> None:
        p = w.parent / stamp.NAME
        p.write_text(json.dumps({**json.loads(p.read_text()), **change}))
    return edit


def _bad_stamp(text: str) -> object:
    return lambda w: (w.parent / stamp.NAME).write_text(text)


def _symlinked_stamp(w: Path) -> None:
    p = w.parent / stamp.NAME
    os.replace(p, w.parent.parent / "elsewhere.json")
    p.symlink_to(w.parent.parent / "elsewhere.json")


CHANGES = {  # name -> (change, the bytes are still the recorded ones)
    "touched": (_touch, True),
    "rewritten, same size and mtime": (_same_size_same_mtime, False),
    "replaced, same bytes and mtime": (_new_inode, True),
    "stamp for another sha256": (_edit_stamp(sha256="0" * 64), True),
    "stamp of another inode": (_edit_stamp(ino="1"), True),
    "stamp of another ctime": (_edit_stamp(ctime_ns=1), True),
    "stamp taken before the change": (_edit_stamp(verified_ns=0), True),
    "stamp not JSON": (_bad_stamp("{"), True),
    "stamp with a float": (_bad_stamp('{"size": 1.5}'), True),
    "stamp 100k brackets": (_bad_stamp("[" * 100_000), True),
    "stamp a symlink": (_symlinked_stamp, True),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_other_stat_or_stamp_is_a_full_hash(stamped: Workspace, change: str) -> None:
    edit, intact = CHANGES[change]
    edit(_wheel(stamped))  # type: ignore[operator]
    entry, read = _lookup(stamped.cache)
    assert read >= SIZE, read  # hashed
    if not intact:
        assert entry is None and not (stamped.cache / "wheels" / KEY).exists()
        return
    assert entry is not None and entry.checked_by == "sha256"
    entry, read = _lookup(stamped.cache)  # stamped again: the next lookup is cheap
    assert entry is not None and entry.checked_by == "stamp" and read < 64 * 1024


def test_writing_a_stamp_keeps_the_entrys_last_use(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`cache prune`'s LRU reads the mtimes of the entry and its files: a lookup is no use."""
    monkeypatch.setattr(stamp, "RACY_NS", 0)
    ws = _ws(tmp_path)
    d = ws.cache / "wheels" / KEY
    os.utime(d, (1000, 1000))
    assert cache.lookup(ws.cache, KEY) is not None and (d / stamp.NAME).is_file()
    assert d.stat().st_mtime == 1000 and (d / stamp.NAME).stat().st_mtime == 1000


def test_a_just_stored_wheel_is_racy_hashed_and_not_stamped(tmp_path: Path) -> None:
    """The real RACY_NS: a lookup within 2 s of the wheel's last change (the store's rename)
    hashes, and writes no stamp a same-tick write could fool."""
    ws = _ws(tmp_path)
    for _ in range(2):
        entry, read = _lookup(ws.cache)
        assert entry is not None and entry.checked_by == "sha256" and read >= SIZE
    assert not (ws.cache / "wheels" / KEY / stamp.NAME).exists()


def test_a_racy_stamp_is_not_trusted(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    w = _wheel(ws)
    s = stamp.of(w.stat(), SHA, w.stat().st_ctime_ns + stamp.RACY_NS - 1)
    (w.parent / stamp.NAME).write_text(s.to_json())
    entry, read = _lookup(ws.cache)
    assert entry is not None and entry.checked_by == "sha256" and read >= SIZE
    s = stamp.of(w.stat(), SHA, w.stat().st_ctime_ns + stamp.RACY_NS)
    (w.parent / stamp.NAME).write_text(s.to_json())
    entry, read = _lookup(ws.cache)
    assert entry is not None and entry.checked_by == "stamp" and read < 64 * 1024
