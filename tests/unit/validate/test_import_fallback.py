"""The import step says when a wheel imported without loading any of its libraries with HIP
device code (bitsandbytes on a CPU torch falls back to a stub of its library): a warning naming
them and the host, as the guard says a torch mismatch; a wheel that loaded one passes as before.
The probe's ``mapped`` list (the shared libraries in /proc/self/maps) and the audit's list of
device-code libraries are given here as data (tests/integration/test_rocm72_sdk.py has none to
import; docs/recipes/bitsandbytes.md shows the real bitsandbytes wheel's step)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from rocmbuild.validate import install as inst
from rocmbuild.validate import report, runner
from rocmbuild.validate.model import Status, Step

CPU_TORCH = {"version": "2.13.0+cpu", "hip": None, "gpu": False}


def wheel(tmp_path: Path) -> inst.WheelInfo:
    p = tmp_path / "bnb-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("bnb/__init__.py", "")
        z.writestr("bnb/libbnb_rocm72.so", b"\x7fELF")
        z.writestr("bnb-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: bnb\nVersion: 1.0\n")
        z.writestr("bnb-1.0.dist-info/RECORD", "")
    return inst.read_wheel(p)


def test_an_import_that_loaded_none_of_its_libraries_warns_naming_them(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    ok = Step(Status.SUCCESS)
    step = runner._import_step(w, True, {"bnb": {"ok": True}}, ok, ["libc.so.6"], CPU_TORCH,
                               ["libbnb_rocm72.so"])
    assert step.status is Status.WARNING
    assert "loaded none of its libraries with device code (libbnb_rocm72.so)" in step.reason
    assert "torch 2.13.0+cpu, not a ROCm build, no GPU" in step.reason
    md = report.to_markdown({"status": "success", "kernels": {"status": "skipped"}, "wheels": [
        {"wheel": w.filename, "steps": {"import": step.to_json()}}]})
    assert f"- {w.filename}: import: imported bnb, which loaded none" in md


def test_an_import_that_loaded_one_passes(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    ok = Step(Status.SUCCESS)
    for mapped in (["libbnb_rocm72.so", "libc.so.6"], None):  # None: no /proc (not judged)
        step = runner._import_step(w, True, {"bnb": {"ok": True}}, ok, mapped, CPU_TORCH,
                                   ["libbnb_rocm72.so"])
        assert (step.status, step.reason) == (Status.SUCCESS, "imported bnb")
    # a wheel whose libraries carry no device code (a host-only helper loaded on demand): as before
    step = runner._import_step(w, True, {"bnb": {"ok": True}}, ok, ["libc.so.6"], CPU_TORCH, [])
    assert step.status is Status.SUCCESS
