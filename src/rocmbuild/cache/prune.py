"""``rocmbuild cache prune``: keep a workspace's disk use bounded (docs/cache.md, "Pruning").

What it manages, as items with a size and a last use:

- a **build** (one per cache key): its cache entry ``<cache>/wheels/<key>/``, its source tree
  ``<workdir>/src/<recipe>/<short key>/`` and its logs ``<workdir>/logs/<recipe>/<short key>/``
  (with the stages' ``.<short key>-*`` work dirs beside them). Last use: the newest mtime of
  those; a cache hit touches the entry's directory (``touch``). In use while a build of that key
  holds its lock ``<cache>/locks/<key>.lock``: such a build is never removed.
- the **shared** downloads (``<cache>/downloads/<sha256>``), git mirrors (``<cache>/git/<id>``)
  and extracted downloads (``<cache>/extracted/<id>``): any build may use them, so they are
  removed only while no build runs (``<cache>/locks/prune.lock``, which every build holds
  shared, can be taken exclusively).
- leftovers of an earlier prune that was killed: ``.trash/`` in the cache and the workdir
  (emptied, like the shared items, only while no build or other prune runs).

Rules: ``keep_days`` removes what was last used longer ago; ``max_size`` then removes the least
recently used until the total is at most that many bytes. Removal is crash-safe: an item is
renamed into ``.trash/`` (an atomic step, on the same file system), then deleted; a crash in
between leaves it in the trash, emptied by the next prune. Nothing is followed through a
symlink: a symlink where an item or one of the directories above belongs is left alone, and
sizes count a tree's own files only. The static index (``<workdir>/index``), wheels, reports,
broken/ and build environments are not touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rocmbuild.cache import store as cache
from rocmbuild.core import config, fsutil, lock
from rocmbuild.core.errors import CacheError

Kind = Literal["build", "download", "git", "extracted", "trash"]
TRASH = ".trash"
DAY = 86400.0
_KEY = re.compile(r"[0-9a-f]{64}")
_SHORT = re.compile(r"[0-9a-f]{16}")
_HINT = "check the permissions of the cache and workdir (--cache-dir, --workdir)"


@dataclass(frozen=True)
class Pruned:
    """One item prune removed (or would remove, or kept because a build uses it)."""

    kind: Kind
    key: str  # the cache key (or its first 16 digits when only a source tree is left), the id
    paths: tuple[Path, ...]
    size: int  # bytes on disk
    last_use: float  # seconds since the epoch
    reason: str  # why it goes ("unused for 15.2 days", "least recently used") or stays

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "paths": [str(p) for p in self.paths],
                "size": self.size, "size_human": human(self.size),
                "last_use": round(self.last_use, 3), "reason": self.reason}


@dataclass(frozen=True)
class PruneResult:
    removed: tuple[Pruned, ...]
    kept_in_use: tuple[Pruned, ...]
    freed_bytes: int
    total_before: int  # bytes prune manages, before
    total_after: int
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "freed_bytes": self.freed_bytes,
                "freed_human": human(self.freed_bytes), "total_before": self.total_before,
                "total_after": self.total_after,
                "removed": [r.to_json() for r in self.removed],
                "kept_in_use": [r.to_json() for r in self.kept_in_use]}


# -- sizes and ages --------------------------------------------------------------------------

def human(n: int) -> str:
    """``n`` bytes for people: 512 B, 1.5 KiB, 200.0 GiB."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def _tree(path: Path) -> tuple[int, float]:
    """(bytes on disk, newest mtime of the top and its direct children) of ``path``, never
    through a symlink; hard links counted once."""
    seen: set[tuple[int, int]] = set()
    try:
        top = path.lstat()
    except OSError:
        return 0, 0.0
    newest = top.st_mtime
    total = top.st_blocks * 512
    if not stat.S_ISDIR(top.st_mode):
        return total, newest
    stack, first = [path], True
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if first:
                newest = max(newest, st.st_mtime)
            if st.st_nlink > 1:
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(e.path))
        first = False
    return total, newest


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _children(path: Path) -> list[Path]:
    """The entries of the real directory ``path`` (not a symlink), sorted; [] otherwise."""
    if not _real_dir(path):
        return []
    try:
        return sorted(path.iterdir())
    except OSError as exc:
        raise CacheError(f"{path}: cannot list it: {exc.strerror}", hint=_HINT) from exc


# -- locks -----------------------------------------------------------------------------------

class _Locks:
    """The flocks prune takes without waiting; all released at the end."""

    def __init__(self, create: bool) -> None:
        self.create = create
        self.fds: list[int] = []

    def take(self, path: Path) -> bool:
        """True: taken (or no such lock and ``create`` is off); False: a build holds it."""
        try:  # a regular file of its own (core.lock): no symlink, FIFO, directory, hard link
            fd = lock.open_lock(path) if self.create else fsutil.open_regular(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise CacheError(f"{path}: cannot open the lock: {exc.strerror}", hint=_HINT) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fds.append(fd)
        if self.create:  # not in a dry run, which writes nothing
            with contextlib.suppress(OSError):  # who holds it, for a build that waits (lock.py)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return True

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


# -- finding items ---------------------------------------------------------------------------

@dataclass
class _Item:
    kind: Kind
    key: str
    paths: list[Path]
    size: int = 0
    last_use: float = 0.0


def _builds(ws: config.Workspace) -> dict[str, _Item]:
    """The builds by short key: cache entry, source tree, logs and the stages' work dirs."""
    items: dict[str, _Item] = {}

    def add(short: str, path: Path, key: str | None = None) -> None:
        item = items.setdefault(short, _Item("build", short, []))
        item.paths.append(path)
        if key is not None:
            item.key = key

    for p in _children(ws.cache / "wheels"):
        if _KEY.fullmatch(p.name):
            add(p.name[:16], p, p.name)
    for top in (ws.src, ws.logs):
        for recipe in _children(top):
            for p in _children(recipe):
                short = p.name[1:17] if p.name.startswith(".") else p.name
                if _SHORT.fullmatch(short) and (p.name == short or p.name[17:18] == "-"):
                    add(short, p)
    return items


def _shared(ws: config.Workspace) -> list[_Item]:
    out = []
    for kind, sub in (("download", "downloads"), ("git", "git"), ("extracted", "extracted")):
        for p in _children(ws.cache / sub):
            if not p.name.startswith("."):  # a download or clone under way
                out.append(_Item(kind, p.name, [p]))  # type: ignore[arg-type]
    return out


def _measure(item: _Item) -> _Item:
    for p in item.paths:
        size, newest = _tree(p)
        item.size += size
        item.last_use = max(item.last_use, newest)
    return item


# -- removing --------------------------------------------------------------------------------

def _trash_dir(path: Path, ws: config.Workspace) -> Path:
    """The trash on ``path``'s side: the cache's or the workdir's (a rename stays on one disk)."""
    return (ws.cache if path.is_relative_to(ws.cache) else ws.root) / TRASH


def _remove(path: Path, ws: config.Workspace) -> None:
    """Rename ``path`` into the trash, then delete it there. A symlink is only unlinked."""
    trash = _trash_dir(path, ws)
    try:
        if path.is_symlink():
            path.unlink()
            return
        trash.mkdir(exist_ok=True)
        if not _real_dir(trash):
            raise CacheError(f"{trash}: is not a directory", hint="remove it and prune again")
        gone = trash / f"{path.parent.name}-{path.name}-{os.getpid()}"
        os.replace(path, gone)
        shutil.rmtree(gone)
    except FileNotFoundError:
        return  # gone already (another prune)
    except OSError as exc:
        raise CacheError(f"{path}: cannot remove it: {exc.strerror}", hint=_HINT) from exc


def _empty_trash(ws: config.Workspace, dry_run: bool) -> list[Pruned]:
    out = []
    for root in dict.fromkeys((ws.cache, ws.root)):
        trash = root / TRASH
        for p in _children(trash):
            size, newest = _tree(p)
            out.append(Pruned("trash", p.name, (p,), size, newest, "left by an interrupted prune"))
            if not dry_run:
                try:
                    if p.is_symlink() or not p.is_dir():
                        p.unlink()
                    else:
                        shutil.rmtree(p)
                except OSError as exc:
                    raise CacheError(f"{p}: cannot remove it: {exc.strerror}",
                                     hint=_HINT) from exc
    return out


# -- the rules -------------------------------------------------------------------------------

def _reason(item: _Item, total: int, max_size: int | None, keep_days: float | None,
            now: float) -> str | None:
    """Why ``item`` goes (None: it stays), with ``total`` bytes still there."""
    age = (now - item.last_use) / DAY
    if keep_days is not None and age > keep_days:
        return f"unused for {age:.1f} days (--keep-days {keep_days:g})"
    if max_size is not None and total > max_size:
        return (f"least recently used ({age:.1f} days), the total {human(total)} is over "
                f"--max-size {human(max_size)}")
    return None


@contextlib.contextmanager
def _held(create: bool) -> Iterator[_Locks]:
    locks = _Locks(create)
    try:
        yield locks
    finally:
        locks.close()


def prune(ws: config.Workspace, max_size: int | None, keep_days: float | None,
          dry_run: bool) -> PruneResult:
    """Remove what was unused for more than ``keep_days`` days, then the least recently used
    until at most ``max_size`` bytes remain (both optional); never a build that holds its lock,
    never a shared download or mirror while any build runs. ``dry_run``: remove nothing, say
    what would go."""
    now = time.time()
    locks_dir = ws.cache / "locks"
    with _held(create=not dry_run and _real_dir(locks_dir)) as locks:
        idle = locks.take(locks_dir / cache.PRUNE_LOCK) if _real_dir(locks_dir) else True
        # another prune (which holds prune.lock) may be deleting what is in the trash now
        trash = _empty_trash(ws, dry_run) if idle else []
        items = [_measure(i) for i in [*_builds(ws).values(), *_shared(ws)]]
        before = sum(i.size for i in items) + sum(t.size for t in trash)
        removed: list[Pruned] = list(trash)
        kept: list[Pruned] = []
        total = sum(i.size for i in items)
        for item in sorted(items, key=lambda i: (i.last_use, i.kind, i.key)):  # LRU first
            reason = _reason(item, total, max_size, keep_days, now)
            if reason is None:
                continue
            if not _free(item, locks, locks_dir, idle):
                kept.append(Pruned(item.kind, item.key, tuple(item.paths), item.size,
                                   item.last_use, "in use by a running build"))
                continue
            if not dry_run:
                for p in sorted(item.paths, key=lambda p: not p.is_relative_to(ws.cache)):
                    _remove(p, ws)  # the cache entry first: the rest is useless without it
            removed.append(Pruned(item.kind, item.key, tuple(item.paths), item.size,
                                  item.last_use, reason))
            total -= item.size
        if idle and not dry_run:
            _drop_memos(ws)
    freed = sum(r.size for r in removed)
    return PruneResult(tuple(removed), tuple(kept), freed, before, before - freed, dry_run)


def _drop_memos(ws: config.Workspace) -> None:
    """Empty ``<cache>/memo/`` (``rocmbuild.commands.noop_memo``): hints a few hundred bytes
    each, one per command line ever run, which may name what was just removed; the next run of
    a command line takes the full path once and writes its memo again. Regular files only,
    nothing followed."""
    d = ws.cache / cache.MEMO_DIR
    if not _real_dir(d):
        return
    for p in _children(d):
        if p.name.endswith(".json") and not p.is_symlink() and p.is_file():
            with contextlib.suppress(OSError):
                p.unlink()


def _free(item: _Item, locks: _Locks, locks_dir: Path, idle: bool) -> bool:
    """Whether no build uses ``item`` (and, for a build, its lock is now held by us)."""
    if item.kind != "build":
        return idle  # shared: any build may read it
    if not _real_dir(locks_dir):
        return True  # no build ever ran with this cache
    if _KEY.fullmatch(item.key):
        return bool(locks.take(locks_dir / f"{item.key}.lock"))
    names = [p for p in _children(locks_dir) if p.name.startswith(item.key)]
    if not names:
        return idle  # a source tree without an entry: no lock to ask; only while nothing runs
    return all(locks.take(p) for p in names)

