"""stages.tag.retag on a real wheel zip: the new name keeps the parts' spelling, the result reads
back through the one wheel model, and nothing else is left in the output directory."""

from __future__ import annotations

import email.parser
import zipfile
from pathlib import Path

from packaging.version import Version

from rocmbuild.artifacts.buildfacts import TorchBuild
from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.stages.tag import retag, torch_requirement


def _wheel(path: Path, namever: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("flash_attn/__init__.py", "")
        zf.writestr(
            f"{namever}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\n\nBody\n",
        )
        zf.writestr(
            f"{namever}.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n"
        )
        zf.writestr(f"{namever}.dist-info/RECORD", "")
        zf.writestr(f"{namever}.data/scripts/tool", "#!/bin/sh\n")
    return path


def test_retag_appends_local_label_and_provenance(tmp_path: Path) -> None:
    src = _wheel(
        tmp_path / "flash_attn-2.8.3.post1-1-cp311-cp311-linux_x86_64.whl",
        "flash_attn-2.8.3.post1",
        "2.8.3.post1",
    )
    out = tmp_path / "out"
    tagged = retag(src, out, "rocm6.2.gfx942", {"recipe": "flash-attn"}, 0)
    assert tagged.name == "flash_attn-2.8.3.post1+rocm6.2.gfx942-1-cp311-cp311-linux_x86_64.whl"
    assert list(out.iterdir()) == [tagged]  # no temporary left behind
    w = read_wheel(tagged)  # METADATA Version and name agree with the new file name
    assert w.version == Version("2.8.3.post1+rocm6.2.gfx942")
    assert w.build == (1, "")
    assert w.provenance == {"recipe": "flash-attn"}
    with zipfile.ZipFile(tagged) as zf:
        names = set(zf.namelist())
    assert "flash_attn-2.8.3.post1+rocm6.2.gfx942.data/scripts/tool" in names
    assert "flash_attn-2.8.3.post1+rocm6.2.gfx942.dist-info/RECORD" in names


def test_retag_extends_an_existing_local_label(tmp_path: Path) -> None:
    src = _wheel(
        tmp_path / "flash_attn-1.0+rocm6.2-py3-none-any.whl",
        "flash_attn-1.0+rocm6.2",
        "1.0+rocm6.2",
    )
    tagged = retag(src, tmp_path / "out", "gfx942", {}, 0)
    assert tagged.name == "flash_attn-1.0+rocm6.2.gfx942-py3-none-any.whl"
    assert read_wheel(tagged).version == Version("1.0+rocm6.2.gfx942")


def test_an_abi_bound_wheel_requires_the_torch_it_compiled_against(tmp_path: Path) -> None:
    """retag replaces the wheel's own (unpinned) torch requirement, in any spelling, by the one
    torch_requirement makes, after the other Requires-Dist lines; a requirement limited to an
    extra stays; the same input gives the same bytes."""
    src = tmp_path / "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr("flash_attn/__init__.py", "")
        zf.writestr("flash_attn-2.8.3.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.8.3\n"
                    "Requires-Dist: Torch\nRequires-Dist: einops\n"
                    "Requires-Dist: torch>=2.0; extra == \"dev\"\n"
                    "Requires-Dist: torchvision\n\nBody: Requires-Dist: torch\n")
        zf.writestr("flash_attn-2.8.3.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n")
        zf.writestr("flash_attn-2.8.3.dist-info/RECORD", "")
    pin = torch_requirement(TorchBuild("2.13.0+rocm7.2", "7.2.26015", None, True))
    assert pin == "torch==2.13.*"
    assert torch_requirement(TorchBuild("", None, None, None)) == ""
    assert torch_requirement(None) == ""
    made = [retag(src, tmp_path / f"out{i}", "rocm7.2.torch2.13.cxx11abitrue.gfx942", {}, 0,
                  requires_torch=pin) for i in (1, 2)]
    assert made[0].read_bytes() == made[1].read_bytes()
    meta = email.parser.BytesHeaderParser().parsebytes(read_wheel(made[0]).metadata)
    assert meta.get_all("Requires-Dist") == ["einops", 'torch>=2.0; extra == "dev"',
                                             "torchvision", "torch==2.13.*"]
    with zipfile.ZipFile(made[0]) as zf:
        text = zf.read("flash_attn-2.8.3+rocm7.2.torch2.13.cxx11abitrue.gfx942.dist-info/"
                       "METADATA").decode()
    assert text.endswith("\n\nBody: Requires-Dist: torch\n")  # the body is left alone
