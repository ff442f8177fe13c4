"""build.rocm_runtime = "none": the audit of a wheel that must carry no device code, on real ELF
files built here with cc. A fake ``libamdhip64.so.6`` (a small library of that soname: no ROCm
exists on this machine) stands in for the HIP runtime a GPU op would link."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rocmbuild.artifacts import audit
from rocmbuild.core.errors import AuditError
from tests.unit.plan.test_rocm_runtime_none import _wheel

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _cc(tmp_path: Path, name: str, *args: str) -> bytes:
    out = tmp_path / name
    subprocess.run([str(CC), "-shared", "-fPIC", "-o", str(out), *args], check=True,
                   capture_output=True, cwd=tmp_path)
    return out.read_bytes()


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_audit_without_device_code_rejects_hip_objects(tmp_path: Path) -> None:
    (tmp_path / "op.c").write_text("int op(int x) { return x + 1; }\n")
    (tmp_path / "hip.c").write_text("int hipInit(unsigned f) { return (int)f; }\n")
    (tmp_path / "hipop.c").write_text("int hipInit(unsigned f);\n"
                                      "int op(int x) { return hipInit(0) + x; }\n")
    cpu = _cc(tmp_path, "op.so", "op.c")
    _cc(tmp_path, "libamdhip64.so.6", "hip.c", "-Wl,-soname,libamdhip64.so.6")
    linked = _cc(tmp_path, "hipop.so", "hipop.c", "-L.", "-l:libamdhip64.so.6")
    whl = tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl"
    ok = audit.audit_wheel(_wheel(whl, {"demo/op.so": cpu}), (), device=False)
    assert ok.ok and len(ok.objects) == 1
    bad = audit.audit_wheel(_wheel(whl, {"demo/op.so": cpu, "demo/hipop.so": linked}), (),
                            device=False)
    assert bad.problems == [f"{whl.name}: demo/hipop.so has a link to the HIP runtime, "
                            f"{audit.NO_DEVICE}"]
    with pytest.raises(AuditError) as exc:
        audit.require(bad)
    assert "rocm_runtime" in str(exc.value.hint)
    # the same wheel in a host-runtime audit: no device code is no problem (pure host .so)
    assert audit.audit_wheel(whl, ("gfx942",)).ok
