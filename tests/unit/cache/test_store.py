"""rocmbuild.cache.store: a hit proves its bytes, entry.json is untrusted, delivery is a copy.

Real files on the real file system (tmp_path); nothing is faked. The crafted entries are what an
attacker with write access to a shared cache, or a torn disk, could leave there."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.cache import store as cache
from rocmbuild.core.errors import CacheError

KEY = "ab" * 32
NAME = "demo-1.0+rocm6.2-py3-none-any.whl"
BYTES = b"PK\x03\x04 pretend wheel bytes " * 100


def _stored(tmp_path: Path, validation: cache.Validation = cache.NOT_VALIDATED) -> cache.Entry:
    src = tmp_path / "work" / NAME
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(BYTES)
    return cache.store(tmp_path / "cache", KEY, src, hashlib.sha256(BYTES).hexdigest(),
                       {"recipe": "demo", "variant": None, "archs": ["gfx942"],
                        "duration_s": 1.5}, validation=validation)


def _entry_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "wheels" / KEY


def _meta(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_entry_dir(tmp_path) / "entry.json").read_text())
    return data


def _write_meta(tmp_path: Path, meta: object) -> None:
    (_entry_dir(tmp_path) / "entry.json").write_text(json.dumps(meta))


def test_store_lookup_roundtrip(tmp_path: Path) -> None:
    e = _stored(tmp_path)
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.sha256 == e.sha256 and hit.wheel.read_bytes() == BYTES
    assert hit.validation.status == "not validated"
    assert not (tmp_path / "work" / NAME).exists()  # moved into the cache
    assert [p.name for p in (tmp_path / "cache" / "wheels").iterdir()] == [KEY]  # no temp left


def test_same_size_corruption_is_not_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    """Today's bug: only the size was compared, so a flipped byte was served as `cached`."""
    e = _stored(tmp_path)
    data = bytearray(BYTES)
    data[100] ^= 0xFF
    e.wheel.write_bytes(bytes(data))
    assert cache.lookup(tmp_path / "cache", KEY) is None
    err = capsys.readouterr().err
    assert f"cache entry {_entry_dir(tmp_path)}" in err and "sha256" in err
    assert "discarding it and rebuilding" in err
    assert not _entry_dir(tmp_path).exists()  # discarded


HOST_SECRET = b"root:x:0:0:host file that must never reach the wheel dir\n"


def _host_file(tmp_path: Path) -> Path:
    p = tmp_path / "host" / "shadow.whl"
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(HOST_SECRET)
    return p


def _craft_meta(change: dict[str, Any]) -> Callable[[Path], None]:
    def craft(tmp_path: Path) -> None:
        meta = _meta(tmp_path)
        for k, v in change.items():
            if v is _DELETE:
                del meta[k]
            else:
                meta[k] = v
        _write_meta(tmp_path, meta)
    return craft


_DELETE = object()


def _raw(blob: bytes) -> Callable[[Path], None]:
    def craft(tmp_path: Path) -> None:
        (_entry_dir(tmp_path) / "entry.json").write_bytes(blob)
    return craft


def _point_at_host_file(name_of: Callable[[Path], str]) -> Callable[[Path], None]:
    """entry.json names the host file, with its real sha256 and size (the strongest forgery)."""
    def craft(tmp_path: Path) -> None:
        host = _host_file(tmp_path)
        meta = _meta(tmp_path)
        meta.update(wheel=name_of(tmp_path), size=len(HOST_SECRET),
                    sha256=hashlib.sha256(HOST_SECRET).hexdigest())
        _write_meta(tmp_path, meta)
        del host
    return craft


def _symlinked_wheel(tmp_path: Path) -> None:
    host = _host_file(tmp_path)
    wheel = _entry_dir(tmp_path) / NAME
    wheel.unlink()
    wheel.symlink_to(host)
    meta = _meta(tmp_path)
    meta.update(size=len(HOST_SECRET), sha256=hashlib.sha256(HOST_SECRET).hexdigest())
    _write_meta(tmp_path, meta)


def _symlinked_entry_json(tmp_path: Path) -> None:
    outside = tmp_path / "host" / "entry.json"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text(json.dumps(_meta(tmp_path)))
    (_entry_dir(tmp_path) / "entry.json").unlink()
    (_entry_dir(tmp_path) / "entry.json").symlink_to(outside)


def _symlinked_entry_dir(tmp_path: Path) -> None:
    d = _entry_dir(tmp_path)
    elsewhere = tmp_path / "host" / "entry"
    elsewhere.parent.mkdir(exist_ok=True)
    os.replace(d, elsewhere)
    d.symlink_to(elsewhere, target_is_directory=True)


def _wheel_is_a_directory(tmp_path: Path) -> None:
    w = _entry_dir(tmp_path) / NAME
    w.unlink()
    w.mkdir()


def _entry_is_a_file(tmp_path: Path) -> None:
    d = _entry_dir(tmp_path)
    for p in d.iterdir():
        p.unlink()
    d.rmdir()
    d.write_text("not a directory")


def _wheel_missing(tmp_path: Path) -> None:
    (_entry_dir(tmp_path) / NAME).unlink()


def _entry_json_missing(tmp_path: Path) -> None:
    (_entry_dir(tmp_path) / "entry.json").unlink()


def _truncated_wheel(tmp_path: Path) -> None:
    (_entry_dir(tmp_path) / NAME).write_bytes(BYTES[:-10])


def _appended_wheel(tmp_path: Path) -> None:
    (_entry_dir(tmp_path) / NAME).write_bytes(BYTES + b"x")


def _fifo(name: str) -> Callable[[Path], None]:
    """``name`` in the entry replaced by a FIFO: opened without waiting, refused (the old
    lookup's open waited for a writer forever)."""
    def craft(tmp_path: Path) -> None:
        path = _entry_dir(tmp_path) / name
        path.unlink()
        os.mkfifo(path)
    return craft


CRAFTED: dict[str, Callable[[Path], None]] = {
    "entry-json-fifo": _fifo("entry.json"),
    "wheel-fifo": _fifo(NAME),
    "random-bytes": _raw(bytes(range(256)) * 16),
    "long-number": _raw(b'{"wheel": "' + NAME.encode() + b'", "sha256": "' + b"ab" * 32
                        + b'", "size": 1' + b"0" * 400 + b"}"),
    "not-json": _raw(b"{not json"),
    "empty-file": _raw(b""),
    "not-utf8": _raw(b'{"wheel": "\xff\xfe"}'),
    "bom": _raw(b"\xef\xbb\xbf{}"),
    "deep-nesting": _raw(b"[" * 100_000 + b"]" * 100_000),
    "huge": _raw(b'{"recipe": "' + b"a" * (cache.ENTRY_MAX_BYTES + 1) + b'"}'),
    "a-list": _raw(b"[]"),
    "a-string": _raw(b'"entry"'),
    "null": _raw(b"null"),
    "missing-wheel": _craft_meta({"wheel": _DELETE}),
    "missing-sha256": _craft_meta({"sha256": _DELETE}),
    "missing-size": _craft_meta({"size": _DELETE}),
    "wheel-not-string": _craft_meta({"wheel": ["a.whl"]}),
    "wheel-nested-object": _craft_meta({"wheel": {"path": NAME}}),
    "wheel-empty": _craft_meta({"wheel": ""}),
    "wheel-dotdot": _craft_meta({"wheel": ".."}),
    "wheel-not-whl": _craft_meta({"wheel": "entry.json"}),
    "wheel-nul": _craft_meta({"wheel": "a\x00.whl"}),
    "sha256-uppercase": _craft_meta({"sha256": "AB" * 32}),
    "sha256-short": _craft_meta({"sha256": "ab" * 8}),
    "sha256-number": _craft_meta({"sha256": 12345}),
    "size-string": _craft_meta({"size": str(len(BYTES))}),
    "size-bool": _craft_meta({"size": True}),
    "size-negative": _craft_meta({"size": -1}),
    "size-float": _craft_meta({"size": float(len(BYTES))}),
    "unknown-key": _craft_meta({"link_from": "/etc/passwd"}),
    "archs-not-list": _craft_meta({"archs": "gfx942"}),
    "validation-not-table": _craft_meta({"validation": "passed"}),
    "validation-bad-status": _craft_meta({"validation": {"status": "ok"}}),
    "validation-extra-key": _craft_meta({"validation": {"status": "passed", "x": 1}}),
    "validation-needs-gpu-null": _craft_meta({"validation": {"status": "passed",
                                                             "needs_gpu": None}}),
    "validation-needs-gpu-bool": _craft_meta({"validation": {"status": "passed",
                                                             "needs_gpu": True}}),
    "validation-needs-gpu-list": _craft_meta({"validation": {"status": "passed",
                                                             "needs_gpu": ["no GPU:"]}}),
    "validation-needs-gpu-huge": _craft_meta({"validation": {
        "status": "passed", "needs_gpu": "no GPU: " + "x" * cache.NEEDS_GPU_MAX}}),
    "stored-at-nan": _raw(b'{"wheel": "' + NAME.encode() + b'", "sha256": "' + b"ab" * 32
                          + b'", "size": 1, "stored_at": NaN}'),
    "host-file-absolute": _point_at_host_file(lambda t: str(_host_file(t))),
    "host-file-dotdot": _point_at_host_file(lambda t: "../../../host/shadow.whl"),
    "host-file-slash": _point_at_host_file(lambda t: "sub/shadow.whl"),
    "wheel-symlink-out": _symlinked_wheel,
    "entry-json-symlink": _symlinked_entry_json,
    "entry-dir-symlink": _symlinked_entry_dir,
    "wheel-is-directory": _wheel_is_a_directory,
    "entry-is-file": _entry_is_a_file,
    "wheel-missing": _wheel_missing,
    "entry-json-missing": _entry_json_missing,
    "wheel-truncated": _truncated_wheel,
    "wheel-appended": _appended_wheel,
}


@pytest.mark.parametrize("shape", sorted(CRAFTED))
def test_crafted_entry_is_reported_discarded_never_served(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str) -> None:
    _stored(tmp_path)
    CRAFTED[shape](tmp_path)
    assert cache.lookup(tmp_path / "cache", KEY) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: cache entry "), err
    assert str(_entry_dir(tmp_path)) in err and "discarding it and rebuilding" in err
    assert "Traceback" not in err
    assert not os.path.lexists(_entry_dir(tmp_path))  # discarded
    host = tmp_path / "host"
    if host.exists():  # what the entry pointed at is untouched (a symlinked dir: not emptied)
        assert all(p.exists() for p in host.iterdir())
    # a rebuild can store again at the same place
    _stored(tmp_path)
    assert cache.lookup(tmp_path / "cache", KEY) is not None


def test_deliver_is_a_copy_editing_it_leaves_the_cache(tmp_path: Path) -> None:
    e = _stored(tmp_path)
    out = cache.deliver(e, tmp_path / "wheels")
    assert out.read_bytes() == BYTES
    assert os.stat(out).st_ino != os.stat(e.wheel).st_ino
    with open(out, "r+b") as f:  # edit the delivered wheel in place
        f.write(b"XXXX")
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.wheel.read_bytes() == BYTES
    out2 = cache.deliver(hit, tmp_path / "wheels")  # the next hit puts the good bytes back
    assert out2.read_bytes() == BYTES


def test_record_validation_roundtrip(tmp_path: Path) -> None:
    e = _stored(tmp_path)
    cache.record_validation(tmp_path / "cache", e, cache.Validation("failed", "/r/x.md", 5.0))
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None
    assert hit.validation == cache.Validation("failed", "/r/x.md", 5.0)


NO_GPU = "no GPU: torch.cuda.is_available() is False"


def test_a_pass_whose_gate_had_no_gpu_roundtrips_and_is_not_fully_passed(
        tmp_path: Path) -> None:
    """``build --validate`` on a CPU host: passed, and the gate could not run (its reason)."""
    e = _stored(tmp_path, cache.Validation("passed", "/r/x.md", 5.0, NO_GPU))
    assert _meta(tmp_path)["validation"] == {"status": "passed", "report": "/r/x.md", "at": 5.0,
                                             "needs_gpu": NO_GPU}
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.validation == e.validation
    assert hit.validation.status == "passed" and not hit.validation.fully_passed
    # validated again where the gate ran (a GPU host): the new record drops the reason
    cache.record_validation(tmp_path / "cache", hit, cache.Validation("passed", "/r/y.md", 6.0))
    again = cache.lookup(tmp_path / "cache", KEY)
    assert again is not None and again.validation.fully_passed
    assert _meta(tmp_path)["validation"]["needs_gpu"] == ""


def test_a_pass_whose_gate_ran_records_that_it_did(tmp_path: Path) -> None:
    """``needs_gpu`` is always written ("" : the gate ran, or had nothing to check): its
    absence marks an entry from before the field."""
    _stored(tmp_path, cache.Validation("passed", "/r/x.md", 5.0))
    assert _meta(tmp_path)["validation"] == {"status": "passed", "report": "/r/x.md", "at": 5.0,
                                             "needs_gpu": ""}


def test_a_pass_written_before_needs_gpu_is_not_fully_validated(tmp_path: Path) -> None:
    """An older entry says nothing of its kernel gate: still a pass (delivered, served), never
    counted as GPU-validated (the nightly validates it again)."""
    _stored(tmp_path)
    _craft_meta({"validation": {"status": "passed", "report": "/r/x.md", "at": 5.0}})(tmp_path)
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.validation.status == "passed"
    assert hit.validation.needs_gpu == cache.UNRECORDED_GATE and not hit.validation.fully_passed


def test_a_pass_with_an_empty_needs_gpu_is_fully_validated(tmp_path: Path) -> None:
    _stored(tmp_path)
    _craft_meta({"validation": {"status": "passed", "needs_gpu": ""}})(tmp_path)
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.validation.needs_gpu == "" and hit.validation.fully_passed


@pytest.mark.parametrize(("validation", "fully"), [
    (cache.Validation("passed"), True),
    (cache.Validation("passed", needs_gpu=NO_GPU), False),
    (cache.Validation("failed"), False),
    (cache.NOT_VALIDATED, False),
])
def test_fully_passed(validation: cache.Validation, fully: bool) -> None:
    assert validation.fully_passed is fully


def test_old_entries_without_validation_are_not_validated(tmp_path: Path) -> None:
    _stored(tmp_path)
    _craft_meta({"validation": _DELETE})(tmp_path)
    hit = cache.lookup(tmp_path / "cache", KEY)
    assert hit is not None and hit.validation.status == "not validated"


def _no_partial(tmp_path: Path) -> None:
    for p in (tmp_path / "cache").rglob("*"):
        assert not p.name.startswith(".tmp-"), p
        assert p.name != "entry.json", p


@pytest.mark.parametrize("blocker", ["cache", "cache/wheels"])
def test_store_into_a_file_is_a_cache_error(tmp_path: Path, blocker: str) -> None:
    (tmp_path / blocker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocker).write_text("in the way")
    src = tmp_path / NAME
    src.write_bytes(BYTES)
    with pytest.raises(CacheError) as exc:
        cache.store(tmp_path / "cache", KEY, src, hashlib.sha256(BYTES).hexdigest(), {})
    assert str(tmp_path / blocker) in exc.value.message
    assert exc.value.hint and "--cache-dir" in exc.value.hint
    assert src.read_bytes() == BYTES  # the built wheel is not lost
    assert (tmp_path / blocker).read_text() == "in the way"


def test_deliver_into_a_file_is_a_cache_error(tmp_path: Path) -> None:
    e = _stored(tmp_path)
    (tmp_path / "wheels").write_text("in the way")
    with pytest.raises(CacheError) as exc:
        cache.deliver(e, tmp_path / "wheels")
    assert str(tmp_path / "wheels") in exc.value.message
    assert exc.value.hint and "--wheel-dir" in exc.value.hint
    _no_partial(tmp_path / "wheels-none")


def test_store_keep_source_copies(tmp_path: Path) -> None:
    src = tmp_path / "broken" / NAME
    src.parent.mkdir()
    src.write_bytes(BYTES)
    e = cache.store(tmp_path / "cache", KEY, src, hashlib.sha256(BYTES).hexdigest(), {},
                    keep_source=True, validation=cache.Validation("failed", None, 1.0))
    assert src.read_bytes() == BYTES and os.stat(src).st_ino != os.stat(e.wheel).st_ino


def test_deliver_keeps_an_intact_copy_and_breaks_old_hard_links(tmp_path: Path) -> None:
    e = _stored(tmp_path)
    out = cache.deliver(e, tmp_path / "wheels")
    ino = os.stat(out).st_ino
    assert cache.deliver(e, tmp_path / "wheels") == out and os.stat(out).st_ino == ino  # no-op
    out.unlink()
    os.link(e.wheel, out)  # what earlier versions delivered: the cache's own inode
    cache.deliver(e, tmp_path / "wheels")
    assert os.stat(out).st_ino != os.stat(e.wheel).st_ino and out.read_bytes() == BYTES
    out.unlink()
    out.symlink_to(e.wheel)  # a symlink is replaced too, the cache file is untouched
    cache.deliver(e, tmp_path / "wheels")
    assert not out.is_symlink() and e.wheel.read_bytes() == BYTES


@pytest.mark.parametrize("shape", ["fifo", "symlink", "deep", "random", "a-list"])
def test_a_build_record_that_is_not_ours_is_none_at_once(tmp_path: Path, shape: str) -> None:
    """build.json read through core.untrusted: a FIFO is not waited on, a symlink not
    followed, 100k brackets or random bytes are no record (and no error)."""
    e = _stored(tmp_path)
    record = e.wheel.parent / cache.RECORD
    outside = tmp_path / "outside.json"
    outside.write_text('{"a": 1}')
    if shape == "fifo":
        os.mkfifo(record)
    elif shape == "symlink":
        record.symlink_to(outside)
    elif shape == "deep":
        record.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    elif shape == "random":
        record.write_bytes(bytes(range(256)) * 4)
    else:
        record.write_text("[1, 2]")
    assert cache.build_record(e) is None
    out = cache.deliver(e, tmp_path / "wheels")  # delivered, without a record beside it
    assert out.read_bytes() == BYTES and not (out.parent / cache.record_name(NAME)).exists()
