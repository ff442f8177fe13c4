"""core.untrusted: the one reader for JSON we did not write."""

from __future__ import annotations

import json
import os
import re
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


@pytest.mark.parametrize(("text", "at"), [
    ("jobs = " + "9" * 5000, "a number of more than 4300 digits"),  # no int() ValueError
    ("jobs = 0x" + "f" * 5000, "jobs: a number of more than 4300 digits"),  # no str() one
    ("[a]\nb = [1, 0o" + "7" * 5000 + "]", "a.b[1]: a number of more than"),
    ("x = 0b1" + "0" * 14400, "x: a number of more than"),
])
def test_toml_integers_python_cannot_print_are_refused(text: str, at: str) -> None:
    with pytest.raises(untrusted.BadToml, match=re.escape(at)):
        untrusted.loads_toml(text.encode())


def test_toml_integers_that_can_be_printed_are_left_to_their_readers() -> None:
    """A 400-digit or 0x-long value that Python can print is the reader's to bound, naming its
    key (``must be at most 1e+09``)."""
    data = untrusted.loads_toml(b"a = 0x" + b"f" * 100 + b"\nb = " + b"9" * 400 + b"\nc = 0xff")
    assert data == {"a": 16**100 - 1, "b": 10**400 - 1, "c": 255}


SECRET = "s3cr3tPw"


def test_credentials_are_found_in_every_place_of_a_parsed_file() -> None:
    """Values, list items, key names, table names, values of any type; the key shown is
    redacted (it may be the URL itself); allowed keys are skipped whatever their type."""
    url = f"https://u:{SECRET}@h.invalid/x"
    data = untrusted.loads_toml(
        f'a = "{url}"\nb = [1, ["{url}"]]\n"{url}" = 1\n[t."{url}"]\n[when]\nv = "{url}"\n'
        f'[publish]\nindex = "{url}"\nother = {{ deep = "see {url} too" }}\n'.encode())
    found = untrusted.credentials(data, "", ("publish.index",))
    assert [k for k, _ in found] == ["a", "b[1][0]", "https://***@h.invalid/x",
                                     "publish.other.deep", "t.https://***@h.invalid/x", "when.v"]
    assert all(SECRET not in k + u for k, u in found)
    assert {u for _, u in found} == {"https://***@h.invalid/x"}


@pytest.mark.parametrize(("text", "shown"), [
    ("ssh://git@h/r", None),                    # an ssh login name is no secret
    ("ssh://git:pw@h/r", "ssh://***@h/r"),
    ("https://h/p@1.0.tar.gz", None),           # an @ in the path
    ("--index-url=https://tok@h/s", "https://***@h/s"),
    ("https://a/x https://u:p@b/y", "https://***@b/y"),
    ("plain text", None),
])
def test_userinfo(text: str, shown: str | None) -> None:
    assert untrusted.userinfo(text) == shown
