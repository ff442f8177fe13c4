"""launchers/cuid.py: each translation unit gets a CUID from its path inside the tree, so two
workspaces give the same device code and two units of one library never share a CUID."""

from __future__ import annotations

from pathlib import Path

from rocmbuild.launchers.cuid import cuid_args


def _cmd(src: Path) -> list[str]:
    return ["clang++", "-O3", "--offload-arch=gfx942", "-o", "x.o", "-x", "hip", "-c", str(src)]


def test_same_relative_path_same_cuid_in_two_trees(tmp_path: Path) -> None:
    a, b = tmp_path / "one" / "src" / "k.hip", tmp_path / "second" / "src" / "k.hip"
    for p in (a, b):
        p.parent.mkdir(parents=True)
        p.write_text("")
    ca, cb = cuid_args(_cmd(a), str(tmp_path / "one")), cuid_args(_cmd(b), str(tmp_path / "second"))
    assert ca[1] == cb[1] and ca[1].startswith("-cuid=") and ca[0] == "clang++"
    assert ca[2:] == _cmd(a)[1:]


def test_two_units_get_two_cuids(tmp_path: Path) -> None:
    a, b = tmp_path / "a.hip", tmp_path / "b.hip"
    assert cuid_args(_cmd(a), str(tmp_path))[1] != cuid_args(_cmd(b), str(tmp_path))[1]


def test_link_lines_and_given_cuids_are_left_alone(tmp_path: Path) -> None:
    link = ["clang++", "-shared", "-o", "libx.so", "a.o", "b.o"]
    assert cuid_args(link, str(tmp_path)) == link
    given = [*_cmd(tmp_path / "a.hip"), "-cuid=mine"]
    assert cuid_args(given, str(tmp_path)) == given


def test_cuid_goes_after_the_compiler_a_compile_cache_runs(tmp_path: Path) -> None:
    """cuid.py then ccache/sccache (docs/compile-cache.md): the cache gets the compiler first."""
    src = tmp_path / "a.hip"
    for cache in ("/usr/bin/ccache", "sccache"):
        out = cuid_args([cache, *_cmd(src)], str(tmp_path))
        assert out[:2] == [cache, "clang++"] and out[2].startswith("-cuid="), out
        assert out[3:] == _cmd(src)[1:]
