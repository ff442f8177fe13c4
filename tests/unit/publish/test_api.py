"""Fast in-process checks of the publish helpers (no servers, no subprocesses)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from rocmbuild.core.errors import PublishError, UsageError
from rocmbuild.publish.api import PromoteOptions, PublishOptions, parse_pin, promote, publish
from rocmbuild.publish.checks import (
    Identity,
    check_not_broken,
    read_wheel_for_publish,
    valid_project_name,
)
from rocmbuild.publish.static_index import STEPS, StaticIndex
from rocmbuild.publish.target import parse_index
from rocmbuild.publish.upload import Credentials, credentials


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return path


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
    with pytest.raises(UsageError, match="--stage"):
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


@pytest.mark.parametrize(
    ("value", "path", "url"),
    [
        ("/srv/wheels", "/srv/wheels", None),
        ("  ./idx ", "idx", None),
        ("file:///srv/wheels", "/srv/wheels", None),
        ("FILE://localhost/srv/w%20x", "/srv/w x", None),
        ("HTTPS://u:p%40ss@Host:8443/up/", None, "https://host:8443/up/"),
        ("http://[::1]/", None, "http://[::1]/"),
    ],
)
def test_parse_index_accepts(value: str, path: str | None, url: str | None) -> None:
    t = parse_index(value)
    assert (str(t.path) if t.path else None, t.url) == (path, url)
    assert "p@ss" not in repr(t) and "p%40ss" not in repr(t)


@pytest.mark.parametrize(
    "value",
    ["https:/u:pw@h/", "file://u:pw@/x", "file://host/x", "ftp://h/", "u:pw@h:/x", "//h/x",
     "/x/u:pw@h", "https://u:p/w@h/", "https://h:0x1/", "https:///x", "https://h/?q", "a\nb",
     "", "  "],
)
def test_parse_index_refuses(value: str) -> None:
    with pytest.raises(UsageError, match="^--index: ") as exc:
        parse_index(value)
    assert "pw" not in exc.value.message + str(exc.value.hint)


def test_identity_is_what_pip_sees() -> None:
    a = Identity.of_filename("okpkg-1.0-py3-none-any.whl")
    assert a is not None
    for same in ["OkPkg-1.0-py3-none-any.whl", "okpkg-1.0.0-py3-none-any.whl",
                 "ok_pkg-1.0-py2.py3-none-any.whl".replace("ok_pkg", "okpkg")]:
        other = Identity.of_filename(same)
        assert other is not None and a.clashes(other), same
    for differs in ["okpkg-1.0-1-py3-none-any.whl", "okpkg-1.0-cp311-cp311-linux_x86_64.whl",
                    "okpkg-1.0.post1-py3-none-any.whl", "okpkg2-1.0-py3-none-any.whl"]:
        other = Identity.of_filename(differs)
        assert other is not None and not a.clashes(other), differs
    assert Identity.of_filename("okpkg-1.0.tar.gz") is None


@pytest.mark.parametrize("name", ["..", "_", "-", "a/b", "a-", ".a", ""])
def test_invalid_project_names(name: str) -> None:
    assert not valid_project_name(name)
    with pytest.raises(UsageError, match="not a valid project name"):
        parse_pin(f"{name}==1.0")


@pytest.mark.parametrize(("spec", "said"), [
    ("a==", "'a==' is not NAME==VERSION"), ("a==1==2", "'a==1==2' is not NAME==VERSION"),
    ("a==  ", "is not NAME==VERSION"), ("a===1", "'=1' in 'a===1' is not a valid version"),
    ("a==one", "'one' in 'a==one' is not a valid version"),
])
def test_bad_promote_specs_are_usage_errors(spec: str, said: str) -> None:
    with pytest.raises(UsageError, match=re.escape(said)):
        parse_pin(spec)


def test_promote_to_its_own_stage_and_empty_stages_are_usage_errors(tmp_path: Path) -> None:
    """The command line's mistakes (exit 2), before the index is read: not publish errors."""
    base = {"index": str(tmp_path / "i"), "project": "demo", "version": "1.0"}
    with pytest.raises(UsageError, match="--from and --to are both 'staging'"):
        promote(PromoteOptions(**base, from_stage="staging", to_stage="staging"))
    with pytest.raises(UsageError, match="'x' is not a valid version"):
        promote(PromoteOptions(**{**base, "version": "x"}))
    for where in ("from_stage", "to_stage"):
        with pytest.raises(UsageError, match="invalid stage name ''"):
            promote(PromoteOptions(**base, **{where: ""}))
    w = _wheel(tmp_path, "demo", "1.0")
    for index in (str(tmp_path / "i"), "https://u:pw@127.0.0.1:9/"):
        with pytest.raises(UsageError, match="^--stage: invalid stage name ''$"):
            publish([w], PublishOptions(index=index, stage=""))
    assert not (tmp_path / "i").exists()


def test_a_build_only_wheel_is_refused_by_publish_and_promote(tmp_path: Path) -> None:
    """A wheel built against a build-only ROCm torch (its label's ``buildonly`` mark; its
    provenance may be stripped) is refused by publish(), the call the nightly's cell makes too
    (nightly/cell.py), and by promote() even when something else put it into a stage: here
    the stack's scratch index path (``build_only_scratch``), the one way in."""
    src = tmp_path / "src"
    src.mkdir()
    bad = _wheel(src, "demo", "1.0+rocm7.2.buildonly.gfx942")
    index = str(tmp_path / "index")
    with pytest.raises(PublishError, match=r"never published: its label says buildonly"):
        publish([bad], PublishOptions(index=index, stage="staging"))
    assert not (tmp_path / "index" / "staging" / "files").exists()
    publish([bad], PublishOptions(index=index, stage="staging", build_only_scratch=True))
    with pytest.raises(PublishError, match=r"never published: its label says buildonly"):
        promote(PromoteOptions(index=index, project="demo", version="1.0+rocm7.2.buildonly.gfx942"))
    assert not (tmp_path / "index" / "stable").exists() or not list(
        (tmp_path / "index" / "stable").rglob("*.whl"))
