"""buildtools/preprocessed with the real preprocessor (issue 24): clang from the HIP toolchain this
project installs decides which groups are on, host and device passes; no GPU is needed to
preprocess."""

from __future__ import annotations

from pathlib import Path

from rocmbuild.buildtools import preprocessed
from rocmbuild.host.compiler import HipCompiler
from tests.unit.buildtools.test_preprocessed import TEXT


def _judge(tmp_path: Path, hipc: HipCompiler, defines: tuple[str, ...] = ()) -> preprocessed.Live:
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t/g.h").write_text(TEXT)
    (tmp_path / "t/k.hip").write_text('#include "g.h"\n#include "g.h"\n')
    return preprocessed.judge(tmp_path / "t", ["g.h"], ["k.hip"], compiler=hipc.path,
                          flags=hipc.flags, archs=("gfx942",), defines=defines,
                          include_dirs=[""], scratch=tmp_path / "s", log_path=tmp_path / "l")


def test_the_preprocessor_decides_with_the_build_defines(tmp_path: Path,
                                                         hipc: HipCompiler) -> None:
    """No USE_X: its group and the #elif 0 are off, the #else is on; the guard's group is on
    (the first inclusion), the conditions never count. With USE_X=2 its group and the
    device-only group inside it (the device pass) are on, the #else off."""
    live = _judge(tmp_path, hipc)
    assert live.unknown == ""
    assert [n for n in range(1, 16) if live.compiled("g.h", n)] == [2, 3, 12, 13, 14, 15]
    on = _judge(tmp_path, hipc, ("USE_X=2",))
    assert [n for n in range(1, 16) if on.compiled("g.h", n)] == [2, 3, 6, 8, 9, 12, 14, 15]
    assert not any((tmp_path / "s").iterdir())  # the mirror is removed
    assert (tmp_path / "t/g.h").read_text() == TEXT  # the tree's file is never written


def test_a_unit_that_does_not_preprocess_judges_nothing(tmp_path: Path,
                                                        hipc: HipCompiler) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t/k.hip").write_text('#include "nowhere.h"\n#if 0\nint x;\n#endif\n')
    live = preprocessed.judge(tmp_path / "t", ["k.hip"], ["k.hip"], compiler=hipc.path,
                          flags=hipc.flags, archs=("gfx942",), defines=(), include_dirs=[],
                          scratch=tmp_path / "s", log_path=tmp_path / "l")
    assert live.unknown == ("k.hip could not be preprocessed here (fatal error: 'nowhere.h' "
                            "file not found)")
    assert live.compiled("k.hip", 3) and not live.compiled("k.hip", 2)
    assert "preprocessor: k.hip: fatal error" in (tmp_path / "l").read_text()
