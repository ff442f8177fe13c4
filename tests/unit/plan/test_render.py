"""Rendering recipes into Plans: environment, placeholders, patch selection, ROCm version
precedence, local labels and the cache key. ``render`` is pure, so every test hands it a Host
value: a ROCm root and a ROCm torch are written as Host fields (neither exists on this machine)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.search import find_recipe

HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")
ROCM_ROOT = RocmRoot(Path("/opt/rocm-6.2.0"), "6.2.0", "rocm", True, "ROCM_PATH")
ROCM_TORCH = TorchInfo("2.5.1+rocm6.2", "6.2.41133-dd7f95766", None)


def on_fork(recipe: Recipe) -> Recipe:
    """A recipe on its oldest line (flash-attn 2.8-fork, pytorch 2.9: what these tests were
    written for); recipes without lines as they are."""
    return recipe.on_line(list(recipe.releases)[-1]) if recipe.releases else recipe


@pytest.fixture
def no_rocm() -> None:
    """Kept for the tests' signatures: render never reads the environment."""


def flash(host: Host = HOST, **kw: object) -> Plan:
    return render(load(find_recipe("flash-attn")).on_line("2.8-fork"), Target(**kw), host)  # type: ignore[arg-type]


def test_ck_plan_env(no_rocm) -> None:
    plan = flash(arch="gfx90a,gfx942", jobs=3)
    assert plan.variant == "ck"
    assert plan.env["GPU_ARCHS"] == "gfx90a;gfx942"
    assert plan.env["MAX_JOBS"] == "3"
    assert plan.env["BUILD_TARGET"] == "rocm"
    assert plan.env["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    assert plan.env["HIP_PLATFORM"] == "amd"
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in plan.env
    assert plan.mem_per_job_gb == 1.5
    assert plan.source.kind == "git" and plan.source.submodules == ("csrc/composable_kernel",)
    assert plan.local_version == "rocm6.2.gfx90a.gfx942"
    assert "--no-build-isolation" in plan.commands[0]


def test_triton_variant_and_pypi_source(no_rocm) -> None:
    plan = flash(arch="gfx942", variant="triton", source="pypi")
    assert plan.env["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert plan.mem_per_job_gb == 0.5
    assert plan.host_requires == ("torch",)
    assert plan.source.kind == "sdist" and len(plan.source.sha256) == 64


def test_bad_variant_and_source(no_rocm) -> None:
    with pytest.raises(UsageError, match="--variant: flash-attn has no variant 'cuda'"):
        flash(arch="gfx942", variant="cuda")
    with pytest.raises(UsageError, match="--source: flash-attn has no source 'conda'"):
        flash(arch="gfx942", source="conda")


def test_rocm_root_sets_paths_and_version() -> None:
    host = replace(HOST, rocm_root=ROCM_ROOT)
    plan = flash(host, arch="gfx942")
    assert plan.env["ROCM_PATH"] == plan.env["HIP_PATH"] == "/opt/rocm-6.2.0"
    assert plan.rocm.version == "6.2" and "ROCm root" in plan.rocm.version_from
    assert flash(host, arch="gfx942", rocm_version="6.4").local_version == "rocm6.4.gfx942"
    assert flash(HOST, arch="gfx942").rocm.version_from.endswith("target.rocm")  # no root


def test_rocm_torch_decides_the_label() -> None:
    plan = flash(replace(HOST, torch=ROCM_TORCH, rocm_root=replace(ROCM_ROOT, version="6.4.1")),
                 arch="gfx942")
    assert plan.host.torch == "2.5.1+rocm6.2" and plan.host.torch_kind == "rocm"
    assert plan.rocm.version == "6.2" and "torch" in plan.rocm.version_from


def test_jobs_come_from_the_host_not_this_machine() -> None:
    small = replace(HOST, cpus=64, memory_bytes=3 * 2**30, memory_source="cgroup")
    plan = flash(small, arch="gfx942")  # CK: 1.5 GiB per job
    assert plan.jobs == 2 and "3.0 GiB usable (cgroup)" in plan.jobs_reason
    assert flash(replace(HOST, cpus=3), arch="gfx942", variant="triton").jobs == 3


def test_native_arch_is_the_hosts_gpus() -> None:
    host = replace(HOST, gpus=("gfx90a",), origin="node.json")
    assert flash(host, arch="native").archs == ("gfx90a",)
    from rocmbuild.core.errors import ToolchainError

    with pytest.raises(ToolchainError, match="the host in node.json"):
        flash(replace(host, gpus=()), arch="native")


def test_cache_key_tracks_inputs_but_not_jobs(no_rocm) -> None:
    base = flash(arch="gfx942", jobs=2).cache_key
    assert flash(arch="gfx942", jobs=7).cache_key == base
    assert flash(arch="gfx90a", jobs=2).cache_key != base
    assert flash(arch="gfx942", variant="triton", jobs=2).cache_key != base
    assert flash(arch="gfx942", source="pypi", jobs=2).cache_key != base
    assert flash(arch="gfx942", rocm_version="6.4", jobs=2).cache_key != base
    assert flash(arch="gfx942", gpu_vendor="nvidia", jobs=2).cache_key != base


def write_recipe(tmp_path: Path, patch_text: str, when: str) -> Path:
    (tmp_path / "p.patch").write_text(patch_text)
    sha = hashlib.sha256(patch_text.encode()).hexdigest()
    (tmp_path / "src").mkdir()
    recipe = tmp_path / "demo.toml"
    recipe.write_text(f"""schema_version = 1
[package]
name = "demo"
[source]
path = "src"
[arch]
env = {{ GPU_ARCHS = "{{archs}}" }}
[build]
default_variant = "a"
[variants.a]
[variants.b]
[[patches]]
file = "p.patch"
sha256 = "{sha}"
reason = "test"
when = {when}
""")
    return recipe


def test_patch_when_selection_and_patch_hash_in_key(tmp_path: Path, no_rocm) -> None:
    recipe = load(write_recipe(tmp_path, "one\n", '{ variant = "b", gpu_vendor = "nvidia" }'))
    assert render(recipe, Target(arch="gfx942", variant="a"), HOST).patches == ()
    assert render(recipe, Target(arch="gfx942", variant="b"), HOST).patches == ()
    chosen = render(recipe, Target(arch="gfx942", variant="b", gpu_vendor="nvidia"), HOST)
    assert [p.reason for p in chosen.patches] == ["test"]
    other = tmp_path / "other"
    other.mkdir()
    recipe2 = load(write_recipe(other, "two\n", '{ variant = "b", gpu_vendor = "nvidia" }'))
    chosen2 = render(recipe2, Target(arch="gfx942", variant="b", gpu_vendor="nvidia"), HOST)
    assert chosen2.patches[0].sha256 != chosen.patches[0].sha256
    assert chosen2.cache_key != chosen.cache_key


def test_path_source_key_follows_tree_content(tmp_path: Path, no_rocm) -> None:
    recipe = load(write_recipe(tmp_path, "x\n", '{ variant = "b" }'))
    (tmp_path / "src" / "a.txt").write_text("1")
    k1 = render(recipe, Target(arch="gfx942"), HOST).cache_key
    (tmp_path / "src" / "a.txt").write_text("2")
    k2 = render(recipe, Target(arch="gfx942"), HOST).cache_key
    assert k2 != k1
    # outputs of an earlier local build are not copied by fetch, so they do not move the key
    (tmp_path / "src" / "demo.egg-info").mkdir()
    (tmp_path / "src" / "demo.egg-info" / "PKG-INFO").write_text("x")
    assert render(recipe, Target(arch="gfx942"), HOST).cache_key == k2


def test_python_tag_is_the_hosts() -> None:
    plan = flash(replace(HOST, python="3.12", python_tag="cp312"), arch="gfx942")
    assert plan.host.python_tag == "cp312"
    assert flash(arch="gfx942").cache_key != plan.cache_key
