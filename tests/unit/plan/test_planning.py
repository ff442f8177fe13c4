"""Release lines ([releases.<name>]): which line a host gets (``plan.planning.plan``), forcing
one, and a host that fits none. The hosts are Host values built here: a ROCm root and a ROCm
torch cannot exist on this machine, so they are written as fields (paths that are not read)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import ToolchainError, UsageError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import PIP_WHERE, RocmRoot, TorchInfo
from rocmbuild.plan import planning
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.search import find_recipe
from tests.conftest import make_rocm_root

BASE = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")


def host(rocm: str, torch: str, hip: str | None = None) -> Host:
    """A host with ROCm ``rocm`` under /opt/rocm-<rocm> and a ROCm torch ``torch`` built with
    HIP ``hip`` (default: the ROCm version; from ROCm 10 the two differ)."""
    hip = hip or rocm
    return replace(BASE, rocm_root=RocmRoot(Path(f"/opt/rocm-{rocm}"), rocm, "rocm", True,
                                            "ROCM_PATH"),
                   torch=TorchInfo(f"{torch}+rocm{'.'.join(rocm.split('.')[:2])}",
                                   f"{hip}.12345-abcdef", None,
                                   rocm=rocm if hip != rocm else None))  # torch.version.rocm


HOSTS = {
    "rocm6.2-torch2.5": host("6.2.4", "2.5.1"),
    "rocm6.4-torch2.9": host("6.4.1", "2.9.1"),
    "rocm7.0-torch2.9": host("7.0.2", "2.9.1"),
    "rocm7.1-torch2.13": host("7.1.1", "2.13.0"),
    "rocm7.2-torch2.13": host("7.2.0", "2.13.0"),
    "rocm10.0-torch2.13": host("10.0.0", "2.13.0", hip="7.15.0"),  # vLLM's ROCm base image
    "rocm7.14-torch2.14": host("7.14.0", "2.14.0"),
    "rocm10.1-torch2.15": host("10.1.0", "2.15.0", hip="7.16.0"),
}


def flash() -> Recipe:
    return load(find_recipe("flash-attn"))


@pytest.mark.parametrize(("name", "line"), [
    ("rocm6.2-torch2.5", "2.8-fork"),
    ("rocm7.0-torch2.9", "2.8-fork"),
    ("rocm7.1-torch2.13", "2.8.3"),
    ("rocm7.2-torch2.13", "2.8.3"),
    ("rocm10.0-torch2.13", "2.8.3"),
    ("rocm7.14-torch2.14", "main"),
])
def test_the_newest_line_whose_ranges_the_host_satisfies(name: str, line: str) -> None:
    plan = planning.plan(flash(), Target(arch="gfx942"), HOSTS[name])
    assert plan.release == line
    assert plan.release_why.startswith("newest line whose ranges this host satisfies: ")
    assert ", ".join(plan.host_requires) in plan.release_why
    if line != "main":  # main was tried first and named with what it lacks
        assert "(newer: main needs a ROCm torch >=2.14 (found torch " in plan.release_why
    if line == "2.8.3":  # C++17 with the ROCm 7 fixes: Dao-AILab 0e60e394, CK gitlink e8709c24
        assert plan.source.commit.startswith("0e60e394") and plan.env["OPT_DIM"]
    elif line == "2.8-fork":
        assert "2.8.3 needs a ROCm SDK >=7.1,<10.1 with hipcc (found ROCm " in plan.release_why
    else:
        assert plan.source.commit.startswith("0251105a") and "newer" not in plan.release_why


@pytest.mark.parametrize("name", ["rocm10.1-torch2.15"])
def test_a_host_that_fits_no_line_gets_one_line_per_line(name: str) -> None:
    with pytest.raises(ToolchainError) as info:
        planning.plan(flash(), Target(arch="gfx942"), HOSTS[name])
    first, *per_line = info.value.message.splitlines()
    assert first == "flash-attn: no release line fits this host:"
    assert [p.split()[0] for p in per_line] == ["main", "2.8.3", "2.8-fork"]
    assert all(" needs " in p for p in per_line)
    # the wording of requirements.missing, with the recipe's reason for the bounds
    assert "a ROCm SDK >=7.1,<10.1 with hipcc (found ROCm" in per_line[1]
    assert "a ROCm SDK >=6.0,<7.1 with hipcc (found ROCm" in per_line[2]
    assert "--release NAME" in (info.value.hint or "")


def ck_only_main() -> Recipe:
    """flash-attn with its main line limited to CK (as it was before main built Triton)."""
    r = flash()
    main = replace(r.releases["main"], offers=("ck",), offers_reason="CK only, for this test")
    return replace(r, releases={**r.releases, "main": main})


def test_a_line_without_the_variant_is_passed_over_with_its_reason() -> None:
    """A line that builds ck only: --variant triton on a torch 2.14 host gets the fork's line,
    whose Triton variant needs only a torch (the 2.8.3 line is CK only in the recipe)."""
    plan = planning.plan(ck_only_main(), Target(arch="gfx942", variant="triton"),
                         HOSTS["rocm7.14-torch2.14"])
    assert plan.release == "2.8-fork" and plan.variant == "triton"
    assert "main does not build variant 'triton' (CK only, for this test)" in plan.release_why
    assert "2.8.3 does not build variant 'triton' (" in plan.release_why


def test_main_builds_triton_from_the_aiter_wheel() -> None:
    """main's Triton variant: aiter (its default variant, triton) is planned first, patch 0002
    (and not the fork's 0001) applies, and aiter's runtime env is the wheel's too."""
    plan = planning.plan(flash(), Target(arch="gfx942", variant="triton", release="main"), BASE)
    (aiter,) = plan.depends
    assert (aiter.recipe, aiter.variant, aiter.package) == ("aiter", "triton", "amd-aiter")
    assert aiter.env["AITER_TRITON_ONLY"] == "1"
    assert [p.file.name for p in plan.patches] == ["0002-main-aiter-from-build-env.patch"]
    assert plan.runtime_env == {"AITER_TRITON_ONLY": "1",
                                "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}
    assert plan.env["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert plan.source.submodules == () and plan.build_env is not None
    ck = planning.plan(flash(), Target(arch="gfx942", release="main"), BASE)
    assert ck.depends == () and ck.patches == ()  # CK needs no aiter (variants.ck.depends = [])
    fork = planning.plan(flash(), Target(arch="gfx942", variant="triton", release="2.8-fork",
                                         gpu_vendor="nvidia"), BASE)
    assert fork.depends == () and "AITER_TRITON_ONLY" not in fork.runtime_env
    assert [p.file.name for p in fork.patches] == [
        "0001-triton-amd-drop-amd-only-autotune-keys-on-non-hip.patch"]


def test_release_forces_a_line_whatever_the_host() -> None:
    plan = planning.plan(flash(), Target(arch="gfx942", release="main"), HOSTS["rocm6.2-torch2.5"])
    assert plan.release == "main" and plan.release_why == "forced by --release main"
    assert plan.host_requires == ("rocm-torch>=2.14", "rocm-sdk>=7.0,<8")


def test_the_line_is_in_the_cache_key_and_the_reason_is_not() -> None:
    recipe, h = flash(), HOSTS["rocm7.0-torch2.9"]
    picked = planning.plan(recipe, Target(arch="gfx942"), h)
    forced = planning.plan(recipe, Target(arch="gfx942", release="2.8-fork"), h)
    main = planning.plan(recipe, Target(arch="gfx942", release="main"), h)
    assert picked.release_why != forced.release_why
    assert picked.cache_key == forced.cache_key != main.cache_key
    assert picked.inputs_json()["release"] == "2.8-fork"
    assert "release_why" not in picked.inputs_json()  # provenance: the same bytes anywhere


def test_unknown_release_is_a_usage_error_listing_the_lines() -> None:
    with pytest.raises(UsageError, match="has no release line 'mian' \\(did you mean main") as e:
        planning.plan(flash(), Target(arch="gfx942", release="mian"), HOSTS["rocm6.2-torch2.5"])
    assert e.value.hint == "lines (newest first): main, 2.8.3, 2.8-fork"


def test_forcing_a_variant_the_line_does_not_build() -> None:
    with pytest.raises(UsageError, match="line main does not build variant 'triton': CK only"):
        planning.plan(ck_only_main(), Target(arch="gfx942", variant="triton", release="main"),
                      BASE)


def test_a_source_the_line_lacks() -> None:
    """--source pypi is the 2.8 sdist: a 2.8-fork source; main has no alternatives."""
    plan = planning.plan(flash(), Target(arch="gfx942", source="pypi"), HOSTS["rocm7.0-torch2.9"])
    assert plan.release == "2.8-fork" and plan.source.kind == "sdist"
    assert "main has no source 'pypi'" in plan.release_why
    assert "2.8.3 needs a ROCm SDK >=7.1,<10.1" in plan.release_why


@pytest.mark.parametrize("name", ["rocm7.1-torch2.13", "rocm7.2-torch2.13", "rocm10.0-torch2.13"])
def test_one_sdist_two_lines_each_with_its_range(name: str) -> None:
    """The sdist 2.8.3.post1 is --source pypi on the 2.8.3 line (ROCm 7.1-10.0) and on the
    2.8-fork line (ROCm 6.0-7.0): on ROCm >= 7.1 it gets the 2.8.3 line's ranges and OPT_DIM."""
    plan = planning.plan(flash(), Target(arch="gfx942", source="pypi"), HOSTS[name])
    assert plan.release == "2.8.3" and plan.source.kind == "sdist"
    assert plan.source.url.endswith("flash_attn-2.8.3.post1.tar.gz")
    assert plan.host_requires == ("rocm-torch>=2.2,<2.14", "rocm-sdk>=7.1,<10.1")
    fork = planning.plan(flash(), Target(arch="gfx942", source="pypi"), HOSTS["rocm7.0-torch2.9"])
    assert fork.source.sha256 == plan.source.sha256 and fork.host_requires != plan.host_requires


@pytest.mark.parametrize(("name", "line", "commit", "rocm", "runtime"), [
    ("rocm10.0-torch2.13", "2.15", "d0f2af8b", ">=7.14,<10.1", None),
    ("rocm7.14-torch2.14", "2.15", "d0f2af8b", ">=7.14,<10.1", None),
    ("rocm7.2-torch2.13", "2.14", "5c488690", ">=7.2,<7.15", "aotriton-runtime-rocm7.2"),
    ("rocm7.1-torch2.13", "2.13", "cf30153c", ">=7.1,<7.3", None),
    ("rocm6.4-torch2.9", "2.9", "d38164a5", ">=6.3,<6.5", "aotriton-runtime-rocm6.4"),
])
def test_pytorch_gets_the_line_of_the_hosts_rocm(name: str, line: str, commit: str,
                                                  rocm: str, runtime: str | None) -> None:
    """PyTorch builds torch: its lines are picked by the ROCm SDK alone (the host's ROCm torch
    plays no part); each line has its own components and AOTriton runtime."""
    plan = planning.plan(load(find_recipe("pytorch")), Target(arch="gfx942"), HOSTS[name])
    assert plan.release == line and plan.source.commit.startswith(commit)
    assert plan.host_requires == (f"rocm-sdk{rocm}",)
    assert plan.release_why.startswith(f"newest line whose ranges this host satisfies: "
                                       f"rocm-sdk{rocm}")
    # hipfile from ROCm 7.14 on (2.14, 2.15), amd_smi too on 2.15 (build.rocm_components_since)
    assert ("hipfile" in plan.rocm_components) == (line == "2.15")
    assert ("amd_smi" in plan.rocm_components) == (line == "2.15")
    assert ("rocm_smi" in plan.rocm_components) == (line in ("2.13", "2.9"))
    assert [d.name for d in plan.downloads if "runtime" in d.name] == ([runtime] if runtime
                                                                       else [])


def test_pytorch_2_14_requires_hipfile_from_rocm_7_14_only() -> None:
    """One line over ROCm 7.2-7.14: LoadHIP.cmake requires hipfile only from 7.14."""
    recipe = load(find_recipe("pytorch"))
    for name, wanted in (("rocm7.14-torch2.14", True), ("rocm7.2-torch2.13", False)):
        plan = planning.plan(recipe, Target(arch="gfx942", release="2.14"), HOSTS[name])
        assert ("hipfile" in plan.rocm_components) is wanted and "amd_smi" not in \
            plan.rocm_components


def test_pytorch_on_a_rocm_no_line_is_for() -> None:
    with pytest.raises(ToolchainError) as info:
        planning.plan(load(find_recipe("pytorch")), Target(arch="gfx942"),
                      HOSTS["rocm6.2-torch2.5"])
    first, *per_line = info.value.message.splitlines()
    assert first == "pytorch: no release line fits this host:"
    assert [p.split()[0] for p in per_line] == ["2.15", "2.14", "2.13", "2.9"]
    for p, rocm in zip(per_line, (">=7.14,<10.1", ">=7.2,<7.15", ">=7.1,<7.3", ">=6.3,<6.5"),
                       strict=True):
        assert f" needs a ROCm SDK {rocm} with hipcc (found ROCm 6.2.4" in p, p
    assert "(lines, newest first: 2.15, 2.14, 2.13, 2.9)" in (info.value.hint or "")


def test_recipe_without_lines_renders_as_before() -> None:
    recipe, h = load(find_recipe("aiter")), HOSTS["rocm6.2-torch2.5"]
    target = Target(arch="gfx942")
    assert planning.plan(recipe, target, h) == render(recipe, target, h)
    with pytest.raises(UsageError, match="--release: aiter has no release lines"):
        planning.plan(recipe, Target(arch="gfx942", release="2.9"), h)


def test_render_alone_needs_the_line_named() -> None:
    with pytest.raises(UsageError, match="flash-attn has release lines; name one"):
        render(flash(), Target(arch="gfx942"), BASE)


def test_line_keys_replace_and_env_adds(tmp_path: Path) -> None:
    f = tmp_path / "demo.toml"
    f.write_text("""schema_version = 1
[package]
name = "demo"
[source]
sdist = { url = "https://example.invalid/demo-1.0.tar.gz", sha256 = "%s" }
[build]
env = { A = "1", B = "2" }
host_requires = ["torch>=2.0"]
rocm_components = ["hip"]
[releases.new.build]
env = { B = "20", C = "30" }
host_requires = ["torch>=2.14"]
[releases.old]
""" % ("0" * 64))
    recipe = load(f)
    new = recipe.on_line("new")
    assert dict(new.env) == {"A": "1", "B": "20", "C": "30"}
    assert new.host_requires == ("torch>=2.14",) and new.rocm_components == ("hip",)
    assert recipe.on_line("old").host_requires == ("torch>=2.0",)
    torch = replace(BASE, torch=TorchInfo("2.9.0+cpu", None, None))
    assert planning.plan(recipe, Target(arch="gfx942"), torch).release == "old"


def test_a_pip_installed_rocm_picks_its_line_and_is_shown_as_such() -> None:
    """A ROCm from pip (TheRock's devel tree in site-packages; a value here: no such install on
    this machine) is judged like any ROCm root: 7.14 with a torch 2.14 built for it gets main,
    and the plan's ROCm root, version and label come from it."""
    devel = Path("/venv/lib/python3.11/site-packages/_rocm_sdk_devel")
    pip_root = replace(HOSTS["rocm7.14-torch2.14"].rocm_root, path=devel, where=PIP_WHERE,
                       targets=("gfx942", "gfx950"))
    h = replace(HOSTS["rocm7.14-torch2.14"], rocm_root=pip_root)
    plan = planning.plan(flash(), Target(arch="gfx942"), h)
    assert plan.release == "main" and plan.rocm.root == devel
    assert plan.local_version.startswith("rocm7.14.")
    # the same root with an unusable devel tree (not unpacked): no line fits, naming the root
    packed = replace(h, rocm_root=replace(pip_root, unusable="run `rocm-sdk init` first"))
    with pytest.raises(ToolchainError, match="no release line fits") as err:
        planning.plan(flash(), Target(arch="gfx942"), packed)
    assert str(devel) in err.value.message or PIP_WHERE in err.value.message


def test_a_line_fits_only_where_the_recipes_it_depends_on_fit() -> None:
    """main's Triton variant depends on aiter, whose kernels need triton >= 3.6 (torch >= 2.10):
    on a torch 2.9 host the fork's line is picked and says why main was passed over; on torch
    2.14 main is picked."""
    target = Target(arch="gfx942", variant="triton")
    old = planning.plan(flash(), target, HOSTS["rocm7.0-torch2.9"])
    assert old.release == "2.8-fork"
    assert "main needs for its dependency aiter: " in old.release_why
    assert ">=2.10" in old.release_why
    new = planning.plan(flash(), target, HOSTS["rocm7.14-torch2.14"])
    assert new.release == "main" and [d.recipe for d in new.depends] == ["aiter"]


# ------------------------------------------------- the entry point: host sources and detection

TESTS = Path(__file__).resolve().parents[2]
PURE = TESTS / "recipes/stack-pure.toml"  # pip-wheel, no HIP code, no ROCm component
LIB = TESTS / "recipes/rocm72-lib.toml"  # cmake (the HIP compiler) and five components


def test_wants_over_several_pairs_is_what_any_of_them_needs() -> None:
    t = Target(arch="gfx942")
    pure, lib, torch = load(PURE), load(LIB), load(find_recipe("pytorch"))
    assert planning.wants([(pure, t)]) == planning.Wants(False, False, ())
    assert planning.wants([(torch, t)]).components and not planning.wants([(torch, t)]).compiler
    both = planning.wants([(pure, t), (lib, t), (torch, t)])
    assert both.compiler and both.components
    assert both.dists == tuple(dict.fromkeys([*lib.python_requires, *torch.python_requires]))


def test_host_for_looks_for_components_exactly_when_a_plan_needs_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real detection on a fixture ROCm root: the components are listed (miopen left out of the
    tree, so they were looked for) only for plans that check them; the HIP compiler is searched
    only for plans that compile HIP code (ROCMBUILD_HIP_COMPILER names one that is not there, so
    a search says so in compiler_error, and no compiler runs)."""
    no_clang = tmp_path / "no-clang"
    monkeypatch.setenv("ROCMBUILD_HIP_COMPILER", str(no_clang))
    root = make_rocm_root(tmp_path / "rocm", "6.4.1", omit=("miopen",))
    source = planning.Detect(rocm_path=str(root))
    t = Target(arch="gfx942")
    pure, lib, torch = load(PURE), load(LIB), load(find_recipe("pytorch"))

    def components(h: Host) -> tuple[str, ...] | None:
        assert h.rocm_root is not None and h.rocm_root.path == root
        return h.rocm_root.components

    def searched(h: Host) -> bool:
        assert h.compiler is None
        return str(no_clang) in h.compiler_error

    none = planning.host_for([(pure, t)], source)
    assert components(none) is None and none.compiler_error == ""

    only_components = planning.host_for([(torch, t)], source)
    comps = components(only_components)
    assert comps is not None and "rccl" in comps and "miopen" not in comps
    assert not searched(only_components)

    for pairs in ([(lib, t)], [(pure, t), (lib, t)]):  # one pair, or any of several
        h = planning.host_for(pairs, source)
        assert components(h) is not None and searched(h)
    assert components(planning.host_for([(pure, t), (torch, t)], source)) is not None

    everything = planning.host_for([(pure, t)], replace(source, everything=True))
    assert components(everything) is not None and searched(everything)


def test_plan_for_returns_the_plan_the_host_and_the_wants(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1")
    planned = planning.plan_for(load(PURE), Target(arch="gfx942"),
                                planning.Detect(rocm_path=str(root)), tmp_path / "cache")
    assert planned.wants == planning.Wants(False, False, ())
    assert planned.host.rocm_root is not None and planned.host.rocm_root.components is None
    assert planned.plan == planning.plan(load(PURE), Target(arch="gfx942"), planned.host)


def test_a_host_in_hand_is_used_as_it_is() -> None:
    h = HOSTS["rocm7.14-torch2.14"]
    assert planning.host_for([(flash(), Target(arch="gfx942"))], h) is h
    planned = planning.plan_for(flash(), Target(arch="gfx942"), h, Path("/nonexistent/cache"))
    assert planned.host is h and planned.plan.release == "main"
    assert planned.wants is None  # nothing was detected: the wants are not worked out


def test_saved_host_reads_the_file(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", "6.4.1", omit=("rccl",))
    here = planning.host_for([(load(find_recipe("pytorch")), Target(arch="gfx942"))],
                             planning.Detect(rocm_path=str(root)))
    saved = tmp_path / "node.json"
    saved.write_text(json.dumps(here.to_json()))
    read = planning.host_for([(load(PURE), Target(arch="gfx942"))], planning.SavedHost(saved))
    assert read.origin == str(saved) and here.origin == "detected"
    assert read.to_json() == here.to_json()
    assert read.rocm_root is not None and read.rocm_root.components is not None
    assert "rccl" not in read.rocm_root.components  # the file's, not looked for again

    saved.write_text("{}")
    with pytest.raises(UsageError) as err:
        planning.host_for([], planning.SavedHost(saved))
    assert err.value.message.startswith(f"--host {saved}: schema")
