"""core.untrusted: the one reader for JSON we did not write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocmbuild.core import untrusted


@pytest.mark.parametrize(("blob", "reason"), [
    (b"[" * 100_000, "nested deeper than 32"),
    (b"[" * 33 + b"]" * 33, "nested deeper than 32"),
    (b'{"a": NaN}', "NaN is not a number"),
    (b'{"a": -Infinity}', "-Infinity is not a number"),
    (b"[1e999]", "1e999 is not a finite number"),
    (b"9" * 400, "more than 19 digits"),
    (b'{"size": 123456789012345678901}', "more than 19 digits"),
    (b'{"size": -123456789012345678901}', r"more than 19 digits \(key 'size'\)"),
    (b'[1, 123456789012345678901234567890]', "more than 19 digits"),
    (b"\xff\xfe{}", "not UTF-8"),
    (bytes(range(256)), "not UTF-8"),
    (b'{"a": 1', "do not pair"),
    (b'{"a": 1,}', "not valid JSON"),
    (b"", "not valid JSON"),
])
def test_refused(blob: bytes, reason: str) -> None:
    with pytest.raises(untrusted.BadJson, match=reason):
        untrusted.loads(blob)


def test_accepted_at_the_depth_limit_and_brackets_inside_strings() -> None:
    assert untrusted.loads(b"[" * 32 + b"]" * 32) is not None
    assert untrusted.loads(b'{"a": ["]]]", "[[[[", "\\"["]}') == {"a": ["]]]", "[[[[", '"[']}
    assert untrusted.loads('{"n": 1234567890123456789, "x": 1.5}') == {
        "n": 1234567890123456789, "x": 1.5}


@pytest.mark.parametrize("value", [
    0.00012345678901234568,  # 21 digits in a row in its repr (the kernel gate's reports)
    -0.00098765432109876543, 1.2345678901234567e-300, 12345678901234567890.5, 1e300])
def test_floats_are_not_counted_by_their_digits(value: float) -> None:
    """json.dumps writes a float's repr: up to 21 digits in a row, which an H200 run's
    kernel-gate report held (its ms and error figures) and the reader once refused."""
    blob = json.dumps({"ms": value, "rows": [value, {"err": value}]})
    assert untrusted.loads(blob) == {"ms": value, "rows": [value, {"err": value}]}
    assert untrusted.loads(f'{{"e": {value!r}, "n": 1e-00000000000000000001}}')["e"] == value


def test_read_json_refuses_what_is_not_a_small_regular_file(tmp_path: Path) -> None:
    (tmp_path / "ok.json").write_text('{"a": 1}')
    assert untrusted.read_json(tmp_path / "ok.json", 100) == {"a": 1}
    os.symlink(tmp_path / "ok.json", tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "big.json").write_text("[" + "1," * 100 + "1]")
    for name, reason in [("link.json", "symbolic link"), ("fifo.json", "not a regular file"),
                         ("dir.json", "not a regular file"), ("big.json", "larger than 100")]:
        with pytest.raises(untrusted.BadJson, match=reason):
            untrusted.read_json(tmp_path / name, 100)  # a FIFO would hang a plain open()
    with pytest.raises(FileNotFoundError):
        untrusted.read_json(tmp_path / "missing.json", 100)


def test_typed_getters_name_the_value() -> None:
    assert untrusted.number(2.5, "runs[0].tflops", 0, 1e6) == 2.5
    for bad in (float("nan"), float("inf"), -1, True, "3"):
        with pytest.raises(untrusted.BadJson, match=r"runs\[0\].tflops"):
            untrusted.number(bad, "runs[0].tflops", 0, 1e6)
    with pytest.raises(untrusted.BadJson, match="cpus"):
        untrusted.integer(10**30, "cpus", 1, 1 << 20)
    with pytest.raises(untrusted.BadJson, match="name"):
        untrusted.text("a\0b", "name")
    with pytest.raises(untrusted.BadJson, match="host"):
        untrusted.obj([], "host")
    with pytest.raises(untrusted.BadJson, match="ok"):
        untrusted.flag(1, "ok")
