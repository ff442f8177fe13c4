"""rocmbuild.cache.prune: LRU by last use, keep-days, dry-run, in-use builds kept, crash-safe
removal,
nothing followed through a symlink.

Real files on the real file system: entries are stored by ``cache.store`` with real (small)
wheels; "last use" is set with os.utime, which is what a cache hit does (``cache.touch``). A held
build lock here is a second open file description in this process (flock conflicts between
those as between processes); tests/integration/test_prune_live.py holds one from a child process."""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
import zipfile
from pathlib import Path

from rocmbuild.cache import prune
from rocmbuild.cache import store as cache
from rocmbuild.core import config

DAY = 86400.0


def _wheel(path: Path, payload: int) -> Path:
    """A real wheel (METADATA, WHEEL, RECORD) with ``payload`` bytes of incompressible data."""
    name = path.name.split("-")[0]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "X = 1\n")
        zf.writestr(f"{name}/blob.bin", os.urandom(payload))
        zf.writestr(f"{name}-1.0.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{name}-1.0.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                    "Tag: py3-none-any\n")
        zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    return path


def _ws(tmp_path: Path) -> config.Workspace:
    return config.Workspace(root=tmp_path / "build", cache=tmp_path / "build" / "cache")


def _entry(ws: config.Workspace, key: str, age_days: float, payload: int = 64 * 1024,
           recipe: str = "demo") -> Path:
    """A stored entry for ``key`` with its source tree and logs, last used ``age_days`` ago."""
    work = ws.root / "work"
    work.mkdir(parents=True, exist_ok=True)
    whl = _wheel(work / f"demo{key[:4]}-1.0-py3-none-any.whl", payload)
    e = cache.store(ws.cache, key, whl, hashlib.sha256(whl.read_bytes()).hexdigest(),
                    {"recipe": recipe, "variant": None, "archs": ["gfx942"], "duration_s": 1.0})
    src = ws.src / recipe / key[:16]
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("Y = 2\n" * 1000)
    logs = ws.logs / recipe / key[:16]
    logs.mkdir(parents=True)
    (logs / "build.log").write_text("log\n" * 1000)
    when = time.time() - age_days * DAY
    for p in (e.wheel.parent, src, logs, *e.wheel.parent.iterdir(), *src.iterdir(),
              *logs.iterdir()):
        os.utime(p, (when, when))
    return e.wheel.parent


def _keys(ws: config.Workspace) -> set[str]:
    return {p.name for p in (ws.cache / "wheels").iterdir() if not p.name.startswith(".")}


A, B, C = "a" * 64, "b" * 64, "c" * 64


def test_keep_days_removes_old_builds_whole(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    _entry(ws, A, 20)
    _entry(ws, B, 3)
    res = prune.prune(ws, None, 14, dry_run=False)
    assert [r.key for r in res.removed] == [A]
    assert _keys(ws) == {B}
    assert not (ws.src / "demo" / A[:16]).exists() and not (ws.logs / "demo" / A[:16]).exists()
    assert (ws.src / "demo" / B[:16]).is_dir()
    assert res.freed_bytes == res.removed[0].size > 64 * 1024
    assert res.total_after == res.total_before - res.freed_bytes
    assert "unused for 20.0 days" in res.removed[0].reason
    assert list((ws.cache / prune.TRASH).iterdir()) == []  # renamed there, then deleted


def test_max_size_removes_least_recently_used_first(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    _entry(ws, A, 5)  # stored first ...
    _entry(ws, B, 9)
    _entry(ws, C, 1)
    hit = cache.lookup(ws.cache, A)
    assert hit is not None
    cache.touch(hit)  # ... but used last: a hit moves it to the front
    sizes = {r.key: r.size for r in prune.prune(ws, 0, None, dry_run=True).removed}
    assert list(sizes) == [B, C, A]  # the dry run's order is the LRU order
    res = prune.prune(ws, sizes[A] + sizes[C], None, dry_run=False)
    assert [r.key for r in res.removed] == [B]
    assert _keys(ws) == {A, C}
    res = prune.prune(ws, sizes[A] + sizes[C] - 1, None, dry_run=False)
    assert [r.key for r in res.removed] == [C]
    assert _keys(ws) == {A}


def test_dry_run_deletes_nothing(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    _entry(ws, A, 30)
    before = sorted(str(p) for p in ws.root.rglob("*"))
    res = prune.prune(ws, 0, 0, dry_run=True)
    assert [r.key for r in res.removed] == [A] and res.dry_run
    assert res.freed_bytes > 0 and res.total_after == 0
    assert sorted(str(p) for p in ws.root.rglob("*")) == before


def test_build_holding_its_lock_is_kept(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    _entry(ws, A, 30)
    _entry(ws, B, 30)
    lock = ws.cache / "locks" / f"{A}.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = prune.prune(ws, 0, None, dry_run=False)
    finally:
        os.close(fd)
    assert [r.key for r in res.removed] == [B]
    assert [(r.key, r.reason) for r in res.kept_in_use] == [(A, "in use by a running build")]
    assert _keys(ws) == {A} and (ws.src / "demo" / A[:16]).is_dir()


def test_max_size_passes_over_a_build_in_use(tmp_path: Path) -> None:
    """The least recently used build is running: it stays and counts, the next one goes."""
    ws = _ws(tmp_path)
    _entry(ws, A, 9)
    _entry(ws, B, 5)
    _entry(ws, C, 1)
    total = prune.prune(ws, 0, None, dry_run=True).total_before
    lock = ws.cache / "locks" / f"{A}.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = prune.prune(ws, total - 1, None, dry_run=False)
    finally:
        os.close(fd)
    assert [r.key for r in res.kept_in_use] == [A] and [r.key for r in res.removed] == [B]
    assert _keys(ws) == {A, C} and res.total_after <= total - 1


def test_shared_downloads_kept_while_any_build_runs(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    dl = ws.cache / "downloads" / ("d" * 64)
    dl.mkdir(parents=True)
    (dl / "x.tar.gz").write_bytes(b"x" * 10000)
    mirror = ws.cache / "git" / ("e" * 16)
    (mirror / "objects").mkdir(parents=True)
    old = time.time() - 40 * DAY
    for p in (dl, dl / "x.tar.gz", mirror, mirror / "objects"):
        os.utime(p, (old, old))
    lock = ws.cache / "locks" / cache.PRUNE_LOCK
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # what every running build holds
        res = prune.prune(ws, None, 14, dry_run=False)
    finally:
        os.close(fd)
    assert res.removed == () and {r.kind for r in res.kept_in_use} == {"download", "git"}
    assert dl.is_dir() and mirror.is_dir()
    res = prune.prune(ws, None, 14, dry_run=False)  # nothing runs now
    assert sorted(r.kind for r in res.removed) == ["download", "git"]
    assert not dl.exists() and not mirror.exists()


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    """A symlink where an entry, a source tree or a cache directory belongs, or inside a tree:
    the link goes (or stays), what it points at is neither counted nor touched."""
    ws = _ws(tmp_path)
    outside = tmp_path / "precious"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "data").write_bytes(b"p" * 4_000_000)
    _entry(ws, A, 30)
    (ws.src / "demo" / A[:16] / "escape").symlink_to(outside)
    (ws.cache / "wheels" / B).symlink_to(outside)
    (ws.cache / "downloads").symlink_to(outside)
    (ws.src / "other").symlink_to(outside)
    old = time.time() - 30 * 86400  # by age: a short link holds no block, so its size is 0
    for p in (ws.cache / "wheels" / B, ws.src / "demo" / A[:16] / "escape",
              ws.src / "demo" / A[:16]):
        os.utime(p, (old, old), follow_symlinks=False)
    res = prune.prune(ws, None, 14, dry_run=False)
    assert {r.key for r in res.removed} == {A, B}
    assert all(r.size < 1_000_000 for r in res.removed)
    assert (outside / "sub" / "data").read_bytes() == b"p" * 4_000_000
    assert not (ws.cache / "wheels" / B).is_symlink()  # the link itself is removed
    assert (ws.cache / "downloads").is_symlink()  # not ours to walk through


def test_interrupted_prune_leftovers_are_emptied(tmp_path: Path) -> None:
    """A prune killed between the rename and the delete leaves the item in .trash/."""
    ws = _ws(tmp_path)
    left = ws.cache / prune.TRASH / f"wheels-{A}-123"
    left.mkdir(parents=True)
    (left / "x.whl").write_bytes(b"w" * 5000)
    res = prune.prune(ws, None, 14, dry_run=True)
    assert [r.kind for r in res.removed] == ["trash"] and left.is_dir()
    lock = ws.cache / "locks" / cache.PRUNE_LOCK
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a build runs: another prune may be emptying the trash
        assert prune.prune(ws, None, 14, dry_run=False).removed == () and left.is_dir()
    finally:
        os.close(fd)
    res = prune.prune(ws, None, 14, dry_run=False)
    assert [r.kind for r in res.removed] == ["trash"] and res.freed_bytes >= 5000
    assert not left.exists()


def test_nothing_there_is_nothing_to_do(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    res = prune.prune(ws, 0, 0, dry_run=False)
    assert res.removed == () and res.total_before == 0
    assert not ws.root.exists()  # prune creates nothing


def test_human() -> None:
    assert [prune.human(n) for n in (0, 1023, 1536, 200 * 1024**3, 3 * 1024**4)] == \
        ["0 B", "1023 B", "1.5 KiB", "200.0 GiB", "3.0 TiB"]
