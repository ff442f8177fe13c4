"""Content-addressed wheel cache: ``<cache>/wheels/<key>/`` holds the tagged wheel and
``entry.json``. The key (Plan.cache_key) covers the rendered recipe, source pin, patch hashes,
archs, variant, toolchain versions, Python tag and torch version, so a hit means the same inputs.
Entries are written to a temp directory, fsynced and renamed into place: a reader never sees half
of one, and a crash never leaves a torn one behind.

The cache is not trusted on a hit. ``lookup`` checks ``entry.json``'s shape (every key, its type),
that the wheel it names is a plain file name of a regular file inside the entry (no ``/``, no
``..``, no symlink) of the recorded size, and hashes the wheel unless its verified stamp
(``cache.stamp``: size, mtime, ctime and inode when its bytes last matched) vouches for it. A bad
entry is reported (one warning line naming the entry and what is wrong), discarded, and the caller
rebuilds. What is handed out is always hashed: ``deliver`` puts a *copy* in the wheel dir (a
reflink where the file system has them, never a hard link, so editing a delivered wheel cannot
change the cache) and hashes the bytes it put there, as ``copy_to`` does; bytes that are not the
recorded ones are never delivered (``Corrupt``: the entry is discarded). So a hit proves its bytes
where they are used, and a lookup that only decides "unchanged" (the nightly's SKIP) reads none.

An entry may also hold ``build.json``, the build record: what describes that one build and not
the wheel's inputs (stage timings, MAX_JOBS, the backend's own wheel, the host's CPUs and
memory). ``deliver`` puts it beside the wheel as ``<wheel>.build.json``; it is never inside the
wheel, so that two builds of the same inputs give the same bytes.

Each entry records its validation outcome (``passed``, ``failed``, ``not validated``) and the
report it came from; the pipeline refuses to hand back a failed wheel silently. A pass whose
kernel gate had kernels to check and no GPU to run them on (``build --validate`` on a CPU host)
says so (``needs_gpu``): the nightly does not count it as validated.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from rocmbuild.cache import stamp
from rocmbuild.core import fsutil, lock, log, untrusted
from rocmbuild.core.errors import CacheError
from rocmbuild.core.log import escape

ValidationStatus = Literal["passed", "failed", "not validated"]
VALIDATION_STATES: tuple[ValidationStatus, ...] = ("passed", "failed", "not validated")

ENTRY_MAX_BYTES = 64 * 1024  # an entry.json is a few hundred bytes; anything huge is not ours
_WHEEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+!-]*\.whl")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FICLONE = 0x40049409  # linux/fs.h: share the extents of another file (btrfs, xfs, bcachefs)
_HINT = ("check free disk and permissions of the cache directory "
         "(--cache-dir / ROCMBUILD_CACHE_DIR)")


UNRECORDED_GATE = ("validated by a rocmbuild that did not record whether the kernel gate ran "
                   "(no needs_gpu in the entry): validate it again")
NEEDS_GPU_MAX = 500
"""The longest ``Validation.needs_gpu`` kept (characters; the pipeline cuts the gate's reason)."""


@dataclass(frozen=True)
class Validation:
    """A cache entry's validation outcome and the report that decided it."""

    status: ValidationStatus
    report: str | None = None  # the Markdown report of the run that decided it
    at: float | None = None  # when (seconds since the epoch)
    needs_gpu: str = ""
    """Why the kernel gate could not run where this was decided: it had kernels to check and
    no GPU (``KernelsSummary.needs_a_gpu()``, ``no GPU: ...``); "" when it ran or had nothing
    to check. An entry written before there was this field says nothing of its gate: a pass
    read from one gets ``UNRECORDED_GATE`` here, so it is never counted as fully validated."""

    @property
    def fully_passed(self) -> bool:
        """Passed, its kernel gate run (or with nothing to check): what the nightly counts as
        validated (a pass without a GPU for the gate is not)."""
        return self.status == "passed" and not self.needs_gpu

    def to_json(self) -> dict[str, Any]:  # needs_gpu always: its absence marks an older entry
        return {"status": self.status, "report": self.report, "at": self.at,
                "needs_gpu": self.needs_gpu}


NOT_VALIDATED = Validation("not validated")


@dataclass(frozen=True)
class Entry:
    """A checked cache entry: its key, wheel and entry.json. ``checked_by``: how the lookup
    knew the wheel's bytes, hashed (``sha256``) or by its verified stamp (``stamp``); delivery
    hashes them either way."""

    key: str
    wheel: Path
    sha256: str
    size: int
    validation: Validation
    meta: dict[str, Any]  # the checked entry.json as stored
    checked_by: Literal["sha256", "stamp"] = "sha256"


class BadEntry(Exception):
    """entry.json or the wheel it names is not what the cache writes (internal to this module)."""


class Corrupt(CacheError):
    """The cached wheel's bytes, read while handing them out, are not the recorded ones: nothing
    was delivered and the entry is discarded (``deliver.held`` rebuilds)."""


def _dir(cache: Path, key: str) -> Path:
    return cache / "wheels" / key


def os_error(path: Path, what: str, exc: OSError, hint: str = _HINT) -> CacheError:
    """CacheError for an OSError on ``path``: one line naming the path (or the file in the way)
    and what could not be done."""
    blocker = fsutil.in_the_way(path) if exc.errno in (errno.EEXIST, errno.ENOTDIR) else None
    if blocker is not None:
        return CacheError(f"{blocker}: is a file, not a directory: {what}", hint=hint)
    return CacheError(f"{path}: {what}: {exc.strerror or type(exc).__name__}", hint=hint)


# -- checking an entry ---------------------------------------------------------------------------

def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


# key -> (check, what it must be); "wheel", "sha256", "size" are required
_FIELDS: dict[str, tuple[Any, str]] = {
    "wheel": (lambda v: isinstance(v, str) and _WHEEL_NAME.fullmatch(v) is not None,
              "a wheel file name (no '/', no '..', ending in .whl)"),
    "sha256": (lambda v: isinstance(v, str) and _SHA256.fullmatch(v) is not None,
               "64 lowercase hex digits"),
    "size": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
             "a positive integer"),
    "stored_at": (_is_number, "a number"),
    "duration_s": (_is_number, "a number"),
    "recipe": (lambda v: isinstance(v, str), "a string"),
    "variant": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "archs": (lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
              "a list of strings"),
    "validation": (lambda v: isinstance(v, dict), "a table"),
}
_REQUIRED = ("wheel", "sha256", "size")


def _check_validation(v: dict[str, Any]) -> Validation:
    extra = sorted(set(v) - {"status", "report", "at", "needs_gpu"})
    if extra:
        raise BadEntry(f"validation: unknown key {escape(repr(extra[0]))}")
    status = v.get("status")
    if status not in VALIDATION_STATES:
        raise BadEntry(f"validation.status: must be one of {', '.join(VALIDATION_STATES)}")
    report = v.get("report")
    if report is not None and not isinstance(report, str):
        raise BadEntry("validation.report: must be a string or null")
    at = v.get("at")
    if at is not None and not _is_number(at):
        raise BadEntry("validation.at: must be a number or null")
    needs_gpu = v.get("needs_gpu", UNRECORDED_GATE if status == "passed" else "")
    if not isinstance(needs_gpu, str) or len(needs_gpu) > NEEDS_GPU_MAX:
        raise BadEntry(f"validation.needs_gpu: must be a string of at most {NEEDS_GPU_MAX} "
                       "characters")
    return Validation(cast(ValidationStatus, status), report, at, needs_gpu)


def _check_meta(meta: object) -> tuple[dict[str, Any], Validation]:
    if not isinstance(meta, dict):
        raise BadEntry(f"entry.json: must be a JSON object, not {type(meta).__name__}")
    for key in _REQUIRED:
        if key not in meta:
            raise BadEntry(f"entry.json: missing key {key!r}")
    for key, value in meta.items():
        if key not in _FIELDS:
            raise BadEntry(f"entry.json: unknown key {escape(repr(key)[:80])}")
        check, what = _FIELDS[key]
        if not check(value):
            raise BadEntry(f"entry.json: {key}: must be {what}")
    validation = _check_validation(meta["validation"]) if "validation" in meta else NOT_VALIDATED
    return meta, validation


def _open_regular(path: Path, what: str) -> tuple[int, os.stat_result]:
    """An fd on ``path`` when it is a regular file (``fsutil.open_regular``: never through a
    symlink, never blocking on a FIFO); BadEntry naming ``what`` otherwise."""
    try:
        fd = fsutil.open_regular(path)
    except FileNotFoundError:
        raise BadEntry(f"{what} is missing") from None
    except fsutil.NotRegular as exc:
        raise BadEntry(f"{what} {exc.strerror}") from None
    return fd, os.fstat(fd)


def _read_entry_json(d: Path) -> object:
    """entry.json's value, read once through ``core.untrusted`` (a regular file, capped, UTF-8,
    nesting and numbers bounded); BadEntry when it is none of that."""
    try:
        return untrusted.read_json(d / "entry.json", ENTRY_MAX_BYTES)
    except FileNotFoundError:
        raise BadEntry("entry.json is missing") from None
    except untrusted.BadJson as exc:
        raise BadEntry(f"entry.json: {exc}") from None


def _hash_wheel(path: Path, size: int, vouch: str | None = None) -> str | None:
    """sha256 of the regular file ``path`` (never through a symlink), checking its size first;
    None, reading no byte, when ``path``'s verified stamp vouches for the sha256 ``vouch``. A
    full hash that gives ``vouch`` stamps the file."""
    fd, st = _open_regular(path, "the wheel it names")
    if st.st_size != size:
        os.close(fd)
        raise BadEntry(f"the wheel is {st.st_size} bytes, entry.json records {size}")
    if vouch is not None and stamp.trusted(stamp.read(path.parent), st, vouch):
        os.close(fd)
        return None
    began = stamp.now()
    with os.fdopen(fd, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    if digest == vouch:
        stamp.write(path.parent, stamp.of(st, digest, began))
    return digest


def _check(d: Path, key: str) -> Entry:
    st = d.lstat()  # FileNotFoundError: a miss
    if not stat.S_ISDIR(st.st_mode):
        raise BadEntry("the entry is not a directory (a symlink or a file)")
    meta, validation = _check_meta(_read_entry_json(d))
    wheel = d / meta["wheel"]
    if wheel.parent != d:  # the name pattern already excludes '/', this is the belt to its braces
        raise BadEntry("wheel: names a path outside the entry")
    digest = _hash_wheel(wheel, meta["size"], vouch=meta["sha256"])
    if digest is not None and digest != meta["sha256"]:
        raise BadEntry(f"the wheel's sha256 is {digest}, entry.json records {meta['sha256']}")
    return Entry(key, wheel, meta["sha256"], meta["size"], validation, meta,
                 "sha256" if digest is not None else "stamp")


def lookup(cache: Path, key: str) -> Entry | None:
    """The checked entry for ``key`` (its wheel hashed, or vouched for by its verified stamp),
    or None: a miss, or a bad entry (reported and discarded). Raises CacheError only when the
    cache itself cannot be read (permissions, I/O)."""
    d = _dir(cache, key)
    try:
        return _check(d, key)
    except FileNotFoundError:
        return None  # no entry: a miss
    except NotADirectoryError:
        return None  # <cache>/wheels is a file: store() reports it
    except BadEntry as bad:
        log.warn(f"cache entry {escape(str(d))}: {bad}; discarding it and rebuilding")
        discard(cache, key)
        return None
    except OSError as exc:
        raise os_error(d, "cannot read the cache entry", exc) from exc


def hit_line(entry: Entry) -> str:
    """What a build says of a cache hit (one line, rich markup escaped)."""
    return (f"cache hit {escape(str(entry.wheel.parent))}: sha256 verified; validation: "
            f"{entry.validation.status}")


def discard(cache: Path, key: str) -> None:
    """Remove the entry for ``key`` (whatever is at its place: directory, symlink, file)."""
    d = _dir(cache, key)
    try:
        if d.is_symlink() or not d.is_dir():
            d.unlink(missing_ok=True)
            return
        # take it out of view atomically, then delete at leisure
        gone = d.parent / f"{fsutil.TMP_PREFIX}discard-{key[:12]}-{os.getpid()}"
        os.replace(d, gone)
        shutil.rmtree(gone)
    except OSError as exc:
        raise os_error(d, "cannot discard the bad cache entry", exc) from exc


# -- writing -------------------------------------------------------------------------------------

def _clone_or_copy(src: Path, dst: Path) -> str:
    """Copy ``src`` to the new file ``dst``: a reflink (shared extents, copy-on-write) where the
    file system supports it, else a plain copy. Never a hard link, never through a symlink.
    Returns the sha256 of the bytes now at ``dst``, read once (while copying, or from the
    clone)."""
    sfd = fsutil.open_regular(src)
    try:
        dfd = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                fcntl.ioctl(dfd, _FICLONE, sfd)
                cloned = True
            except OSError:
                cloned = False  # no reflinks here (ext4, tmpfs, overlayfs, another fs): copy
            if cloned:
                with os.fdopen(dfd, "rb", closefd=False) as f:
                    return hashlib.file_digest(f, "sha256").hexdigest()
            h = hashlib.sha256()
            with os.fdopen(sfd, "rb", closefd=False) as fin, \
                    os.fdopen(dfd, "wb", closefd=False) as fout:
                while chunk := fin.read(1 << 20):
                    h.update(chunk)
                    fout.write(chunk)
            return h.hexdigest()
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _verified_copy(entry: Entry, dest: Path) -> None:
    """Put the cached wheel's bytes at ``dest`` atomically, hashing them on the way: Corrupt
    (the entry discarded, ``dest`` untouched) when they are not the recorded ones."""
    with fsutil.atomic_path(dest) as tmp:  # removed again on the raise
        digest = _clone_or_copy(entry.wheel, tmp)
        if digest != entry.sha256:
            d = entry.wheel.parent
            discard(d.parent.parent, entry.key)
            raise Corrupt(f"cache entry {escape(str(d))}: the wheel's sha256 is {digest}, "
                          f"entry.json records {entry.sha256}; not delivered, the entry is "
                          "discarded", hint="the cached bytes changed under an unchanged stat "
                          "(disk or file system corruption?): check the disk; the next build "
                          "rebuilds it")


def _entry_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, indent=2, sort_keys=True)


@contextmanager
def _asos_error(path: Path, what: str, hint: str = _HINT) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise os_error(path, what, exc, hint) from exc


MEMO_DIR = "memo"
"""In the cache: the no-op rebuild's memos (``rocmbuild.commands.noop_memo``), one small JSON
file per command line; hints only, emptied by every ``cache prune``."""

PRUNE_LOCK = "prune.lock"
"""In ``<cache>/locks/``: every build holds it shared; ``rocmbuild cache prune`` takes it
exclusively (never waiting) before it removes downloads and git mirrors any build may use."""


@contextmanager
def key_locks(cache: Path, key: str) -> Iterator[None]:
    """The locks a build or a hit of ``key`` holds: prune's, shared (``cache prune`` removes
    nothing a build may use meanwhile), and the key's own, exclusive (two builds of the same
    inputs share a source tree: the second waits, then finds the first one's wheel)."""
    locks = cache / "locks"
    with lock.held(locks / PRUNE_LOCK, "a running `rocmbuild cache prune`", shared=True), \
            lock.held(locks / f"{key}.lock", "another build of the same inputs"):
        yield


def touch(entry: Entry) -> None:
    """Record a use of ``entry`` (its directory's mtime), the last use prune's LRU reads."""
    fsutil.touch(entry.wheel.parent)


RECORD = "build.json"
"""The build record's name inside an entry; delivered as ``<wheel>.build.json``."""


def record_name(wheel_name: str) -> str:
    """The delivered build record's file name beside ``wheel_name``."""
    return f"{wheel_name}.build.json"


def store(cache: Path, key: str, wheel: Path, sha256: str, meta: dict[str, Any], *,
          validation: Validation = NOT_VALIDATED, keep_source: bool = False,
          record: dict[str, Any] | None = None) -> Entry:
    """Put ``wheel`` into the cache as the entry for ``key`` (moved, or copied with
    ``keep_source``), with its build ``record`` when given, replacing any entry there. All of
    it, or nothing: on any error no partial entry is left, and CacheError names the path."""
    import tempfile  # a hit stores nothing

    final = _dir(cache, key)
    with _asos_error(final.parent, "cannot create the cache directory"):
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{fsutil.TMP_PREFIX}{key[:12]}-"))
    try:
        with _asos_error(final, "cannot store the wheel"):
            if keep_source:
                _clone_or_copy(wheel, tmp / wheel.name)
            else:
                shutil.move(str(wheel), tmp / wheel.name)  # a copy when on another disk
            fsutil.fsync_file(tmp / wheel.name)
            full = {
                **meta,
                "wheel": wheel.name,
                "sha256": sha256,
                "size": (tmp / wheel.name).stat().st_size,
                "stored_at": time.time(),
                "validation": validation.to_json(),
            }
            _check_meta(json.loads(_entry_json(full)))  # never write what lookup would refuse
            fsutil.write_atomic(tmp / "entry.json", _entry_json(full))
            if record is not None:
                fsutil.write_atomic(tmp / RECORD, _entry_json(record))
            if final.is_symlink() or final.exists():
                discard(cache, key)  # --force rebuild, or a bad entry: replace it
            os.replace(tmp, final)
            fsutil.fsync_dir(final.parent)
    except BadEntry as bad:  # a bug of ours (e.g. a recipe name that is not a string)
        raise CacheError(f"{final}: refusing to write a bad entry: {bad}",
                         hint="please report this") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Entry(key, final / wheel.name, sha256, full["size"], validation, full)


def record_validation(cache: Path, entry: Entry, validation: Validation) -> Entry:
    """Rewrite ``entry``'s entry.json with a new validation outcome (atomically)."""
    meta = {**entry.meta, "validation": validation.to_json()}
    path = _dir(cache, entry.key) / "entry.json"
    with _asos_error(path, "cannot record the validation outcome"):
        fsutil.write_atomic(path, _entry_json(meta))
    return Entry(entry.key, entry.wheel, entry.sha256, entry.size, validation, meta)


def deliver(entry: Entry, wheel_dir: Path) -> Path:
    """Put a copy of the cached wheel into ``wheel_dir`` (a reflink where possible), atomically:
    the delivered file and the cache never share an inode, so editing one leaves the other.
    Every byte handed out is hashed: a wheel already there is kept only when it hashes to the
    recorded sha256, a copy only when the bytes copied do (else Corrupt, nothing delivered)."""
    dest = wheel_dir / entry.wheel.name
    hint = "check free disk and permissions of the wheel directory (--wheel-dir / " \
           "ROCMBUILD_WHEEL_DIR)"
    if same_bytes(dest, entry):
        _deliver_record(entry, wheel_dir, hint)
        return dest  # a no-op rebuild: the wheel there is already the recorded bytes
    with _asos_error(wheel_dir, "cannot deliver the wheel into the wheel directory", hint):
        wheel_dir.mkdir(parents=True, exist_ok=True)
        _verified_copy(entry, dest)
    _deliver_record(entry, wheel_dir, hint)
    return dest


def build_record(entry: Entry) -> dict[str, Any] | None:
    """The entry's build record, or None when it has none (or one that is not ours: a regular
    file holding a small JSON object)."""
    try:
        value = untrusted.read_json(entry.wheel.parent / RECORD, ENTRY_MAX_BYTES)
    except (OSError, untrusted.BadJson):
        return None
    return value if isinstance(value, dict) else None


def _deliver_record(entry: Entry, wheel_dir: Path, hint: str) -> None:
    """``<wheel>.build.json`` beside the delivered wheel, when the entry has a record."""
    record = build_record(entry)
    if record is None:
        return
    dest, text = wheel_dir / record_name(entry.wheel.name), _entry_json(record)
    with contextlib.suppress(OSError, ValueError):
        if dest.lstat().st_size == len(text.encode()) and not dest.is_symlink() \
                and dest.read_text(encoding="utf-8") == text:
            return  # a no-op rebuild: already there (no write, no fsync)
    with _asos_error(wheel_dir, "cannot write the build record into the wheel directory", hint):
        fsutil.write_atomic(dest, text)


def same_bytes(path: Path, entry: Entry) -> bool:
    """``path`` is a regular file (not a symlink, not the cache's own inode) holding exactly the
    entry's recorded bytes."""
    try:
        st, own = path.lstat(), entry.wheel.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size \
                or (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino):
            return False  # an old hard link to the cache is replaced by a copy
        return _hash_wheel(path, entry.size) == entry.sha256  # outside the cache: no stamp
    except (OSError, BadEntry):
        return False


def copy_to(entry: Entry, dest: Path) -> None:
    """Put a copy of the cached wheel at ``dest`` (e.g. into broken/), atomically, its bytes
    hashed (Corrupt as for ``deliver``)."""
    with _asos_error(dest.parent, "cannot copy the cached wheel"):
        dest.parent.mkdir(parents=True, exist_ok=True)
        _verified_copy(entry, dest)
