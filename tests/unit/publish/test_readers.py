"""The publish side's readers of JSON from elsewhere against bad bytes: the index server's
PEP 691 pages (upload._parse_page: a garbled reply, retried, never a traceback) and the static
index's own pages on disk (generation.read_json: a PublishError naming the file and key), plus
PyPI's JSON for the drift report (sources.upstream). No server is needed: the bytes go to the
reader functions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.core.errors import FetchError, PublishError
from rocmbuild.publish import generation, upload
from rocmbuild.sources import upstream

HUGE = "9" * 400
SHA = "a" * 64
BAD_BYTES: list[tuple[bytes, str]] = [
    (b"[" * 100_000, "nested deeper than 32"),
    (bytes(range(128, 256)), "not UTF-8"),
    (b'{"files": [], "x": NaN}', "NaN is not a number"),
    (b'{"files": [], "x": ' + HUGE.encode() + b"}", "more than 19 digits (key 'x')"),
    (b'{"files": [', "do not pair"),
]


@pytest.mark.parametrize(("blob", "words"), [
    *BAD_BYTES,
    (b'{"files": 5}', "files: expected a list"),
    (b'{"files": [5]}', "files[0]: expected an object"),
    (b'{"files": [{"filename": 5, "url": "x"}]}', "files[0].filename"),
    (b'{"files": [{"filename": "a.whl", "url": "x", "hashes": []}]}', "files[0].hashes"),
    (b'{"nofiles": []}', "no files"),
])
def test_server_page_bad_json(blob: bytes, words: str) -> None:
    with pytest.raises(upload._Garbled, match="not a PEP 691 JSON page") as info:
        upload._parse_page(blob, "application/vnd.pypi.simple.v1+json", "http://h/simple/a/")
    assert words in str(info.value), str(info.value)


def test_server_page_good_json() -> None:
    page = {"files": [{"filename": "a-1.0-py3-none-any.whl", "url": "../../f/a.whl",
                       "hashes": {"sha256": SHA}}]}
    got = upload._parse_page(json.dumps(page).encode(), "application/json", "http://h/s/a/")
    assert got == [("a-1.0-py3-none-any.whl", "http://h/f/a.whl", SHA)]


ENTRY: dict[str, Any] = {"filename": "a-1.0-py3-none-any.whl", "url": "../../files/a.whl",
                         "hashes": {"sha256": SHA}, "requires-python": None, "size": 10,
                         "upload-time": "2026-01-01T00:00:00.000000Z",
                         "core-metadata": {"sha256": SHA}, "yanked": False}


def test_index_page_good(tmp_path: Path) -> None:
    p = tmp_path / "index.json"
    p.write_text(json.dumps({"name": "a", "files": [ENTRY]}))
    assert generation.read_json(p) == {"name": "a", "files": [ENTRY]}
    assert generation.read_json(tmp_path / "absent.json") is None


@pytest.mark.parametrize(("blob", "words"), [
    *BAD_BYTES,
    (json.dumps({"files": [{**ENTRY, "size": -1}]}).encode(), "files[0].size"),
    (json.dumps({"files": [{**ENTRY, "size": 10.5}]}).encode(), "files[0].size"),
    (json.dumps({"files": [{**ENTRY, "filename": "x"}]}).encode(), "files[0].filename"),
    (json.dumps({"files": [{**ENTRY, "hashes": {"sha256": "zz"}}]}).encode(),
     "files[0].hashes.sha256"),
    (json.dumps({"files": [{**ENTRY, "upload-time": 5}]}).encode(), "files[0].upload-time"),
    (json.dumps({"files": [{**ENTRY, "core-metadata": {"sha256": 1}}]}).encode(),
     "files[0].core-metadata.sha256"),
    (json.dumps({"projects": [{"name": "a", "_latest": "1", "_files": 1e30}]}).encode(),
     "projects[0]._files"),
    (json.dumps({"projects": {"a": 1}}).encode(), "projects: expected a list"),
])
def test_index_page_bad(tmp_path: Path, blob: bytes, words: str) -> None:
    p = tmp_path / "index.json"
    p.write_bytes(blob)
    with pytest.raises(PublishError) as info:
        generation.read_json(p)
    assert info.value.message.startswith(f"{p}: ") and words in info.value.message
    assert info.value.hint


def test_index_page_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "index.json")
    with pytest.raises(PublishError, match="is not a regular file"):
        generation.read_json(tmp_path / "index.json")


@pytest.mark.parametrize(("blob", "words"), BAD_BYTES[:4])
def test_pypi_json_bad(blob: bytes, words: str) -> None:
    with pytest.raises(FetchError, match="not PEP 691 JSON") as info:
        upstream.sdist_releases("demo", "https://pypi.example/simple/", lambda url: blob)
    assert words in info.value.message
