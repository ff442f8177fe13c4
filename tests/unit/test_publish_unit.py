"""Fast in-process checks of the publish helpers (no servers, no subprocesses)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rocmbuild.errors import PublishError, UsageError
from rocmbuild.publish import PromoteOptions, PublishOptions, parse_pin, promote, publish
from rocmbuild.publish.checks import check_not_broken, read_wheel_for_publish
from rocmbuild.publish.static_index import STEPS, StaticIndex
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


def _wheel(path: Path, name: str, version: str) -> Path:
    return _zip(
        path / f"{name}-{version}-py3-none-any.whl",
        {
            f"{name}/__init__.py": f"V = {version!r}\n",
            f"{name}-{version}.dist-info/METADATA": (
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            ),
        },
    )


def test_publish_and_promote_through_the_typed_api(tmp_path: Path) -> None:
    """publish() and promote() take plain values; both run the same transaction steps."""
    src = tmp_path / "src"
    src.mkdir()
    a, b = _wheel(src, "demo", "1.0"), _wheel(src, "demo", "2.0")
    steps: list[str] = []
    index = str(tmp_path / "index")
    dry = publish([a], PublishOptions(index=index, stage="staging", dry_run=True))
    assert dry.change is not None and [e.file for e in dry.change.added] == [a.name]
    assert not (tmp_path / "index").exists()
    res = publish([a, b], PublishOptions(index=index, stage="staging", on_step=steps.append))
    assert res.change is not None and res.upload is None
    assert [e.file for e in res.change.added] == [a.name, b.name]
    assert steps == list(STEPS)
    assert res.to_json()["pages"][-2:] == ["simple/index.json", "simple/index.html"]
    steps.clear()
    moved = promote(
        PromoteOptions(index=index, project="Demo", version="2.0", on_step=steps.append)
    )
    assert moved.change is not None and [e.file for e in moved.change.added] == [b.name]
    assert steps == list(STEPS)
    stable = tmp_path / "index" / "stable"
    assert sorted(p.name for p in (stable / "files").iterdir()) == [b.name, b.name + ".metadata"]
    assert (stable / "files" / b.name).read_bytes() == b.read_bytes()
    again = publish([a], PublishOptions(index=index, stage="staging", on_step=steps.append))
    assert again.change is not None and not again.change.added
    assert [e.file for e in again.change.unchanged] == [a.name]


def test_option_mismatches_are_usage_errors(tmp_path: Path) -> None:
    w = _wheel(tmp_path, "demo", "1.0")
    with pytest.raises(UsageError, match="--stage"):
        publish([w], PublishOptions(index="http://127.0.0.1:9/", stage="staging"))
    with pytest.raises(UsageError, match="--simple-url"):
        publish([w], PublishOptions(index=str(tmp_path / "i"), simple_url="http://h/simple/"))
    with pytest.raises(UsageError, match="NAME==VERSION"):
        parse_pin("demo-1.0")
    assert parse_pin(" demo == 1.0 ") == ("demo", "1.0")
