"""stages.tag.retag on a real wheel zip: the new name keeps the parts' spelling, the result reads
back through the one wheel model, and nothing else is left in the output directory."""

from __future__ import annotations

import zipfile
from pathlib import Path

from packaging.version import Version

from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.stages.tag import retag


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
