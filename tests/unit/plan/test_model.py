"""``uses_torch``: whether a plan's build uses torch, decided from the plan alone (the build
stage imports torch for its C++ ABI flag only then). A plan that does not use torch is rendered
as on a host without torch: no host torch in its key, provenance or ROCm version. The hosts are
Host values (render is pure): a ROCm torch and a HIP compiler that do not exist here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.host.compiler import HipCompiler
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan.model import BuildEnvSpec, uses_torch
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.unit.plan.test_render import on_fork

CLANG = HipCompiler("/usr/bin/clang++-22", "clang", "22.0.0", "/opt/rocm-6.2.0", None, ())
ROCM_TORCH = TorchInfo("2.5.1+rocm6.4", "6.4.43482-0f2d60242", None)
HOST = Host(python="3.11", python_tag="cp311", platform="linux", torch=ROCM_TORCH,
            rocm_root=RocmRoot(Path("/opt/rocm-6.2.0"), "6.2.0", "rocm", True, "ROCM_PATH"),
            compiler=CLANG, cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")
NO_TORCH = replace(HOST, torch=TorchInfo("", None, None))


@pytest.mark.parametrize(("host_requires", "python_requires", "build_env", "label", "want"), [
    ((), (), None, False, False),
    (("hip-compiler",), ("cmake", "ninja"), None, False, False),
    (("hip-compiler",), ("scikit-build-core",), BuildEnvSpec(("cmake>=3.27",)), False, False),
    (("rocm-sdk>=6.0",), ("torchvision", "pytorch-triton-rocm"), None, False, False),
    ((), (), None, True, True),                                  # target.label_torch
    (("rocm-torch>=2.2,<2.14",), (), None, False, True),
    (("torch",), (), None, False, True),
    ((), ("Torch",), None, False, True),                        # names are case-insensitive
    ((), (), BuildEnvSpec(("torch >=2.4",)), False, True),
    ((), (), BuildEnvSpec(("rocm_torch",)), False, True),        # normalised like PEP 503
    ((), (), BuildEnvSpec((), requirements_file="req.txt"), False, True),  # unread before fetch
])
def test_uses_torch(host_requires: tuple[str, ...], python_requires: tuple[str, ...],
                    build_env: BuildEnvSpec | None, label: bool, want: bool) -> None:
    assert uses_torch(host_requires, python_requires, build_env, label) is want


@pytest.mark.parametrize(("recipe", "variant", "want"), [
    ("flash-attn", "ck", True), ("flash-attn", "triton", True), ("pytorch", None, True),
    ("hip-attention-probe", None, False), ("ck-fmha-probe", None, False),
])
def test_shipped_recipes(recipe: str, variant: str | None, want: bool) -> None:
    plan = render(on_fork(load(find_recipe(recipe))), Target(arch="gfx942", variant=variant), HOST)
    assert plan.uses_torch is want
    if want:  # as before: the host's ROCm torch is in the plan (and decides its key)
        assert plan.host.torch == ROCM_TORCH.version and plan.host.torch_kind == "rocm"
        return
    # the build does not use torch: planned exactly as on a host without one
    assert (plan.host.torch, plan.host.torch_hip, plan.host.torch_kind) == (None, None, "none")
    assert plan.rocm.version == "6.2" and plan.rocm.version_kind == "rocm-root"  # not torch's
    alone = render(on_fork(load(find_recipe(recipe))), Target(arch="gfx942", variant=variant),
                   NO_TORCH)
    assert alone == plan and alone.cache_key == plan.cache_key


def test_hipify_with_torch_uses_torch(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    recipe = tmp_path / "r.toml"
    recipe.write_text('schema_version = 1\n[package]\nname = "demo"\n[source]\npath = "src"\n'
                      '[hipify]\ntool = "torch"\n')
    plan = render(on_fork(load(recipe)), Target(arch="gfx942"), HOST)
    assert plan.uses_torch and "torch" in plan.host_requires
    assert plan.host.torch == ROCM_TORCH.version and plan.rocm.version == "6.4"
