"""What a build sees of the host (hostenv's allow-list, build.pass_env), how env lines are logged
(redacted), and the label and arch arithmetic: plain gfx names for allow-lists that know no
target features, the torch part of an extension's label (target.label_torch), and the ROCm
version of a recipe that builds torch itself (target.rocm_from = "sdk"). ``render`` is pure, so
a ROCm root and a ROCm torch are Host fields here (neither exists on this machine)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.artifacts import label
from rocmbuild.artifacts.buildfacts import TorchBuild
from rocmbuild.core import gfx as arch
from rocmbuild.core import hostenv, run
from rocmbuild.core.errors import BuildError
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.stages.tag import local_label
from tests.unit.plan.test_render import HOST, ROCM_ROOT, ROCM_TORCH, on_fork


def plan_of(recipe: str, host=HOST, **kw: object) -> Plan:
    return render(on_fork(load(find_recipe(recipe))), Target(**kw), host)  # type: ignore[arg-type]


# ------------------------------------------------------------------ host environment


def test_only_allowed_host_variables_pass() -> None:
    environ = {"PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C.UTF-8", "https_proxy": "x",
               "CMAKE_CXX_COMPILER_LAUNCHER": "ccache", "CCACHE_DIR": "/c",
               "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE", "FOO": "1", "CFLAGS": "-O0",
               "PIP_NO_BUILD_ISOLATION": "0", "PIP_INDEX_URL": "https://i", "HSA_XNACK": "1",
               "MY_VENDOR_FLAGS": "-x", "MY_A": "a", "MYB": "b"}
    assert sorted(hostenv.passed(environ)) == [
        "CCACHE_DIR", "CMAKE_CXX_COMPILER_LAUNCHER", "HOME", "LC_ALL", "PATH", "PIP_INDEX_URL",
        "https_proxy"]
    assert set(hostenv.passed(environ, ["MY_VENDOR_FLAGS", "MY_*"])) >= {
        "MY_VENDOR_FLAGS", "MY_A"}
    assert "MYB" not in hostenv.passed(environ, ["MY_*"])
    # the plan's values win over the host's
    env = hostenv.child_env(environ, {"PATH": "/venv/bin:/usr/bin", "GPU_ARCHS": "gfx942"})
    assert env["PATH"] == "/venv/bin:/usr/bin" and env["GPU_ARCHS"] == "gfx942"
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in env and "FOO" not in env


@pytest.mark.parametrize("name", ["MY_VAR", "http_proxy", "MY_*", "CMAKE_*_LAUNCHER", "_X"])
def test_pass_env_name_pattern_accepts(name: str) -> None:
    assert hostenv.NAME.match(name)


@pytest.mark.parametrize("name", ["*", "", "1X", "MY VAR", "A=B", "**", "A*B*", "$HOME"])
def test_pass_env_name_pattern_refuses(name: str) -> None:
    assert not hostenv.NAME.match(name)


def test_env_log_lines_hide_secrets() -> None:
    assert run.env_line("https_proxy", "http://user:pw@proxy:3128") == \
        "https_proxy=http://***@proxy:3128"
    assert run.env_line("HF_TOKEN", "hf_abc") == "HF_TOKEN=***"
    assert run.env_line("GPU_ARCHS", "gfx942") == "GPU_ARCHS=gfx942"


def test_recipe_pass_env_reaches_the_plan(tmp_path: Path) -> None:
    recipe = tmp_path / "r.toml"
    recipe.write_text('schema_version = 1\n[package]\nname = "x"\n[source]\npath = "."\n'
                      '[build]\npass_env = ["MY_VAR", "VENDOR_*"]\n')
    plan = render(on_fork(load(recipe)), Target(arch="gfx942"), HOST)
    assert plan.pass_env == ("MY_VAR", "VENDOR_*")
    assert plan.to_json()["pass_env"] == ["MY_VAR", "VENDOR_*"]


# ------------------------------------------------------------------ arch strings


def test_arch_names_drop_features_and_repeats() -> None:
    assert arch.names(["gfx942:sramecc+:xnack-", "gfx90a:xnack+", "gfx90a:xnack-"]) == (
        "gfx942", "gfx90a")


def test_flash_attn_gpu_archs_are_plain_while_the_plan_keeps_features() -> None:
    plan = plan_of("flash-attn", arch="gfx942:sramecc+:xnack-,gfx90a")
    assert plan.env["GPU_ARCHS"] == "gfx942;gfx90a"  # setup.py's allow-list: plain names
    assert plan.archs == ("gfx942:sramecc+:xnack-", "gfx90a")  # what the audit requires
    assert plan.local_version == "rocm6.2.gfx942.gfx90a"


def test_pytorch_and_probe_keep_features() -> None:
    assert plan_of("pytorch", arch="gfx90a:xnack+").env["PYTORCH_ROCM_ARCH"] == "gfx90a:xnack+"


# ------------------------------------------------------------------ labels


def test_torch_part() -> None:
    assert label.torch_part("2.9.1+rocm6.4", True) == "torch2.9.cxx11abitrue"
    assert label.torch_part("2.10.0a0+git1234", False) == "torch2.10.cxx11abifalse"
    with pytest.raises(ValueError, match="no major.minor"):
        label.torch_part("nightly", True)
    assert label.local("6.2", ("gfx942:xnack-",), "torch2.9.cxx11abitrue") == \
        "rocm6.2.torch2.9.cxx11abitrue.gfx942"


def test_ck_label_carries_the_builds_torch() -> None:
    plan = plan_of("flash-attn", host=replace(HOST, torch=ROCM_TORCH), arch="gfx942")
    assert plan.label_torch
    facts = TorchBuild("2.9.1+rocm6.4", "6.4.1", None, True)
    got = local_label(plan, facts, Path("torch.log"))
    assert got == "rocm6.2.torch2.9.cxx11abitrue.gfx942"
    # PEP 440: a local label is lower-case letters, digits and dots
    assert got == got.lower() and all(c.isalnum() or c == "." for c in got)
    # the Triton variant is pure Python: no torch in its label
    triton = plan_of("flash-attn", arch="gfx942", variant="triton")
    assert not triton.label_torch
    assert local_label(triton, facts, Path("t.log")) == "rocm6.2.gfx942"


def test_the_plan_and_the_wheel_have_one_label() -> None:
    """``Plan.label`` is the one place the label is made: the planned label and the tag stage's
    follow the plan's ROCm version and archs together, also in a plan changed after render."""
    plan = plan_of("flash-attn", host=replace(HOST, torch=ROCM_TORCH), arch="gfx942")
    moved = replace(plan, rocm=replace(plan.rocm, version="6.4"), archs=("gfx950", "gfx942"))
    assert moved.local_version == "rocm6.4.gfx950.gfx942" == moved.to_json()["local_version"]
    facts = TorchBuild("2.9.1+rocm6.4", "6.4.1", None, True)
    assert local_label(moved, facts, Path("t.log")) == \
        "rocm6.4.torch2.9.cxx11abitrue.gfx950.gfx942"


@pytest.mark.parametrize("facts", [None, TorchBuild(), TorchBuild("2.9.1", None, None, None)])
def test_ck_label_without_torch_facts_fails(facts: TorchBuild | None) -> None:
    plan = plan_of("flash-attn", arch="gfx942")
    with pytest.raises(BuildError, match="target.label_torch: the torch the build compiled") as e:
        local_label(plan, facts, Path("/w/torch.log"))
    assert "/w/torch.log" in (e.value.hint or "")


def test_pytorch_label_comes_from_the_sdk_not_the_venv_torch() -> None:
    host = replace(HOST, torch=replace(ROCM_TORCH, version="2.5.1+rocm6.1", hip="6.1.1"),
                   rocm_root=replace(ROCM_ROOT, version="6.4.1"))
    torch_plan = plan_of("pytorch", host=host, arch="gfx942")
    assert torch_plan.rocm.version == "6.4" and torch_plan.rocm.version_kind == "rocm-root"
    assert "rocm_from = sdk" in torch_plan.rocm.version_from
    assert torch_plan.local_version == "rocm6.4.gfx942"
    # an extension (rocm_from = auto) keeps following the torch it links
    assert plan_of("flash-attn", host=host, arch="gfx942").rocm.version == "6.1"
    # without an SDK: the recipe's target.rocm, never the venv's torch
    bare = plan_of("pytorch", host=replace(host, rocm_root=None), arch="gfx942")
    assert bare.rocm.version_kind == "recipe" and bare.rocm.version == "6.4"


def test_validation_venv_does_not_inherit_a_variant_switch(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """An exported FLASH_ATTENTION_TRITON_AMD_ENABLE would make a CK wheel's import pick the
    Triton backend in the validation venv; only the wheel's own runtime_env may set it."""
    from rocmbuild.validate.install import Venv

    for k, v in {"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE", "PYTHONPATH": "/shadow",
                 "HIP_VISIBLE_DEVICES": "1", "PIP_ONLY_BINARY": ":all:", "FOO": "x"}.items():
        monkeypatch.setenv(k, v)
    venv = Venv(tmp_path, tmp_path / "bin/python", None, tmp_path / "log", [])
    env = venv.env()
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in env and "FOO" not in env
    assert "PYTHONPATH" not in env
    assert env["HIP_VISIBLE_DEVICES"] == "1" and env["PIP_ONLY_BINARY"] == ":all:"
    assert env["PATH"].startswith(str(tmp_path / "bin"))
    triton = venv.env({"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"})  # the wheel's runtime_env
    assert triton["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
