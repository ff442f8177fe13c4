"""launchers/cuid.py: each translation unit gets a CUID from its path inside the tree, so two
workspaces give the same device code and two units of one library never share a CUID. The
argument orders are the ones hipcc writes: Debian's hipcc 5.2.3 (perl, hipcc.pl) logged by hand
from a wrapper in HIP_CLANG_PATH, and ROCm 6's hipcc (C++, hipBin_amd.h: its flags, then the
caller's arguments with ``-x hip`` before each source and ``--offload-arch`` moved forward)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.programs.launchers.cuid import cuid_args, prefix_map_args, source_of

DEVLIBS = "--rocm-device-lib-path=/devlibs"


def _src(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


def _cmake(src: Path) -> list[str]:
    return ["clang++", "-O3", "--offload-arch=gfx942", "-o", "x.o", "-x", "hip", "-c", str(src)]


def _hipcc52(src: Path, out: str = "k.o") -> list[str]:
    """``hipcc --offload-arch=gfx942 --rocm-device-lib-path=D -fPIC -c k.hip -o k.o`` as hipcc
    5.2.3 ran clang-15 here."""
    return ["clang-15", "-std=c++11", "-isystem", "/..", "-isystem", "/usr/hsa/include",
            "--hip-version=5.2.21153", "--offload-arch=gfx942", "-O3", "-mllvm",
            "-amdgpu-early-inline-all=true", "-mllvm", "-amdgpu-function-calls=false",
            "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", DEVLIBS, "-fPIC",
            "-c", "-x", "hip", str(src), "-o", out]


def _hipcc6_torch(src: Path, out: str) -> list[str]:
    """torch's ninja rule (``hipcc $cflags -c $in -o $out $post_cflags``) through ROCm 6's
    hipcc: its HIPCXXFLAGS (with the moved ``--offload-arch``), then the caller's arguments."""
    return ["clang++", "-O3", "--offload-arch=gfx942", "-mllvm",
            "-amdgpu-early-inline-all=true", "-mllvm", "-amdgpu-function-calls=false",
            "-isystem", "/opt/rocm/include", "-I/tree/csrc", "-c", "-x", "hip", str(src), "-o",
            out, "-fPIC", "-D__HIP_PLATFORM_AMD__=1", "-fno-gpu-rdc", "-std=c++17"]


ORDERS = [_cmake, _hipcc52, lambda s: _hipcc6_torch(s, "/tree/build/temp/k.o")]


@pytest.mark.parametrize("order", ORDERS, ids=["cmake", "hipcc-5.2", "hipcc-6-torch"])
def test_same_relative_path_same_cuid_in_two_trees(tmp_path: Path, order) -> None:
    a = _src(tmp_path / "one" / "src" / "k.hip")
    b = _src(tmp_path / "second-workspace" / "src" / "k.hip")
    ca = cuid_args(order(a), str(tmp_path / "one"))
    cb = cuid_args(order(b), str(tmp_path / "second-workspace"))
    assert ca[1] == cb[1] and ca[1].startswith("-cuid=") and ca[0] == order(a)[0]
    assert ca[2:] == order(a)[1:]


@pytest.mark.parametrize("order", ORDERS, ids=["cmake", "hipcc-5.2", "hipcc-6-torch"])
def test_two_units_get_two_cuids(tmp_path: Path, order) -> None:
    """The old launcher took the argument after ``-c`` as the source: for hipcc's ``-c -x hip
    k.hip`` that is ``-x``, the same for every unit."""
    a, b = _src(tmp_path / "a.hip"), _src(tmp_path / "b.hip")
    assert cuid_args(order(a), str(tmp_path))[1] != cuid_args(order(b), str(tmp_path))[1]


def test_the_source_is_the_one_existing_source_file(tmp_path: Path, monkeypatch) -> None:
    """A relative source (hipcc run in the tree) is found from the working directory; the
    value of ``-o`` or ``-include`` is never the source, even with a source suffix."""
    monkeypatch.chdir(tmp_path)
    _src(tmp_path / "k.cu")
    _src(tmp_path / "pre.cpp")
    _src(tmp_path / "out.cpp")
    args = ["-include", "pre.cpp", "-Xarch_host", "pre.cpp", "-c", "-x", "hip", "k.cu", "-o",
            "out.cpp"]
    assert source_of(args) == "k.cu"
    assert source_of(["-c", "-x", "hip", "missing.hip", "-o", "k.o"]) is None
    assert source_of(["-x", "hip", "k.cu", "-o", "k.o"]) is None  # no -c: a link or -E


def test_links_two_sources_and_given_cuids_are_left_alone(tmp_path: Path) -> None:
    """What has no one source to name runs as given: a wrong guess would share a CUID."""
    a, b = _src(tmp_path / "a.hip"), _src(tmp_path / "b.hip")
    link = ["clang++", "-shared", "-o", "libx.so", "a.o", "b.o"]
    assert cuid_args(link, str(tmp_path)) == link
    two = ["clang++", "--offload-arch=gfx942", "-c", str(a), str(b)]
    assert cuid_args(two, str(tmp_path)) == two
    for own in ("-cuid=mine", "-fuse-cuid=none"):
        given = [*_hipcc52(a), own]
        assert cuid_args(given, str(tmp_path)) == given
    assert cuid_args(["clang-15", "--version"], str(tmp_path)) == ["clang-15", "--version"]


def test_cuid_goes_after_the_compiler_a_compile_cache_runs(tmp_path: Path) -> None:
    """cuid.py then ccache/sccache (docs/compile-cache.md): the cache gets the compiler first."""
    src = _src(tmp_path / "a.hip")
    for cache in ("/usr/bin/ccache", "sccache"):
        for order in (_cmake, _hipcc52):
            out = cuid_args([cache, *order(src)], str(tmp_path))
            assert out[:2] == [cache, order(src)[0]] and out[2].startswith("-cuid="), out
            assert out[3:] == order(src)[1:]


def test_every_compile_maps_the_tree_right_after_the_compiler(tmp_path: Path) -> None:
    """``-ffile-prefix-map=<tree>=.`` (docs/reproducible.md) on a compile of any language,
    after the compiler a cache runs and before the command's own flags (so that a map of the
    recipe's own, later on the line, wins in gcc); links and ``--version`` run as given."""
    tree = tmp_path / "ws" / "tree"
    src = _src(tree / "a.cpp")
    mapped = f"-ffile-prefix-map={tree}=."
    for argv in (["g++", "-O2", "-c", str(src), "-o", "a.o"],
                 ["/usr/bin/ccache", "g++", "-c", str(src)], _hipcc52(src)):
        at = 2 if "ccache" in argv[0] else 1
        out = prefix_map_args(argv, str(tree))
        assert out == [*argv[:at], mapped, *argv[at:]], out
        assert prefix_map_args(out, str(tree)) == out  # once only
    for argv in (["g++", "-shared", "-o", "x.so", "a.o"], ["clang-15", "--version"]):
        assert prefix_map_args(argv, str(tree)) == argv


def test_a_symlinked_tree_maps_both_paths_and_a_path_with_equals_none(tmp_path: Path) -> None:
    """The compiler sees the path the build wrote (a workspace reached through a symlink, or
    the real one CMake resolves): both are mapped. ``=`` in the path would split the option."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    out = prefix_map_args(["c++", "-c", "a.cpp"], str(tmp_path / "link"))
    assert out == ["c++", f"-ffile-prefix-map={tmp_path / 'link'}=.",
                   f"-ffile-prefix-map={real}=.", "-c", "a.cpp"]
    odd = tmp_path / "a=b"
    odd.mkdir()
    assert prefix_map_args(["c++", "-c", "a.cpp"], str(odd)) == ["c++", "-c", "a.cpp"]
