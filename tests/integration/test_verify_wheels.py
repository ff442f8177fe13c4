"""Reproducible wheels, for real: `rocmbuild verify` rebuilds the session's flash-attn Triton
wheel (real PyPI sdist, real pip build) cold in a temporary workspace of its own and gets the
same sha256; a recipe whose hash differs is refused before any build; --build-tag is checked
and keyed. The cmake probe wheel's two-workspace test is in tests/integration/hip/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import REPO, TRITON_ARGS, rocmbuild


def test_verify_rebuilds_the_triton_wheel_bit_for_bit(triton_build: dict) -> None:
    wheel: Path = triton_build["wheel"]
    cache = Path(triton_build["env"]["ROCMBUILD_CACHE_DIR"]) / "wheels"
    before = sorted(p.name for p in cache.iterdir())
    res = rocmbuild("verify", str(wheel), "--json", env=triton_build["env"])
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["status"] == "reproduced", data
    assert data["rebuilt_sha256"] == data["sha256"] and data["rebuilt"] == wheel.name
    assert "rebuilding" in res.stderr and "temporary workspace" in res.stderr
    # the user's cache is not touched: the rebuild made no entry there (other tests of the
    # session may share this cache, so compare before and after)
    assert sorted(p.name for p in cache.iterdir()) == before


def test_verify_refuses_a_changed_recipe(triton_build: dict, tmp_path: Path) -> None:
    recipe = tmp_path / "recipes/flash-attn.toml"
    recipe.parent.mkdir()
    shutil.copy(REPO / "recipes/flash-attn.toml", recipe)
    shutil.copytree(REPO / "patches", tmp_path / "patches")  # the recipe's relative patch paths
    with recipe.open("a") as f:
        f.write("\n# edited\n")
    res = rocmbuild("verify", str(triton_build["wheel"]), "--recipe", str(recipe),
                    env=triton_build["env"])
    assert res.returncode == 3, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("recipe error:")]
    assert len(lines) == 1 and "the wheel was built from" in lines[0], res.stderr
    assert "rebuilding" not in res.stderr


def test_verify_needs_a_rocmbuild_wheel(tmp_path: Path) -> None:
    import zipfile

    plain = tmp_path / "p-1.0-py3-none-any.whl"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("p-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: p\nVersion: 1.0\n")
    res = rocmbuild("verify", str(plain))
    assert res.returncode == 2
    assert "no rocmbuild provenance" in res.stderr and "Traceback" not in res.stderr


def test_build_tag_flag_and_variable(tmp_path: Path) -> None:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build")}
    base = json.loads(rocmbuild("plan", *TRITON_ARGS, "--json", env=env, check=True).stdout)
    flag = json.loads(rocmbuild("plan", *TRITON_ARGS, "--build-tag", "1", "--json", env=env,
                                check=True).stdout)
    var = json.loads(rocmbuild("plan", *TRITON_ARGS, "--json",
                               env={**env, "ROCMBUILD_BUILD_TAG": "1"}, check=True).stdout)
    assert "build_tag" not in base and flag["build_tag"] == var["build_tag"] == "1"
    assert flag["cache_key"] == var["cache_key"] != base["cache_key"]
    bad = rocmbuild("plan", *TRITON_ARGS, "--build-tag", "one", env=env)
    assert bad.returncode == 2
    assert [x for x in bad.stderr.splitlines() if x.startswith("usage error:")] == [
        "usage error: --build-tag: 'one' is not a build tag"]
