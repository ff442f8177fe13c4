"""Rendering for recipes written outside this repository: a variant narrows the git source's
submodules (the shipped flash-attn Triton variant needs none), the local label's ROCm version
comes from what the build compiles against and says so (``version_kind``), and the cmake
backend's ``build.source_dir`` is the configure step's ``-S``. Host values are written out: a
ROCm torch and a Debian HIP root cannot both exist on this machine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rocmbuild.host.compiler import HipCompiler
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe

HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")
DEBIAN = RocmRoot(Path("/usr"), "5.2.21153", "debian", False, "/usr")


def test_flash_attn_triton_variant_fetches_no_submodule() -> None:
    recipe = load(find_recipe("flash-attn")).on_line("2.8-fork")
    triton = render(recipe, Target(arch="gfx942", variant="triton"), HOST)
    ck = render(recipe, Target(arch="gfx942", variant="ck"), HOST)
    assert triton.source.submodules == () and triton.to_json()["source"]["submodules"] == []
    assert ck.source.submodules == ("csrc/composable_kernel",)


def test_label_from_the_hip_root_the_compiler_uses() -> None:
    recipe = load(find_recipe("hip-attention-probe"))
    comp = HipCompiler(path="/usr/bin/clang++-22", kind="clang", version="22.1.8",
                       rocm_path="/usr", device_lib_path=None, flags=("--rocm-path=/usr",))
    host = replace(HOST, rocm_root=DEBIAN, compiler=comp)
    plan = render(recipe, Target(arch="gfx942"), host)
    assert plan.local_version == "rocm5.2.gfx942"
    assert plan.rocm.version_kind == "rocm-root" and "5.2.21153" in plan.rocm.version_from
    # nothing detected: the recipe's target.rocm, and provenance says so
    bare = render(recipe, Target(arch="gfx942"), replace(host, rocm_root=None))
    assert bare.rocm.version_kind == "recipe" and bare.local_version.startswith("rocm6.2.")
    # a Debian root is not used by a build that does not compile HIP (flash-attn Triton)
    tri = render(load(find_recipe("flash-attn")).on_line("2.8-fork"),
                 Target(arch="gfx942", variant="triton"),
                 replace(HOST, rocm_root=DEBIAN))
    assert tri.rocm.version_kind == "recipe"
    assert render(recipe, Target(arch="gfx942", rocm_version="7.0"), host).rocm.version_kind \
        == "flag"
