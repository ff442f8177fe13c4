"""Compatibility guard and wheel metadata, as pure functions."""

from __future__ import annotations

import zipfile

from rocmbuild.validate import install as inst

ENV_CPU = {"version": "2.13.0+cpu", "hip": None, "cxx11_abi": True}
ENV_ROCM = {"version": "2.5.1+rocm6.2", "hip": "6.2.41133-dd7f95766", "cxx11_abi": False}


def _meta(version, hip, abi, rocm=None):
    return {"torch": {"version": version, "hip": hip, "cxx11_abi": abi}, "rocm_version": rocm,
            "recipe": "flash-attn"}


def test_match_passes():
    g = inst.guard(_meta("2.5.1+rocm6.2", "6.2.41133", False, "6.2"), ENV_ROCM, native=True)
    assert not g.problems and not g.warnings


def test_rocm_wheel_on_cpu_torch_names_every_mismatch():
    g = inst.guard(_meta("2.5.1+rocm6.2", "6.2.41133", False, "6.2"), ENV_CPU, native=True)
    text = " ".join(g.problems)
    assert "torch version: wheel built against 2.5.1+rocm6.2, environment has 2.13.0+cpu" in text
    assert "not a ROCm build" in text
    assert "_GLIBCXX_USE_CXX11_ABI: wheel 0, environment torch 1" in text
    assert "rocmbuild build flash-attn" in inst.guard_hint(_meta("2.5.1", None, None))


def test_hip_minor_mismatch():
    env = dict(ENV_ROCM, hip="6.3.42131")
    g = inst.guard(_meta("2.5.1+rocm6.2", "6.2.41133", False), env, native=True)
    assert g.problems == ["HIP: wheel built for HIP 6.2.41133, environment torch has HIP 6.3.42131"]


def test_pure_python_wheel_only_warns():
    g = inst.guard(_meta("2.5.1+rocm6.2", "6.2.41133", False), ENV_CPU, native=False)
    assert not g.problems and len(g.warnings) == 3


def test_no_metadata_warns_and_skips():
    g = inst.guard(None, ENV_CPU, native=True, wheel_name="x.whl")
    assert not g.problems and "no rocmbuild.json" in g.warnings[0]


def test_requirements_never_include_torch(tmp_path):
    p = tmp_path / "flash_attn-1-py3-none-any.whl"
    requires = ("torch", "einops", "torch>=2.0; python_version>'3'", "pytest; extra == 'test'",
                "flash-attn")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("flash_attn-1.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: flash_attn\nVersion: 1\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    w = inst.read_wheel(p)
    assert w.requires_dist == requires
    assert inst.requirements_to_install([w]) == ["einops"]


def test_read_wheel_top_level_from_record(tmp_path):
    p = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo/__init__.py", "")
        z.writestr("demo_ext.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")
        z.writestr("single.py", "")
        z.writestr("demo-1.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: torch\n")
        z.writestr("demo-1.0.dist-info/RECORD", "")
    w = inst.read_wheel(p)
    assert (w.name, str(w.version), w.native, w.provenance) == ("demo", "1.0", True, None)
    assert w.top_level == ("demo", "demo_ext", "single")
    assert w.requires_dist == ("torch",)
