"""The hip-attention probe compiles for real (scikit-build-core + CMake HIP + the detected
compiler), its wheel imports without a GPU, and the audit sees exactly the requested archs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rocmbuild.artifacts import audit
from rocmbuild.host.compiler import accepts_arch


def test_probe_two_archs_audit_exact(probe_wheel_2, probe_archs):
    """gfx90a+gfx942, and gfx950 where the compiler has it (conftest.probe_archs)."""
    res = audit.audit_wheel(probe_wheel_2, probe_archs)
    assert res.ok, res.problems
    (so,) = res.objects
    assert so.name.startswith("hipattn/_hipattn.") and so.name.endswith(".so")
    assert so.archs == probe_archs


def test_probe_builds_without_network(probe_wheel_2):
    """The probe recipe says offline = true: its build ran in a network namespace (unless this
    machine cannot make one: then the build warned, and this test says so)."""
    import json
    import zipfile

    from rocmbuild.core.run import no_network

    if not no_network().prefix:
        pytest.skip(f"no network namespace here: {no_network().why_not}")
    (log,) = (probe_wheel_2.parent / "work" / "logs" / "hip-attention-probe").glob("*/build.log")
    assert log.read_text().startswith("$ unshare --net ")
    with zipfile.ZipFile(probe_wheel_2) as zf:
        prov = json.loads(next(zf.read(n) for n in zf.namelist()
                               if n.endswith(".dist-info/rocmbuild.json")))
    assert prov["offline"] is True and prov["plan"]["offline"] is True


def test_probe_wheel_imports(probe_wheel_2, probe_archs, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), str(probe_wheel_2)], check=True)
    code = ("import hipattn; print(hipattn.archs()); n = hipattn.device_count(); print(n)\n"
            "try:\n    hipattn.forward(0, 0, 0, 0, 1, 1, 8, 96, 'float16')\n"
            "except ValueError as e:\n    print('ValueError', e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == str(probe_archs)
    int(lines[1])  # a GPU count, or -100 (hipErrorNoDevice) on this GPU-less machine
    assert lines[2] == "ValueError D: head dim 96 is not supported (64 or 128)"


def test_probe_built_in_its_build_env(probe_wheel_2):
    """scikit-build-core, cmake and ninja came from the recipe's build env (their versions are
    in rocmbuild.json), not from the host venv."""
    import json
    import zipfile

    with zipfile.ZipFile(probe_wheel_2) as zf:
        prov = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith("rocmbuild.json"))))
    names = {p.split("==")[0] for p in prov["build_env"]["packages"]}
    assert {"scikit-build-core", "cmake", "ninja", "pip"} <= names
    assert prov["build_env"]["requirements"][0].startswith("scikit-build-core")


def test_probe_942_only_fails_gfx90a(probe_wheel_942):
    assert audit.audit_wheel(probe_wheel_942, []).objects[0].archs == ["gfx942"]
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "audit", str(probe_wheel_942),
                        "--arch", "gfx90a"], capture_output=True, text=True)
    assert p.returncode == 7
    assert "hipattn/_hipattn." in p.stderr and "no device code for gfx90a" in p.stderr


def test_probe_gfx950_with_clang22(hipc, probe_wheel_2):
    """gfx950 needs clang-22 (install-hip-toolchain.sh --with-gfx950) or a ROCm >= 6.4 compiler;
    where the compiler has it, probe_wheel_2 is built for it too (conftest.probe_archs)."""
    ok, why = accepts_arch(hipc, "gfx950")
    if not ok:
        pytest.skip(f"{hipc.path} cannot compile gfx950: {why}")
    assert ".gfx950-" in probe_wheel_2.name
    res = audit.audit_wheel(probe_wheel_2, ["gfx950"])
    assert res.ok and "gfx950" in res.objects[0].archs, res.problems
