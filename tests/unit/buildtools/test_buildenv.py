"""Build environments in plans (pure: render and the requirement reader, no venv made here;
tests/integration/test_buildenv_venv.py makes real ones): which recipe key a requirement comes
from, per-variant overrides, the cache key following the pins, and the requirements file
reader's refusals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.buildtools import buildenv
from rocmbuild.core.errors import BuildError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan.key import cache_key
from rocmbuild.plan.model import BuildEnvSpec
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe

HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")

RECIPE = """schema_version = 1
[package]
name = "demo"
[source]
path = "src"
[build]
build_requires = {reqs}
default_variant = "a"
[variants.a]
[variants.b]
build_requires = ["six==1.16.0"]
[variants.c]
build_requires = []
build_requirements_file = "requirements-build.txt"
"""


def _recipe(tmp_path: Path, reqs: str) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "setup.py").write_text("")
    p = tmp_path / "demo.toml"
    p.write_text(RECIPE.replace("{reqs}", reqs))
    return p


def test_shipped_recipes_declare_build_envs() -> None:
    flash = render(load(find_recipe("flash-attn")).on_line("2.8-fork"), Target(arch="gfx942"), HOST)
    assert flash.build_env is not None
    assert "setuptools>=70.1,<80" in flash.build_env.requires
    assert flash.to_json()["build_env"]["requires"] == list(flash.build_env.requires)
    torch = render(load(find_recipe("pytorch")), Target(arch="gfx942", release="2.9"), HOST)
    assert torch.build_env is not None
    assert torch.build_env.requirements_file == "requirements-build.txt"
    probe = load(find_recipe("hip-attention-probe"))  # its plan needs a HIP compiler
    assert any(r.startswith("scikit-build-core") for r in probe.build_requires)


def test_variants_override_and_key_follows_the_pins(tmp_path: Path) -> None:
    recipe = load(_recipe(tmp_path, '["six==1.17.0"]'))
    a = render(recipe, Target(arch="gfx942", variant="a"), HOST)
    b = render(recipe, Target(arch="gfx942", variant="b"), HOST)
    c = render(recipe, Target(arch="gfx942", variant="c"), HOST)
    assert a.build_env == BuildEnvSpec(("six==1.17.0",), "build.build_requires")
    assert b.build_env == BuildEnvSpec(("six==1.16.0",), "variants.b.build_requires")
    assert c.build_env is not None and c.build_env.requires == ()
    assert c.build_env.requirements_file_key == "variants.c.build_requirements_file"
    (tmp_path / "x").mkdir()
    other = render(load(_recipe(tmp_path / "x", '["six==1.16.0"]')),
                   Target(arch="gfx942", variant="a"), HOST)
    assert other.cache_key != a.cache_key  # only the pin differs (and the recipe's own hash)
    # the recipe's bytes are keyed anyway: the requested requirements are keyed by themselves too
    # (a requirements file is pinned by the source pin that contains it)
    repinned = replace(a, build_env=BuildEnvSpec(("six==1.16.0",)))
    assert cache_key(repinned, a.env) != cache_key(a, a.env)
    same = render(load(_recipe(tmp_path, '["six==1.17.0"]')), Target(arch="gfx942"), HOST)
    assert same.cache_key == a.cache_key


def test_no_requirements_no_env(tmp_path: Path) -> None:
    recipe = load(_recipe(tmp_path, "[]"))
    assert render(recipe, Target(arch="gfx942", variant="a"), HOST).build_env is None
    assert "build_env" not in render(recipe, Target(arch="gfx942"), HOST).to_json()


def test_requirements_file_reader(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "req.txt").write_text(
        "# Build System requirements\nsetuptools>=77.0.0,<80.0\n\nsix  # NNPACK -> PeachPy\n"
        "numpy; python_version >= '3.9'\n")
    spec = BuildEnvSpec(("wheel",), requirements_file="req.txt")
    got = buildenv.requested(spec, tree, "r.toml")
    assert [r.text for r in got] == ["wheel", "setuptools>=77.0.0,<80.0", "six",
                                     "numpy; python_version >= '3.9'"]
    assert got[0].origin == "r.toml: build.build_requires"
    assert got[2].origin == "r.toml: build.build_requirements_file (req.txt:4)"
    (tmp_path / "outside.txt").write_text("six\n")
    (tree / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(BuildError, match="'link.txt' leaves the source tree"):
        buildenv.requested(BuildEnvSpec(requirements_file="link.txt"), tree, "r.toml")
    (tree / "opt.txt").write_text("-r other.txt\n")
    with pytest.raises(BuildError, match=r"opt.txt:1: pip options are not read here"):
        buildenv.requested(BuildEnvSpec(requirements_file="opt.txt"), tree, "r.toml")


def test_pip_failure_names_the_key_and_requirement() -> None:
    reqs = [buildenv.Requested("wheel", "r.toml: build.build_requires"),
            buildenv.Requested("six==0.0.1", "r.toml: build.build_requires")]
    out = ("ERROR: Could not find a version that satisfies the requirement six==0.0.1 (from "
           "versions: 1.16.0, 1.17.0)\nERROR: No matching distribution found for six==0.0.1\n")
    err = buildenv._pip_failed(out, reqs, Path("/w/env.log"), 1)
    assert err.message == ("r.toml: build.build_requires: cannot install 'six==0.0.1' into the "
                           "build environment: No matching distribution found for six==0.0.1")
    assert err.exit_code == 10 and err.hint is not None and "/w/env.log" in err.hint
    conflict = buildenv._pip_failed("ERROR: ResolutionImpossible: ...\n", reqs, Path("l"), 1)
    assert conflict.message.startswith("r.toml: build.build_requires: cannot install the build "
                                       "requirements (wheel, six==0.0.1): ResolutionImpossible")


def test_pip_lines_never_carry_index_credentials() -> None:
    reqs = [buildenv.Requested("six==0.0.1", "r.toml: build.build_requires")]
    out = ("ERROR: Could not fetch https://alice:s3cret@pypi.example/simple/six/ (timeout)\n")
    err = buildenv._pip_failed(out, reqs, Path("l"), 1)
    assert "s3cret" not in err.message and "alice" not in err.message
