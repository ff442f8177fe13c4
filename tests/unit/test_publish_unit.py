"""Fast in-process checks of the publish helpers (no servers, no subprocesses)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rocmbuild.errors import PublishError
from rocmbuild.publish.static_index import StaticIndex, check_not_broken, read_wheel_for_publish
from rocmbuild.publish.upload import Credentials, credentials, redact


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return path


def test_redact_strips_userinfo() -> None:
    assert redact("https://bob:pw@host:8443/x/?a=1") == "https://host:8443/x/?a=1"
    assert redact("http://host/simple/") == "http://host/simple/"


def test_credentials_precedence_and_repr() -> None:
    assert credentials("http://u:p%40ss@h/", {}) == Credentials("u", "p@ss")
    env = {"TWINE_PASSWORD": "tw", "ROCMBUILD_INDEX_PASSWORD": "rb"}
    c = credentials("http://h/", env)
    assert c.password == "rb"
    assert credentials("http://u:url@h/", {"TWINE_PASSWORD": "tw"}).password == "tw"
    assert "rb" not in repr(c) and "<hidden>" in repr(c)


def test_metadata_name_must_match_filename(tmp_path: Path) -> None:
    w = _zip(
        tmp_path / "good-1.0-py3-none-any.whl",
        {"evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"},
    )
    with pytest.raises(PublishError, match="does not match"):
        read_wheel_for_publish(w)


def test_wheel_without_metadata_or_zip(tmp_path: Path) -> None:
    w = _zip(tmp_path / "a-1.0-py3-none-any.whl", {"a/__init__.py": ""})
    with pytest.raises(PublishError, match="METADATA, found 0"):
        read_wheel_for_publish(w)
    (tmp_path / "b-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(PublishError, match="not a zip"):
        read_wheel_for_publish(tmp_path / "b-1.0-py3-none-any.whl")


def test_broken_rule_by_hash_only_for_same_bytes(tmp_path: Path) -> None:
    meta = "Metadata-Version: 2.1\nName: a\nVersion: 1.0\n"
    w = _zip(tmp_path / "a-1.0-py3-none-any.whl", {"a-1.0.dist-info/METADATA": meta})
    broken = tmp_path / "broken" / "nightly"
    broken.mkdir(parents=True)
    _zip(
        broken / "a-1.0-py3-none-any.whl", {"a-1.0.dist-info/METADATA": meta, "a/x.py": "different"}
    )
    info = read_wheel_for_publish(w)
    check_not_broken([info], tmp_path / "broken")  # same name, other bytes: allowed
    (broken / "copy.whl").write_bytes(w.read_bytes())
    with pytest.raises(PublishError, match="failed validation"):
        check_not_broken([info], tmp_path / "broken")


@pytest.mark.parametrize("stage", ["", ".generations", "a/b", "files", "simple"])
def test_bad_stage_names(tmp_path: Path, stage: str) -> None:
    with pytest.raises(PublishError, match="--stage"):
        StaticIndex(tmp_path).stage_path(stage)


def test_plain_directory_in_place_of_a_stage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "stable").mkdir()
    with pytest.raises(PublishError, match="not a stage symlink"):
        StaticIndex(tmp_path).live("stable")
