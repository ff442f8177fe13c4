"""The host check for what a build really needs: ROCm components found by their files under the
ROCm root, the recipe's SDK and torch ranges, and the torch HIP vs SDK comparison.

No ROCm SDK or ROCm torch can exist on this machine: the ROCm roots are fixture trees (small dirs
with a .info/version and the CMake config or library files a real install has, all empty), and
the ROCm torch is a TorchInfo value."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core import components as table
from rocmbuild.core.errors import ToolchainError
from rocmbuild.host import components, toolchain
from rocmbuild.host import detect as hostmod
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan import render as render_mod
from rocmbuild.plan import requirements
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.conftest import make_rocm_root
from tests.unit.plan.test_render import on_fork

ROCM_TORCH = TorchInfo("2.5.1+rocm6.2", "6.2.41133-dd7f95766", None)


def host_for(root: Path, torch: TorchInfo = ROCM_TORCH) -> Host:
    found = toolchain.find_rocm_root(str(root))
    return Host(python="3.11", python_tag="cp311", platform="linux", torch=torch,
                rocm_root=found, compiler=None, cpus=16, memory_bytes=64 * 2**30,
                memory_source="MemAvailable")


def plan(recipe: str, h: Host, variant: str | None = None) -> Plan:
    return render(on_fork(load(find_recipe(recipe))), Target(arch="gfx942", variant=variant), h)


# --------------------------------------------------------------------------- the table


def test_each_file_kind_counts(tmp_path: Path) -> None:
    """A hand-written tree: one component by <name>-config.cmake, one by <Name>Config.cmake under
    lib64, one by its versioned library only; a header-only one without its config is absent."""
    root = tmp_path / "rocm"
    (root / "lib/cmake/rccl").mkdir(parents=True)
    (root / "lib/cmake/rccl/rccl-config.cmake").write_text("")
    (root / "lib64/cmake/rocblas").mkdir(parents=True)
    (root / "lib64/cmake/rocblas/RocblasConfig.cmake").write_text("")
    (root / "lib/libMIOpen.so.1.0.60200").write_text("")
    (root / "include/rocprim").mkdir(parents=True)  # headers alone are not the package config
    got = {n: components.evidence(root, c) for n, c in table.COMPONENTS.items()}
    assert got["rccl"] == "lib/cmake/rccl/rccl-config.cmake"
    assert got["rocblas"] == "lib64/cmake/rocblas/RocblasConfig.cmake"
    assert got["miopen"] == "lib/libMIOpen.so.1.0.60200"
    assert got["rocprim"] is None and got["hipblaslt"] is None
    assert components.find(root) == ("rocblas", "miopen", "rccl")


def test_debian_multiarch_layout(tmp_path: Path) -> None:
    """Debian's /usr (as on this machine's HIP 5.2 packages): configs and libraries under
    lib/x86_64-linux-gnu; a .so name that merely starts like another library does not count."""
    usr = tmp_path / "usr"
    multi = usr / "lib/x86_64-linux-gnu"
    (multi / "cmake/hip").mkdir(parents=True)
    (multi / "cmake/hip/hip-config.cmake").write_text("")
    (multi / "libamd_comgr.so.2").write_text("")
    (multi / "libhiprtc-builtins.so.5").write_text("")  # not libhiprtc.so*
    assert components.find(usr) == ("hip", "amd_comgr")
    assert components.locate(usr, ["amd_comgr", "hiprtc"]) == {
        "amd_comgr": "lib/x86_64-linux-gnu/libamd_comgr.so.2", "hiprtc": None}


def test_every_component_names_apt_and_dnf_packages() -> None:
    for c in table.COMPONENTS.values():
        assert c.apt and c.dnf and c.looked_for(), c.name
    assert table.COMPONENTS["miopen"].packages() == "apt miopen-hip-dev / dnf miopen-hip-devel"
    hint = table.install_hint(["hip", "hiprtc", "rccl"])  # hip-dev once
    assert hint.startswith("sudo apt install hip-dev rccl-dev (RHEL/SLES: sudo dnf install "
                           "hip-devel rccl-devel)")


def test_find_takes_milliseconds(tmp_path: Path) -> None:
    import time

    root = make_rocm_root(tmp_path / "rocm")
    t = time.perf_counter()
    assert len(components.find(root)) == len(table.COMPONENTS)
    assert time.perf_counter() - t < 0.5


def test_components_are_looked_for_only_when_a_plan_needs_them(tmp_path: Path) -> None:
    """A cache hit of a plan with no build.rocm_components does not list the root's lib dirs
    (want_components=False: None, "not looked for"); the recipes that need them ask for them.
    The ROCm root is a fixture tree (make_rocm_root): no real ROCm exists here."""
    root = make_rocm_root(tmp_path / "rocm")
    fa = load(find_recipe("flash-attn")).on_line("2.8-fork")
    assert render_mod.uses_rocm_components(fa, "ck")
    assert not render_mod.uses_rocm_components(fa, "triton")
    assert render_mod.uses_rocm_components(load(find_recipe("pytorch")))
    skipped = hostmod.detect(rocm_path=str(root), want_compiler=False, want_components=False)
    assert skipped.rocm_root is not None and skipped.rocm_root.components is None
    full = hostmod.detect(rocm_path=str(root), want_compiler=False)
    assert full.rocm_root is not None
    assert full.rocm_root.components == tuple(table.COMPONENTS)
    triton = plan("flash-attn", skipped, "triton")
    assert not triton.rocm_components and requirements.missing_components(triton, skipped) == []


# --------------------------------------------------------------------------- judging a plan


def test_complete_root_passes(tmp_path: Path) -> None:
    h = host_for(make_rocm_root(tmp_path / "rocm"))
    for recipe in ("flash-attn", "pytorch"):
        p = plan(recipe, h)
        assert p.rocm_components, recipe
        assert requirements.missing_components(p, h) == []
    assert requirements.missing(plan("flash-attn", h), h) == []


def test_missing_rccl_and_miopen_are_both_named(tmp_path: Path) -> None:
    h = host_for(make_rocm_root(tmp_path / "rocm", "6.4.1", omit=("rccl", "miopen")))
    p = plan("pytorch", h)
    assert requirements.missing_components(p, h) == ["miopen", "rccl"]
    with pytest.raises(ToolchainError) as exc:
        requirements.preflight(p, h)
    msg = exc.value.message
    assert "\n" not in msg
    assert "miopen (apt miopen-hip-dev / dnf miopen-hip-devel)" in msg
    assert "rccl (apt rccl-dev / dnf rccl-devel)" in msg
    assert str(tmp_path / "rocm") in msg
    assert exc.value.hint and "sudo apt install miopen-hip-dev rccl-dev" in exc.value.hint
    assert "sudo dnf install miopen-hip-devel rccl-devel" in exc.value.hint
    # flash-attn's CK build needs neither
    assert requirements.missing(plan("flash-attn", h, "ck"),
                           replace(h, torch=replace(ROCM_TORCH, hip="6.4.43482"))) == []


def test_torch_built_for_another_hip_is_refused(tmp_path: Path) -> None:
    h = host_for(make_rocm_root(tmp_path / "rocm", "6.4.1"))  # torch is HIP 6.2
    p = plan("flash-attn", h, "ck")
    lacking = requirements.missing(p, h)
    assert len(lacking) == 1 and "torch.version.hip 6.2.41133" in lacking[0]
    assert "ROCm 6.4.1 of the ROCm root" in lacking[0]
    with pytest.raises(ToolchainError) as exc:
        requirements.preflight(p, h)
    assert exc.value.hint and "download.pytorch.org/whl/rocm" in exc.value.hint
    # the Triton variant compiles nothing against either: no comparison
    assert requirements.missing(plan("flash-attn", h, "triton"), h) == []
    # same major.minor, another patch level: fine
    assert requirements.missing(p, replace(h, torch=replace(ROCM_TORCH, hip="6.4.43483"))) == []


@pytest.mark.parametrize(("torch", "sdk", "needle"), [
    ("2.14.0+rocm6.4", "6.4.1", "torch >=2.2,<2.14 (found torch 2.14.0+rocm6.4)"),
    ("2.14.0.dev20260301+rocm6.4", "6.4.1", "torch >=2.2,<2.14"),
    ("2.1.2+rocm6.0", "6.0.2", "torch >=2.2,<2.14"),
    ("2.9.1+rocm7.1", "7.1.0", "a ROCm SDK >=6.0,<7.1 with hipcc (found ROCm 7.1.0"),
])
def test_outside_the_checked_range_is_refused_with_the_reason(
        tmp_path: Path, torch: str, sdk: str, needle: str) -> None:
    hip = sdk.rsplit(".", 1)[0] + ".99999"
    h = host_for(make_rocm_root(tmp_path / "rocm", sdk), TorchInfo(torch, hip, None))
    lacking = requirements.missing(plan("flash-attn", h, "ck"), h)
    assert len(lacking) == 1 and needle in lacking[0], lacking
    assert "-std=c++17" in lacking[0]  # the recipe's host_requires_reason


def test_in_range_versions_pass(tmp_path: Path) -> None:
    h = host_for(make_rocm_root(tmp_path / "rocm", "7.0.2"),
                 TorchInfo("2.13.1+rocm7.0", "7.0.51831", None))
    assert requirements.missing(plan("flash-attn", h, "ck"), h) == []


def test_saved_host_carries_components_and_old_files_still_load(tmp_path: Path) -> None:
    h = host_for(make_rocm_root(tmp_path / "rocm", omit=("hipblaslt",)))
    data = h.to_json()
    assert "hipblaslt" not in data["rocm_root"]["components"]
    f = tmp_path / "host.json"
    f.write_text(json.dumps(data))
    again = hostmod.load(f)
    assert again.rocm_root == h.rocm_root
    lacking = requirements.missing(plan("flash-attn", again, "ck"), again)
    assert len(lacking) == 1 and "hipblaslt (apt hipblaslt-dev" in lacking[0]
    # a host file from before components were recorded: loads, and says it cannot judge them
    del data["rocm_root"]["components"]
    f.write_text(json.dumps(data))
    old = hostmod.load(f)
    assert old.rocm_root is not None and old.rocm_root.components is None
    lacking = requirements.missing(plan("flash-attn", old, "ck"), old)
    assert len(lacking) == 1 and f"not recorded in {f}" in lacking[0]
    assert "doctor --json" in (requirements.hint(plan("flash-attn", old, "ck"), lacking, old) or "")
    data["rocm_root"]["components"] = ["rccl", 3]
    f.write_text(json.dumps(data))
    with pytest.raises(Exception, match="rocm_root.components: expected strings"):
        hostmod.load(f)


def test_docs_table_matches_the_code() -> None:
    """docs/host-checks.md lists every component with its apt and dnf package."""
    from tests.conftest import REPO

    doc = (REPO / "docs/host-checks.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`"): [c.strip() for c in line.split("|")[3:5]]
            for line in doc.splitlines() if line.startswith("| `")}
    for c in table.COMPONENTS.values():
        assert rows.get(c.name) == [c.apt, c.dnf], c.name


def test_a_build_only_torch_brings_hipcc_for_its_own_sdk(tmp_path: Path) -> None:
    """An SDK tree without bin/hipcc (Debian's packaging: scripts/install-rocm-sdk.sh) is an SDK
    with hipcc for a build-only torch made against exactly that tree (it brings its own hipcc
    as cpp_extension's ROCM_HOME), and for no other torch."""
    root = make_rocm_root(tmp_path / "rocm", "7.0.2")
    (root / "bin/hipcc").unlink()
    torch = TorchInfo("2.13.0+cpu", "7.0.51831", None, rocm="7.0.2")
    h = host_for(root, torch)
    p = plan("flash-attn", h, "ck")
    assert any("without bin/hipcc" in m for m in requirements.missing(p, h))
    mine = replace(h, torch=replace(torch, build_only_sdk=str(root)))
    assert requirements.missing(p, mine) == []
    other = replace(h, torch=replace(torch, build_only_sdk=str(tmp_path / "other-sdk")))
    assert any("without bin/hipcc" in m for m in requirements.missing(p, other))
