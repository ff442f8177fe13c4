"""Recipe dependencies for real (build.depends): the real CLI, real pip and a real network
namespace. tests/fixtures/depends holds a pure-Python aiter stand-in (``toyaiter``, a setuptools
pyproject.toml, path source) and a dependent (``toyattn``) whose setup.py imports toyaiter, so
its build fails unless toyaiter's wheel was installed into its build environment. Both recipes
say ``build.offline = true``. Nothing is faked; skipped where no network namespace can be made
(the offline part is then not shown)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.core.digest import sha256_file
from rocmbuild.core.run import no_network
from tests.conftest import REPO, rocmbuild

pytestmark = pytest.mark.skipif(not no_network().prefix,
                                reason=f"no network namespace here: {no_network().why_not}")

FIXTURES = REPO / "tests" / "fixtures" / "depends"


def _run(tmp_path: Path, *args: str) -> Any:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_CACHE_DIR": str(tmp_path / "c"),
           "ROCMBUILD_OFFLINE": "require"}  # no fallback to a build with network
    return rocmbuild(*args, str(tmp_path / "toyattn.toml"), "--arch", "gfx942", env=env)


def _member(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(suffix))).decode()


def _key(tmp_path: Path) -> dict[str, Any]:
    res = _run(tmp_path, "plan", "--json")
    assert res.returncode == 0, res.stderr
    plan: dict[str, Any] = json.loads(res.stdout)
    return plan


def test_dependency_is_built_first_cached_installed_and_recorded(tmp_path: Path) -> None:
    for name in ("toyaiter", "toyattn"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
        shutil.copy(FIXTURES / f"{name}.toml", tmp_path)
    plan = _key(tmp_path)
    (dep,) = plan["depends"]
    assert dep["recipe"] == "toyaiter" and len(dep["cache_key"]) == 64

    first = _run(tmp_path, "build")
    assert first.returncode == 0, first.stderr
    wheels = tmp_path / "w" / "wheels"
    (aiter,) = wheels.glob("toyaiter-*.whl")
    (attn,) = wheels.glob("toyattn-*.whl")
    # built first: its stages ran before the dependent's, and its build record is older
    err = first.stderr
    assert err.index("dependency toyaiter") < err.index("toyaiter-1.0+rocm6.2.gfx942") \
        < err.index("toyaiter 1.0+rocm6.2.gfx942 from its wheel") < err.index("toyattn-1.0")
    built = {w.name.split("-")[0]: json.loads((wheels / f"{w.name}.build.json").read_text())
             for w in (aiter, attn)}
    assert built["toyaiter"]["built_at"] < built["toyattn"]["built_at"]
    assert built["toyaiter"]["cache_key"] == dep["cache_key"]
    # both builds ran offline, in the network namespace
    for name, key in (("toyaiter", dep["cache_key"]), ("toyattn", plan["cache_key"])):
        log = (tmp_path / "w" / "logs" / name / key[:16] / "build.log").read_text()
        assert log.startswith("$ unshare --net "), log[:200]
    # installed into the dependent's build env: its setup.py imported it from there
    code = _member(attn, "toyattn/__init__.py")
    assert "BUILT_WITH = 'toy-v1'" in code and str(tmp_path / "w" / "envs" / "toyattn-") in code
    prov = json.loads(_member(attn, ".dist-info/rocmbuild.json"))
    assert prov["depends"] == [{
        "recipe": "toyaiter", "name": "toyaiter", "version": "1.0+rocm6.2.gfx942",
        "wheel": aiter.name, "sha256": sha256_file(aiter), "cache_key": dep["cache_key"]}]
    assert "toyaiter==1.0+rocm6.2.gfx942" in prov["build_env"]["packages"]
    assert prov["plan"]["depends"] == plan["depends"] and prov["offline"] is True

    again = _run(tmp_path, "build")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("cache hit ") == 2, again.stderr  # the dependency and toyattn
    assert "] fetch" not in again.stderr

    # a new toyaiter source: a new toyaiter key, so a new toyattn key; both are rebuilt
    init = tmp_path / "toyaiter" / "toyaiter" / "__init__.py"
    init.write_text(init.read_text().replace("toy-v1", "toy-v2"))
    changed = _key(tmp_path)
    assert changed["depends"][0]["cache_key"] != dep["cache_key"]
    assert changed["cache_key"] != plan["cache_key"]
    third = _run(tmp_path, "build")
    assert third.returncode == 0, third.stderr
    assert "cache hit " not in third.stderr
    assert "BUILT_WITH = 'toy-v2'" in _member(attn, "toyattn/__init__.py")
