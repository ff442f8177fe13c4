"""rocmbuild.artifacts.wheel: the one wheel model, read from real zip files written here."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.version import Version

from rocmbuild.artifacts.wheel import WheelFormatError, parse_wheel_name, read_wheel

NAME = "Flash_Attn-2.8.3.post1+rocm6.2-1-cp311-cp311-linux_x86_64.whl"
META = (
    "Metadata-Version: 2.1\n"
    "Name: Flash_Attn\n"
    "Version: 2.8.3.post1+rocm6.2\n"
    "Summary: Flash attention\n"
    "Requires-Python: >=3.9\n"
    "Requires-Dist: torch\n"
    "Requires-Dist: einops ; extra == 'x'\n"
    "\n"
    "Requires-Dist: not-a-header (this is the long description)\n"
)


def _zip(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return path


def test_reads_every_field(tmp_path: Path) -> None:
    di = "Flash_Attn-2.8.3.post1+rocm6.2.dist-info"
    prov = {"recipe": "flash-attn", "archs": ["gfx942"]}
    p = _zip(
        tmp_path / NAME,
        {
            "flash_attn/__init__.py": "",
            "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
            f"{di}/METADATA": META,
            f"{di}/rocmbuild.json": json.dumps(prov),
        },
    )
    w = read_wheel(p)
    assert (w.path, w.filename) == (p, NAME)
    assert (w.name, w.display_name) == ("flash-attn", "Flash_Attn")
    assert w.version == Version("2.8.3.post1+rocm6.2")
    assert w.build == (1, "")
    assert w.tags == frozenset({Tag("cp311", "cp311", "linux_x86_64")})
    assert w.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert w.size == p.stat().st_size
    assert (w.requires_python, w.summary) == (">=3.9", "Flash attention")
    assert w.requires_dist == ("torch", "einops ; extra == 'x'")  # the body is not a header
    assert w.metadata == META.encode()
    assert w.provenance == prov
    assert w.top_level == ("flash_attn", "flash_attn_2_cuda")
    assert w.native is True


def test_pure_wheel_without_provenance(tmp_path: Path) -> None:
    p = _zip(
        tmp_path / "demo-1.0-py3-none-any.whl",
        {
            "demo.py": "",
            "demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
            "demo-1.0.dist-info/top_level.txt": "demo\nother\n",
        },
    )
    w = read_wheel(p)
    assert (w.provenance, w.native, w.requires_python, w.summary) == (None, False, None, None)
    assert w.top_level == ("demo", "other")  # top_level.txt wins over the member list
    assert w.requires_dist == () and w.build == ()


@pytest.mark.parametrize(
    ("filename", "members", "text"),
    [
        ("notawheel.whl", None, "not a wheel filename"),
        ("a-1.0-py3-none-any.whl", None, "not a zip file"),
        ("a-1.0-py3-none-any.whl", {"a/__init__.py": ""}, "METADATA, found 0"),
        (
            "a-1.0-py3-none-any.whl",
            {"a-1.0.dist-info/METADATA": "Name: a\nVersion: 1.0\n", "b-1.dist-info/METADATA": ""},
            "METADATA, found 2",
        ),
        (
            "a-1.0-py3-none-any.whl",
            {"a-1.0.dist-info/METADATA": "Name: evil\nVersion: 1.0\n"},
            "METADATA Name 'evil' does not match the filename's 'a'",
        ),
        (
            "a-1.0-py3-none-any.whl",
            {"a-1.0.dist-info/METADATA": "Name: a\nVersion: 2.0\n"},
            "METADATA Version '2.0' does not match the filename's 1.0",
        ),
        (
            "a-1.0-py3-none-any.whl",
            {
                "a-1.0.dist-info/METADATA": "Name: a\nVersion: 1.0\n",
                "a-1.0.dist-info/rocmbuild.json": "{,}",
            },
            "rocmbuild.json: not valid JSON",
        ),
        (
            "a-1.0-py3-none-any.whl",
            {
                "a-1.0.dist-info/METADATA": "Name: a\nVersion: 1.0\n",
                "a-1.0.dist-info/rocmbuild.json": "[]",
            },
            "rocmbuild.json is not a JSON object",
        ),
    ],
)
def test_malformed_wheels_raise_one_error_type(
    tmp_path: Path, filename: str, members: dict[str, str] | None, text: str
) -> None:
    p = tmp_path / filename
    if members is None:
        p.write_bytes(b"not a zip")
    else:
        _zip(p, dict(members))
    with pytest.raises(WheelFormatError) as exc:
        read_wheel(p)
    assert text in exc.value.message and str(p) in exc.value.message
    assert exc.value.hint


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WheelFormatError, match="no such wheel file"):
        read_wheel(tmp_path / "a-1.0-py3-none-any.whl")


def test_name_parts_keep_their_spelling() -> None:
    n = parse_wheel_name(NAME)
    assert (n.distribution, n.raw_version, n.rest) == (
        "Flash_Attn",
        "2.8.3.post1+rocm6.2",
        "1-cp311-cp311-linux_x86_64",
    )
    assert n.version == Version("2.8.3.post1+rocm6.2")
    assert n.namever == "Flash_Attn-2.8.3.post1+rocm6.2"
    assert n.with_version("2.8.3.post1+rocm6.2.gfx942") == (
        "Flash_Attn-2.8.3.post1+rocm6.2.gfx942-1-cp311-cp311-linux_x86_64.whl"
    )
    with pytest.raises(WheelFormatError, match="not a wheel filename"):
        parse_wheel_name("flash_attn-2.8.3.tar.gz")


def test_one_parser_serves_every_reader_of_a_wheel_name() -> None:
    """parse_wheel_name also gives packaging's reading (normalized name, build tag, tags), which
    the publish checks and pages take from it; its error names ``where`` when given."""
    from rocmbuild.publish import pages
    from rocmbuild.publish.checks import Identity

    n = parse_wheel_name(NAME)
    assert (n.name, n.build) == ("flash-attn", (1, ""))
    assert n.tags == frozenset({Tag("cp311", "cp311", "linux_x86_64")})
    assert pages.version_of(NAME) == n.version
    assert Identity.of_filename(NAME) == Identity(n.name, n.version, n.build, n.tags)
    assert Identity.of_filename("index.html") is None
    with pytest.raises(WheelFormatError, match=r"^/srv/x\.whl: not a wheel filename"):
        parse_wheel_name("x.whl", Path("/srv/x.whl"))
    with pytest.raises(WheelFormatError, match="not a wheel filename"):
        pages.version_of("flash_attn-2.8.3+x-1-.whl")
