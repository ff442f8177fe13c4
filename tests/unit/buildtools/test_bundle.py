"""In-process checks of rocm_runtime: the bundle resolver's refusals (no patchelf needed: they
come before anything is patched), the data arch filter, the host-bound METADATA line, the
publish views a wheel belongs to, and the recipe keys. The ELF files are real system libraries
(Debian's ROCm 5.2 runtime), one with a needed name edited in place to one that exists nowhere."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.buildtools import bundle
from rocmbuild.core.errors import BuildError, RecipeError
from rocmbuild.core.gfx import KNOWN_ARCHS
from rocmbuild.plan.model import RocmRuntime
from rocmbuild.publish.views import is_view_name, views_of
from rocmbuild.recipe import load
from rocmbuild.recipe.keys import ROCM_LIBS
from rocmbuild.stages.tag import _set_header, rocm_requirement

HSAKMT = Path("/usr/lib/x86_64-linux-gnu/libhsakmt.so.1")
needs_hsakmt = pytest.mark.skipif(not HSAKMT.exists(), reason="Debian's libhsakmt1 not installed")


def _wheel(path: Path, members: dict[str, bytes], metadata_extra: str = "",
           provenance: dict[str, object] | None = None) -> Path:
    name, version = path.name.split("-")[:2]
    di = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
        zf.writestr(f"{di}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata_extra}")
        zf.writestr(f"{di}/WHEEL",
                    "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
        if provenance is not None:
            zf.writestr(f"{di}/rocmbuild.json", json.dumps(provenance))
        zf.writestr(f"{di}/RECORD", "")
    return path


@needs_hsakmt
def test_a_needed_library_that_is_nowhere_names_itself_and_the_dirs(tmp_path: Path) -> None:
    elf = HSAKMT.read_bytes().replace(b"libdrm_amdgpu.so.1\0", b"libdrm_amdgpX.so.1\0")
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"demo/_x.so": elf})
    with pytest.raises(BuildError) as exc:
        bundle.bundle_wheel(wheel, tmp_path / "out", RocmRuntime("bundle", ("libdrm_amdgp*",)),
                            None, ("gfx942",), tmp_path / "bundle.log")
    assert "needs libdrm_amdgpX.so.1 (bundle.libs names it)" in exc.value.message
    assert "/usr/lib/x86_64-linux-gnu" in exc.value.message
    assert "bundle.libs" in (exc.value.hint or "")
    assert not (tmp_path / "out" / wheel.name).exists()


@needs_hsakmt
def test_nothing_matching_is_left_to_the_host_and_the_wheel_keeps_its_bytes(tmp_path: Path
                                                                            ) -> None:
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"demo/_x.so": HSAKMT.read_bytes()})
    done = bundle.bundle_wheel(wheel, tmp_path / "out", RocmRuntime("bundle", ROCM_LIBS), None,
                               ("gfx942",), tmp_path / "bundle.log")
    assert done.libs == () and done.patched == ()
    assert set(done.from_host) == {"libdrm.so.2", "libdrm_amdgpu.so.1", "libnuma.so.1"}
    with zipfile.ZipFile(done.wheel) as zf:  # libc.so.6 is neither bundled nor "from host"
        assert zf.read("demo/_x.so") == HSAKMT.read_bytes()
        record = zf.read("demo-1.0.dist-info/RECORD").decode()
    assert "demo/_x.so,sha256=" in record


def test_elf_files_in_two_packages_need_a_choice(tmp_path: Path) -> None:
    elf = b"\x7fELF" + bytes(100)
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"a/x.so": elf, "b/y.so": elf})
    with pytest.raises(BuildError, match="cannot tell which package directory"):
        bundle.bundle_wheel(wheel, tmp_path / "out", RocmRuntime("bundle", ROCM_LIBS), None,
                            ("gfx942",), tmp_path / "bundle.log")


def test_data_files_for_other_archs_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "rocm"
    lib = root / "lib/rocblas/library"
    lib.mkdir(parents=True)
    for n in ("TensileLibrary_gfx942.dat", "TensileLibrary_gfx90a.dat",
              "Kernels.so-000-gfx1100.hsaco", "TensileManifest.txt"):
        (lib / n).write_text(n)
    files = bundle._data_files(RocmRuntime("bundle", (), ("lib/rocblas/library/*",)), root,
                               ("gfx942:sramecc+:xnack-",))
    assert [rel for rel, _ in files] == ["lib/rocblas/library/TensileLibrary_gfx942.dat",
                                         "lib/rocblas/library/TensileManifest.txt"]
    (lib / "link.dat").symlink_to(tmp_path / "outside")
    (tmp_path / "outside").write_text("x")
    with pytest.raises(BuildError, match="points outside the ROCm root"):
        bundle._data_files(RocmRuntime("bundle", (), ("lib/rocblas/library/*",)), root,
                           ("gfx942",))
    with pytest.raises(BuildError, match="no ROCm root"):
        bundle._data_files(RocmRuntime("bundle", (), ("x/*",)), None, ("gfx942",))


def test_host_bound_metadata_line() -> None:
    assert rocm_requirement("6.2") == "rocm (>=6.2,<6.3)"
    assert rocm_requirement("6.4.1") == "rocm (>=6.4,<6.5)"
    assert rocm_requirement("7") == "rocm (>=7.0,<7.1)"
    meta = b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Dist: a\n\nbody\nVersion: no\n"
    def _set_version(data: bytes, version: str, external: str | None = None) -> bytes:
        data = _set_header(data, "Version", version)
        return _set_header(data, "Requires-External", external) if external else data

    out = _set_version(meta, "1.0+rocm6.2", "rocm (>=6.2,<6.3)").decode()
    assert out == ("Metadata-Version: 2.1\nName: x\nVersion: 1.0+rocm6.2\nRequires-Dist: a\n"
                   "Requires-External: rocm (>=6.2,<6.3)\n\nbody\nVersion: no\n")
    assert _set_version(out.encode(), "1.0+rocm6.2", "rocm (>=6.2,<6.3)").decode() == out
    assert "Requires-External" not in _set_version(meta, "1.0").decode()


def test_views_of_a_wheel(tmp_path: Path) -> None:
    """The ROCm views; these wheels have no device code but rocmbuild provenance, so they are
    also in every known arch's view (publish/views.arch_views)."""
    every = tuple(sorted(KNOWN_ARCHS, key=lambda a: (len(a), a)))
    host = read_wheel(_wheel(tmp_path / "a-1.0-py3-none-any.whl", {},
                             "Requires-External: rocm (>=6.2,<6.3)\n", {"rocm_version": "6.4"}))
    assert views_of(host) == ("rocm6.2", *every)  # METADATA decides
    bundled = read_wheel(_wheel(tmp_path / "b-1.0-py3-none-any.whl", {}, "",
                                {"rocm_version": "6.4.1"}))
    assert views_of(bundled) == ("rocm6.4", *every)
    other = read_wheel(_wheel(tmp_path / "c-1.0-py3-none-any.whl", {},
                              "Requires-External: libfoo\n", {"rocm_version": "../x"}))
    assert views_of(other) == every
    assert not is_view_name("simple") and not is_view_name("files") and is_view_name("rocm6.2")
    assert not is_view_name("../x") and not is_view_name(".hidden")


def test_recipe_keys(tmp_path: Path) -> None:
    r = tmp_path / "r.toml"
    r.write_text('schema_version = 1\n[package]\nname = "d"\n[source]\npath = "."\n'
                 '[build]\nrocm_runtime = "bundled"\n[bundle]\nlib = ["x"]\n'
                 'data = ["../etc/*", "/opt/x/*", "lib/ok/*"]\n')
    with pytest.raises(RecipeError) as exc:
        load.load(r)
    text = str(exc.value.detail or "") + exc.value.message
    assert "build.rocm_runtime: unknown ROCm runtime 'bundled' (did you mean bundle?)" in text
    assert "bundle.lib: unknown key" in text and "libs" in text
    assert "bundle.data[0]: must be a relative glob inside the ROCm root" in text
    assert "bundle.data[1]" in text and "bundle.data[2]" not in text


def test_data_files_land_under_the_package_with_record(tmp_path: Path) -> None:
    """A fixture ROCm root (no ROCm SDK exists here) with rocBLAS-like kernel files; the wheel
    has no ELF files, so nothing is patched and patchelf is not needed."""
    root = tmp_path / "rocm"
    lib = root / "lib/rocblas/library"
    lib.mkdir(parents=True)
    (lib / "TensileLibrary_gfx942.dat").write_bytes(b"k942")
    (lib / "TensileLibrary_gfx90a.dat").write_bytes(b"k90a")
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"demo/__init__.py": b""})
    done = bundle.bundle_wheel(wheel, tmp_path / "out", RocmRuntime(
        "bundle", ROCM_LIBS, ("lib/rocblas/library/*",)), root, ("gfx942",),
        tmp_path / "bundle.log")
    member = "demo/lib/rocblas/library/TensileLibrary_gfx942.dat"
    assert [f.member for f in done.data] == [member] and done.libs == ()
    assert done.data[0].source == str(lib.resolve() / "TensileLibrary_gfx942.dat")
    with zipfile.ZipFile(done.wheel) as zf:
        assert zf.read(member) == b"k942"
        assert "TensileLibrary_gfx90a.dat" not in " ".join(zf.namelist())
        record = zf.read("demo-1.0.dist-info/RECORD").decode()
        info = zf.getinfo(member)
    assert f"{member},sha256=" in record and info.date_time == (1980, 1, 1, 0, 0, 0)
