"""The stack's mix check (pipeline/stack.mix_problems) on wheels that say which torch they were
built against (their local label and rocmbuild.json), and the publish transaction that carries
a stack's lock files (StaticIndex.publish's ``extra``). Small real wheels written as zips."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.core.errors import PublishError, UsageError
from rocmbuild.pipeline.stack import Built, Publishing, mix_problems, stage_url
from rocmbuild.publish.static_index import StaticIndex
from rocmbuild.recipe import load
from rocmbuild.recipe.stack import Member

RECIPE = load.load(Path(__file__).parents[2] / "recipes" / "stack-pure.toml")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(out: Path, name: str, version: str, torch: dict[str, object] | None) -> Path:
    dist = name.replace("-", "_")
    di = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": b"",
             f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
             .encode(),
             f"{di}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{di}/rocmbuild.json": json.dumps({"archs": ["gfx942"], "torch": torch or {}})
             .encode()}
    rows = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in files.items()]
    files[f"{di}/RECORD"] = ("\n".join([*rows, f"{di}/RECORD,,"]) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def _built(tmp_path: Path, i: int, name: str, label: str, torch: dict[str, object] | None
           ) -> Built:
    w = read_wheel(_wheel(tmp_path, name, f"1.0+{label}", torch))
    return Built(Member(RECIPE, f"members[{i}]"), w, False)


T213 = {"version": "2.13.0+rocm7.2", "cxx11_abi": True}


def test_members_built_against_the_stack_torch_pass(tmp_path: Path) -> None:
    built = [_built(tmp_path, 0, "a-ext", "rocm7.2.torch2.13.cxx11abitrue.gfx942", T213),
             _built(tmp_path, 1, "b-pure", "rocm7.2.gfx942", None)]
    assert mix_problems("ft", "2.13.0+rocm7.2", "the host's", built) == []


def test_a_member_labelled_and_built_for_another_torch_is_named_with_both(tmp_path: Path
                                                                          ) -> None:
    built = [_built(tmp_path, 0, "a-ext", "rocm7.2.torch2.13.cxx11abitrue.gfx942", T213),
             _built(tmp_path, 1, "c-ext", "rocm7.2.torch2.12.cxx11abifalse.gfx942",
                    {"version": "2.12.0+rocm7.2", "cxx11_abi": False})]
    assert mix_problems("ft", "2.13.0+rocm7.2", "the host's", built) == [
        "stack ft: members[1] (stack-pure): c_ext-1.0+rocm7.2.torch2.12.cxx11abifalse.gfx942-py3-"
        "none-any.whl was built against torch 2.12.0+rocm7.2, cxx11abi false; the stack's torch "
        "is 2.13.0+rocm7.2, cxx11abi true (the host's)"]


def test_the_label_alone_and_the_abi_alone_are_a_mix(tmp_path: Path) -> None:
    built = [_built(tmp_path, 0, "a-ext", "rocm7.2.torch2.13.cxx11abitrue.gfx942", T213),
             _built(tmp_path, 1, "d-ext", "rocm7.2.torch2.14.cxx11abitrue.gfx942", None),
             _built(tmp_path, 2, "e-ext", "rocm7.2.torch2.13.cxx11abifalse.gfx942",
                    {"version": "2.13.0+rocm7.2", "cxx11_abi": False})]
    problems = mix_problems("ft", "2.13.0+rocm7.2", "the host's", built)
    assert [p.split(": ")[1] for p in problems] == ["members[1] (stack-pure)",
                                                    "members[2] (stack-pure)"], problems
    assert "built against torch 2.14 (its label rocm7.2.torch2.14.cxx11abitrue.gfx942)" \
        in problems[0]
    assert "built against torch 2.13.0+rocm7.2, cxx11abi false" in problems[1]


def _locks(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*") if p.is_file() and "stacks" in p.parts}


def test_the_lock_files_go_in_the_wheels_transaction(tmp_path: Path) -> None:
    a = read_wheel(_wheel(tmp_path / "w", "a-pure", "1.0+rocm7.2.gfx942", None))
    idx = StaticIndex(tmp_path / "index")
    lock = {"gfx942/stacks/ft/pylock.toml": b"one\n"}
    change = idx.publish([a], "stable", extra=lock)
    assert "gfx942/stacks/ft/pylock.toml" in change.pages
    live = idx.live("stable")
    assert live is not None and _locks(live) == lock
    # the same wheel and the same lock: nothing to do, no new generation
    assert idx.publish([a], "stable", extra=lock).pages == ()
    assert idx.live("stable") == live
    # the same wheel with a new lock: a new generation, the old one untouched until the swap
    change = idx.publish([a], "stable", extra={"gfx942/stacks/ft/pylock.toml": b"two\n"})
    assert change.pages == ("gfx942/stacks/ft/pylock.toml",) and not change.added
    new = idx.live("stable")
    assert new is not None and new != live
    assert _locks(new) == {"gfx942/stacks/ft/pylock.toml": b"two\n"}
    assert (new / "files" / a.filename).is_file()


@pytest.mark.parametrize("rel", ["../x", "files/x", "gfx942/../../x", "x"])
def test_a_lock_path_outside_a_view_is_refused(tmp_path: Path, rel: str) -> None:
    a = read_wheel(_wheel(tmp_path / "w", "a-pure", "1.0", None))
    with pytest.raises(UsageError, match="is not a path under a view directory"):
        StaticIndex(tmp_path / "index").publish([a], "stable", extra={rel: b""})


def test_the_index_url_names_where_the_stage_is_served(tmp_path: Path) -> None:
    idx = str(tmp_path / "index")
    assert stage_url(Publishing(idx, "stable", "https://w.example/r")) == \
        (tmp_path / "index", "https://w.example/r/stable/")
    assert stage_url(Publishing(idx, "staging", "")) == \
        (tmp_path / "index", f"{(tmp_path / 'index').as_uri()}/staging/")


@pytest.mark.parametrize("url", ["https://bob:pw@w.example/", "ftp://w.example/",
                                 "https:///nohost", "https://w.example/?token=1",
                                 "https://w.example/#x", 'https://w.example/"a'])
def test_an_index_url_with_secrets_or_no_host_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(UsageError, match="--index-url: not an http") as info:
        stage_url(Publishing(str(tmp_path / "index"), "stable", url))
    assert "pw" not in info.value.message


def test_a_stack_goes_to_a_directory_index_and_a_valid_stage(tmp_path: Path) -> None:
    with pytest.raises(PublishError, match="a stack is published to a directory index"):
        stage_url(Publishing("https://up.example/legacy/", "stable", ""))
    with pytest.raises(UsageError):
        stage_url(Publishing(str(tmp_path / "index"), "../x", ""))
