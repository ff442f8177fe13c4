"""Serving a cache hit: the one way a cached wheel is handed out, for the pipeline
(``pipeline.build``) and for the memo's short path (``commands.noop_memo``).

``held`` takes the key's locks, looks the key up (``cache.lookup``: entry.json checked, the
wheel hashed or vouched for by its verified stamp), refuses a wheel that failed validation,
delivers a copy into the wheel directory (its bytes hashed on the way: a wheel whose bytes are
not the recorded ones is discarded and served as a miss) and records the use (``cache.touch``,
prune's LRU). The locks stay held for the ``with`` body: a miss is built there, under the same
locks.

This module imports only what a hit already imports (core and cache): the memo's path imports
no argument parser, recipe model, plan or stage, and importing it does not import
``pipeline.build`` (``pipeline/__init__.py`` is empty).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocmbuild.cache import store as cache
from rocmbuild.core import log
from rocmbuild.core.errors import ValidationError

if TYPE_CHECKING:
    from rocmbuild.core.config import Workspace


@dataclass(frozen=True)
class Hit:
    """A served hit: the cache entry and its copy delivered into the wheel directory."""

    entry: cache.Entry
    wheel: Path


@contextlib.contextmanager
def held(ws: Workspace, key: str, wheel_dir: Path, *, look: bool = True,
         failed_too: bool = False) -> Iterator[Hit | None]:
    """Hold ``key``'s locks (``cache.key_locks``) and, with ``look``, serve its entry: yield the
    hit, delivered into ``wheel_dir``, or None (a miss, or ``look`` False: ``--force``), which
    the caller builds in the ``with`` body, under the same locks.

    A wheel recorded as failed, or whose bytes lie in ``broken/`` (validation failed on them,
    e.g. a standalone ``rocmbuild validate`` of the delivered wheel: recorded as failed here),
    is not delivered: ValidationError (exit 8), a copy left in ``broken/`` for publish's check.
    With ``failed_too`` (``build --validate``, which re-validates it) it is delivered."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(cache.key_locks(ws.cache, key))
        except OSError as exc:  # NotRegular too: a lock that is a symlink, a FIFO, a directory
            where = Path(exc.filename) if isinstance(exc.filename, str) \
                else ws.cache / "locks" / f"{key}.lock"
            raise cache.os_error(where, "cannot take the build lock", exc,
                                 hint="check that the cache directory (--cache-dir / "
                                 "ROCMBUILD_CACHE_DIR) is a writable directory, and remove "
                                 "what stands at the lock's path") from exc
        yield _serve(ws, key, wheel_dir, failed_too) if look else None


def _serve(ws: Workspace, key: str, wheel_dir: Path, failed_too: bool) -> Hit | None:
    try:
        return _serve_checked(ws, key, wheel_dir, failed_too)
    except cache.Corrupt as exc:  # a stamp vouched for bytes that are not the recorded ones
        log.warn(f"{exc.message}; rebuilding")
        return None


def _serve_checked(ws: Workspace, key: str, wheel_dir: Path, failed_too: bool) -> Hit | None:
    entry = cache.lookup(ws.cache, key)
    if entry is None:
        return None
    broken = ws.broken / entry.wheel.name
    in_broken = cache.same_bytes(broken, entry)  # hashed only when broken/ has that name
    if entry.validation.status != "failed" and in_broken:
        entry = cache.record_validation(ws.cache, entry, cache.Validation(
            "failed", entry.validation.report, time.time()))
    if entry.validation.status == "failed" and not failed_too:
        if not in_broken:  # keep publish's broken/ check able to refuse it
            cache.copy_to(entry, broken)
        raise ValidationError(
            f"{entry.wheel.name}: the cached wheel failed validation"
            + (f" (report {entry.validation.report})" if entry.validation.report else "")
            + f"; not delivered, a copy is in {ws.broken}",
            hint="fix the cause, then re-validate it with `rocmbuild build ... --validate`, "
            "or rebuild it with --force")
    delivered = cache.deliver(entry, wheel_dir)
    cache.touch(entry)  # its last use, for `cache prune`
    return Hit(entry, delivered)
