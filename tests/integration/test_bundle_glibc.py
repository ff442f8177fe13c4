"""The bundle stage checks the platform tag again after bundling: a wheel tagged for an older
glibc than a library bundled into it needs gets the newer tag (in its name and WHEEL). Real ELF
files built here with cc and a real patchelf: a "HIP runtime" ``libamdhip64.so.7`` (a small
library of that soname in a ROCm root tree made here; no ROCm exists on this machine) that calls
``pthread_create``, which glibc 2.34 moved into libc (so it needs GLIBC_2.34 on this glibc-2.36
host), and the wheel's own ``libop.so``, which needs only GLIBC_2.2.5 and links it. The wheel is
tagged by hand as auditwheel would tag the unbundled one (manylinux_2_17); the tags the check
compares against are varied around 2.34. The last test bundles the real ROCm 7.2.4 runtime of
the SDK tree (glibc 2.38), skipped, naming the script, when the tree is not installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from rocmbuild.artifacts.buildfacts import Bundle
from rocmbuild.artifacts.elf import glibc_needed
from rocmbuild.buildtools import bundle
from rocmbuild.host import toolchain
from rocmbuild.plan.model import RocmRuntime
from rocmbuild.recipe.keys import ROCM_LIBS

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

HIP = """#include <pthread.h>
static void *run(void *arg) { return arg; }
int hipInit(unsigned flags) {
    pthread_t t; void *out = 0;
    if (pthread_create(&t, 0, run, (void *)(long)flags)) return -1;
    pthread_join(t, &out); return (int)(long)out;
}
"""
OP = "int hipInit(unsigned);\nint op(int x) { return hipInit(0) + x; }\n"


def _cc(out: Path, src: str, *args: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run([str(CC), "-shared", "-fPIC", "-O1", "-o", str(out), str(c), *args],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("glibc")
    root = base / "rocm"
    (root / "lib").mkdir(parents=True)
    hip = _cc(root / "lib" / "libamdhip64.so.7", HIP, "-Wl,-soname,libamdhip64.so.7", "-pthread")
    op = _cc(base / "libop.so", OP, f"-L{root / 'lib'}", "-l:libamdhip64.so.7")
    return {"root": root, "hip": hip, "op": op}


def _wheel(dest: Path, op: Path, platform: str) -> Path:
    name = f"demo-1.0-cp311-cp311-{platform}.whl"
    with WheelFile(dest / name, "w") as wf:
        wf.write(str(op), "demo/libop.so")
        wf.writestr("demo/__init__.py", b"")
        wf.writestr("demo-1.0.dist-info/METADATA",
                    b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n")
        tags = "".join(f"Tag: cp311-cp311-{p}\n" for p in platform.split("."))
        wf.writestr("demo-1.0.dist-info/WHEEL",
                    f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n{tags}"
                    .encode())
    return dest / name


def test_the_built_files_need_what_the_test_says(built: dict[str, Path]) -> None:
    assert glibc_needed(built["hip"].read_bytes()) == (2, 34)
    op = glibc_needed(built["op"].read_bytes())
    assert op is None or op < (2, 17)
    readelf = subprocess.run(["readelf", "-V", str(built["hip"])], capture_output=True,
                             text=True, check=True).stdout
    assert "GLIBC_2.34" in readelf  # binutils agrees with the project's reader


def _bundle(tmp_path: Path, built: dict[str, Path], platform: str) -> tuple[Path, Bundle]:
    src_dir, out = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    src = _wheel(src_dir, built["op"], platform)
    done = bundle.bundle_wheel(src, out, RocmRuntime("bundle", ROCM_LIBS), built["root"],
                               ("gfx942",), tmp_path / "bundle.log")
    return done.wheel, done


def test_an_older_manylinux_tag_is_raised_to_the_glibc_the_bundle_needs(
        tmp_path: Path, built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    wheel, done = _bundle(tmp_path, built, "manylinux_2_17_x86_64.manylinux2014_x86_64")
    assert wheel.name == "demo-1.0-cp311-cp311-manylinux_2_34_x86_64.whl"
    assert list(wheel.parent.glob("*.whl")) == [wheel]
    with WheelFile(wheel) as wf:  # every member checked against RECORD as it is read
        for n in wf.namelist():
            wf.read(n)
        tags = [ln for ln in wf.read("demo-1.0.dist-info/WHEEL").decode().splitlines()
                if ln.startswith("Tag:")]
        assert "demo/lib/libamdhip64.so.7" in wf.namelist()
    assert tags == ["Tag: cp311-cp311-manylinux_2_34_x86_64"]
    assert done.glibc is not None and done.glibc.to_json() == {
        "glibc": "2.34", "needed_by": "demo/lib/libamdhip64.so.7",
        "platform_from": "manylinux_2_17_x86_64.manylinux2014_x86_64",
        "platform_to": "manylinux_2_34_x86_64"}
    json.dumps(done.to_json())  # provenance-ready
    err = capsys.readouterr().err
    assert "platform tag manylinux_2_17_x86_64.manylinux2014_x86_64 -> manylinux_2_34_x86_64" \
        in " ".join(err.split()), err
    # pip on this host (glibc 2.36) still takes it: the new tag is one it supports
    from packaging.tags import sys_tags
    assert "manylinux_2_34_x86_64" in {t.platform for t in sys_tags()}


@pytest.mark.parametrize("platform", ["manylinux_2_34_x86_64", "manylinux_2_35_x86_64",
                                      "linux_x86_64"])
def test_a_tag_that_promises_enough_or_nothing_is_kept(tmp_path: Path, built: dict[str, Path],
                                                      platform: str) -> None:
    wheel, done = _bundle(tmp_path, built, platform)
    assert wheel.name == f"demo-1.0-cp311-cp311-{platform}.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert f"Tag: cp311-cp311-{platform}" in zf.read("demo-1.0.dist-info/WHEEL").decode()
    assert done.glibc is not None
    assert done.glibc.glibc == "2.34" and done.glibc.raised_to == ""


SDK_ROOT = Path(os.environ.get("ROCMBUILD_ROCM_SDK_DIR")
                or Path.home() / ".cache/rocmbuild/rocm-7.2") / "usr"


@pytest.mark.skipif(toolchain.sdk_runtime_lib(SDK_ROOT) is None,
                    reason=f"no ROCm 7.2 SDK tree at {SDK_ROOT}: run scripts/install-rocm-sdk.sh "
                    "(setup.sh does, unless ROCMBUILD_SKIP_APT=1); the cc-built tests above "
                    "still check the rule")
def test_the_real_rocm_72_runtime_raises_the_tag_to_glibc_2_38(
        tmp_path: Path, built: dict[str, Path]) -> None:
    """The same wheel bundled from the real ROCm 7.2.4 SDK tree: ``libop.so`` needs
    ``libamdhip64.so.7`` (linked against the stub built above: the soname is what counts), and
    the bundle stage copies Debian's real libamdhip64.so.7 and what it needs, built for glibc
    2.38. A wheel tagged manylinux_2_28 (what auditwheel gives a library built on an older
    glibc) comes out manylinux_2_38."""
    runtime = toolchain.sdk_runtime_lib(SDK_ROOT)
    assert runtime is not None
    real = (runtime / "libamdhip64.so.7").resolve()
    assert glibc_needed(real.read_bytes()) == (2, 38)
    readelf = subprocess.run(["readelf", "-V", str(real)], capture_output=True, text=True,
                             check=True).stdout
    highest = max((int(a), int(b)) for a, b in re.findall(r"GLIBC_(\d+)\.(\d+)", readelf))
    assert highest == (2, 38)  # binutils agrees
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src = _wheel(src_dir, built["op"], "manylinux_2_28_x86_64")
    done = bundle.bundle_wheel(src, tmp_path / "out", RocmRuntime("bundle", ROCM_LIBS), SDK_ROOT,
                               ("gfx942",), tmp_path / "bundle.log")
    assert done.wheel.name == "demo-1.0-cp311-cp311-manylinux_2_38_x86_64.whl"
    assert done.glibc is not None and done.glibc.glibc == "2.38"
    assert done.glibc.member.startswith("demo/lib/lib")  # a bundled runtime library
    assert any(f.source == str(real) for f in done.libs)  # the real file, not the stub
