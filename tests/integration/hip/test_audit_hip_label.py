"""audit warns when a shared object links ``libamdhip64.so.N`` whose major is not the ROCm major
of the wheel's ``+rocmX.Y`` label. ``multi.so`` is linked here by clang against Debian's real
libamdhip64 (``libamdhip64.so.5``): its DT_NEEDED is read from the ELF dynamic section."""

from __future__ import annotations

import sys
from pathlib import Path

from rocmbuild.artifacts import audit
from rocmbuild.core.run import run
from tests.integration.hip.conftest import make_wheel


def test_needed_read_from_the_dynamic_section(objs: dict[str, Path]) -> None:
    (so,) = audit.audit_file(objs["multi.so"], []).objects
    assert any(n.startswith("libamdhip64.so.") for n in so.needed), so.needed
    (host,) = audit.audit_file(objs["host.so"], []).objects
    assert not any(n.startswith("libamdhip64") for n in host.needed)


def test_label_major_mismatch_warns(objs: dict[str, Path], tmp_path: Path) -> None:
    (so,) = audit.audit_file(objs["multi.so"], []).objects
    lib = next(n for n in so.needed if n.startswith("libamdhip64.so."))
    major = lib.rsplit(".", 1)[1]
    other = str(int(major) + 1)
    member = {"demo/_multi.so": objs["multi.so"]}
    bad = make_wheel(tmp_path / f"demo-1.0+rocm{other}.2.gfx942-cp311-cp311-linux_x86_64.whl",
                     member)
    good = make_wheel(tmp_path / f"demo-1.1+rocm{major}.2.gfx942-cp311-cp311-linux_x86_64.whl",
                      member)
    warned = audit.audit_file(bad, []).warnings
    assert len(warned) == 1 and lib in warned[0] and f"rocm{other}.2" in warned[0], warned
    assert audit.audit_file(good, []).warnings == []
    # the CLI shows it as a warning; the audit itself still passes (exit 0)
    res = run([sys.executable, "-m", "rocmbuild", "audit", str(bad)], capture=True, check=False)
    assert res.returncode == 0, res.output
    assert f"links {lib}" in res.output and "warning" in res.output.lower()


def test_built_probe_label_names_the_hip_it_links(probe_wheel_942: Path) -> None:
    """The probe built here by rocmbuild (real compiler, the HIP root it compiles against): the
    label's ROCm major is the linked libamdhip64's, provenance says where it came from, and the
    audit has nothing to warn about."""
    import json
    import zipfile

    rep = audit.audit_wheel(probe_wheel_942, [])
    assert rep.warnings == [], rep.warnings
    libs = [n for o in rep.objects for n in o.needed if n.startswith("libamdhip64.so.")]
    assert libs, [o.needed for o in rep.objects]
    version = probe_wheel_942.name.split("-")[1]
    assert f"+rocm{libs[0].rsplit('.', 1)[1]}." in version, (version, libs)
    with zipfile.ZipFile(probe_wheel_942) as zf:
        prov_name = next(n for n in zf.namelist() if n.endswith(".dist-info/rocmbuild.json"))
        prov = json.loads(zf.read(prov_name))
    # the probe does not use torch, so the host's torch has no say in its ROCm version
    assert prov["rocm_version_from"] == "rocm-root", prov["rocm_version_from"]
