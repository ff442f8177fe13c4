"""Wheels that must never reach a user: the label's marks (``label.local``), what a wheel says of
itself (``wheel.unpublishable`` / ``built_build_only``, from real zip files written here) and the
publish check that refuses them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts import label
from rocmbuild.artifacts.wheel import built_build_only, read_wheel, unpublishable
from rocmbuild.core.errors import PublishError
from rocmbuild.publish.checks import check_publishable


def test_marks_sit_between_torch_and_archs() -> None:
    assert label.local("7.2", ["gfx942"], "torch2.13.cxx11abitrue",
                       marks=[label.BUILD_ONLY, label.PARTIAL]) == \
        "rocm7.2.torch2.13.cxx11abitrue.buildonly.partial.gfx942"
    assert label.local("7.2", ["gfx942"]) == "rocm7.2.gfx942"
    assert label.local("7.2", [], "torch2.13.cxx11abitrue", device=False,
                       marks=[label.BUILD_ONLY]) == "torch2.13.cxx11abitrue.buildonly"
    assert label.marks_of("rocm7.2.torch2.13.cxx11abitrue.buildonly.gfx942") == ["buildonly"]
    assert label.marks_of("rocm7.2.partial.gfx942") == ["partial"]
    assert label.marks_of("rocm7.2.gfx942") == []


def _wheel(tmp: Path, version: str, prov: dict[str, object] | None) -> Path:
    name = f"demo-{version}-py3-none-any.whl"
    di = f"demo-{version}.dist-info"
    with zipfile.ZipFile(tmp / name, "w") as zf:
        zf.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: demo\nVersion: {version}\n")
        zf.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("demo/__init__.py", "")
        if prov is not None:
            zf.writestr(f"{di}/rocmbuild.json", json.dumps(prov))
    return tmp / name


@pytest.mark.parametrize(("version", "prov", "why", "build_only"), [
    ("1.0+rocm7.2.gfx942", {"recipe": "demo"}, [], False),
    ("1.0+rocm7.2.gfx942", None, [], False),
    ("1.0+rocm7.2.buildonly.gfx942", {"unpublishable": ["built against a build-only torch"],
                                      "torch": {"build_only": True}},
     ["built against a build-only torch"], True),
    # provenance stripped: the label still says so
    ("1.0+rocm7.2.buildonly.partial.gfx942", None, ["its label says buildonly and partial"],
     True),
    # provenance that says so without the label (renamed file): still refused
    ("1.0+rocm7.2.gfx942", {"unpublishable": ["partial: ck_units=smoke"]},
     ["partial: ck_units=smoke"], False),
    # a wrong type is not a way around it
    ("1.0+rocm7.2.gfx942", {"unpublishable": 7}, ["rocmbuild.json: unpublishable (unreadable)"],
     False),
])
def test_what_a_wheel_says_of_itself(tmp_path: Path, version: str,
                                     prov: dict[str, object] | None, why: list[str],
                                     build_only: bool) -> None:
    info = read_wheel(_wheel(tmp_path, version, prov))
    assert unpublishable(info) == why
    assert built_build_only(info) is build_only
    if why:
        with pytest.raises(PublishError, match=r"never published: ") as exc:
            check_publishable([info])
        assert info.path.name in exc.value.message
    else:
        check_publishable([info])
