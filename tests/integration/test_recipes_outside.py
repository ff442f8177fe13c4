"""Recipes written outside this repository: a variant narrows the git source's submodules,
relative paths resolve against the recipe file whatever the current directory, and the cmake
backend's ``build.source_dir`` / ``cmake_args`` rules.

Everything is real: git repositories made here, ``pip wheel`` with setuptools, the CLI in a child.
The unreachable submodule URL is a real ``file://`` path that does not exist (git fails on it the
way it fails on a mirror that lacks the submodule)."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild

SETUP = """from setuptools import setup
setup(name="subdemo", version="1.0", packages=["subdemo"])
"""


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path) -> str:
    """A small pip-wheel project in a git repo whose one submodule (``third_party/ck``) points
    at a URL that does not exist. Returns the commit."""
    repo = root / "upstream"
    (repo / "subdemo").mkdir(parents=True)
    (repo / "subdemo" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "setup.py").write_text(SETUP)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    # a gitlink without cloning anything: the index entry plus .gitmodules
    missing = root / "nowhere" / "ck.git"
    (repo / ".gitmodules").write_text(
        f'[submodule "third_party/ck"]\n\tpath = third_party/ck\n\turl = file://{missing}\n')
    git("update-index", "--add", "--cacheinfo",
        "160000,1111111111111111111111111111111111111111,third_party/ck", cwd=repo)
    git("add", ".gitmodules", cwd=repo)
    git("commit", "-q", "-m", "init", cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def write_recipe(where: Path, commit: str, git_url: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    recipe = where / "subdemo.toml"
    recipe.write_text(f"""schema_version = 1
[package]
name = "subdemo"
[source]
git = "{git_url}"
commit = "{commit}"
submodules = ["third_party/ck"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
default_variant = "full"
[variants.full]
description = "needs the submodule"
[variants.lite]
description = "does not"
submodules = []
""")
    return recipe


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "ROCMBUILD_RETRY_BACKOFF": "0"}


def test_variant_without_submodules_builds_from_a_relative_local_clone(tmp_path: Path) -> None:
    commit = make_repo(tmp_path)
    # ../upstream relative to the recipe file, which sits in recipes/; run from elsewhere
    recipe = write_recipe(tmp_path / "recipes", commit, "../upstream")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rel = Path("..") / "recipes" / "subdemo.toml"
    res = rocmbuild("build", str(rel), "--variant", "lite", "--arch", "gfx942",
                    env=env_for(tmp_path), cwd=elsewhere)
    assert res.returncode == 0, res.stderr
    wheels = list((tmp_path / "build" / "wheels").glob("subdemo-1.0+rocm*.whl"))
    assert len(wheels) == 1, res.stderr
    with zipfile.ZipFile(wheels[0]) as zf:
        assert zf.read("subdemo/__init__.py") == b"VALUE = 1\n"
    # the full variant needs the unreachable submodule: a fetch error naming git's cause
    full = rocmbuild("build", str(recipe), "--variant", "full", "--arch", "gfx942",
                     env=env_for(tmp_path), cwd=elsewhere)
    assert full.returncode == 4, full.stderr
    assert "submodule" in full.stderr and "Traceback" not in full.stderr
    # the plan shows the narrowed list
    plan = rocmbuild("plan", str(recipe), "--variant", "lite", "--arch", "gfx942", "--json",
                     env=env_for(tmp_path), cwd=elsewhere)
    assert plan.returncode == 0, plan.stderr
    assert '"submodules": []' in plan.stdout


def test_file_url_relative_form_and_missing_path(tmp_path: Path) -> None:
    commit = make_repo(tmp_path)
    recipe = write_recipe(tmp_path / "recipes", commit, "file://../upstream")
    res = rocmbuild("build", str(recipe), "--variant", "lite", "--arch", "gfx942",
                    env=env_for(tmp_path), cwd=tmp_path / "upstream")
    assert res.returncode == 0, res.stderr
    bad = write_recipe(tmp_path / "other", commit, "../no-such-repo")
    res = rocmbuild("plan", str(bad), "--arch", "gfx942", env=env_for(tmp_path), cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "source.git" in res.stderr and "relative to the recipe file" in res.stderr


def test_path_source_and_patch_relative_to_recipe(tmp_path: Path) -> None:
    """A path source and a patch next to a recipe in another directory, run from a third one
    that has a same-named (wrong) tree and patch: the recipe's own are used."""
    home = tmp_path / "proj"
    (home / "tree" / "subdemo").mkdir(parents=True)
    (home / "tree" / "subdemo" / "__init__.py").write_text("VALUE = 1\n")
    (home / "tree" / "setup.py").write_text(SETUP)
    patch = ("--- a/subdemo/__init__.py\n+++ b/subdemo/__init__.py\n@@ -1 +1 @@\n"
             "-VALUE = 1\n+VALUE = 2\n")
    (home / "fix.patch").write_text(patch)
    (home / "r.toml").write_text(f"""schema_version = 1
[package]
name = "subdemo"
[source]
path = "tree"
[build]
python_requires = ["setuptools", "wheel"]
[[patches]]
file = "fix.patch"
sha256 = "{hashlib.sha256(patch.encode()).hexdigest()}"
reason = "test"
""")
    decoy = tmp_path / "cwd"
    (decoy / "tree").mkdir(parents=True)
    (decoy / "fix.patch").write_text("not a patch\n")
    res = rocmbuild("build", str(home / "r.toml"), "--arch", "gfx942", env=env_for(tmp_path),
                    cwd=decoy)
    assert res.returncode == 0, res.stderr
    wheel = next((tmp_path / "build" / "wheels").glob("subdemo-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("subdemo/__init__.py") == b"VALUE = 2\n"


def test_cmake_source_dir_in_plan_and_cmake_args_refused(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "examples" / "hip").mkdir(parents=True)
    (tree / "examples" / "hip" / "CMakeLists.txt").write_text("project(x)\n")
    base = f"""schema_version = 1
[package]
name = "cm"
version = "1.0"
[source]
path = "{tree}"
[build]
backend = "cmake"
"""
    ok = tmp_path / "ok.toml"
    ok.write_text(base + 'source_dir = "examples/hip"\ncmake_args = ["-DX=a b"]\n')
    res = rocmbuild("plan", str(ok), "--arch", "gfx942", "--json", env=env_for(tmp_path))
    if res.returncode == 10:  # no HIP compiler on this host: the cmake backend needs one
        assert "hip" in res.stderr.lower()
    else:
        assert res.returncode == 0, res.stderr
        assert '"-S",\n' in res.stdout and '"examples/hip"' in res.stdout
        assert '"source_dir": "examples/hip"' in res.stdout
    for arg in ("-S", "-B", "-Gmake", "-DCMAKE_INSTALL_PREFIX=/usr"):
        bad = tmp_path / "bad.toml"
        bad.write_text(base + f'cmake_args = ["{arg}", "x"]\n')
        res = rocmbuild("plan", str(bad), "--arch", "gfx942", env=env_for(tmp_path))
        assert res.returncode == 3, res.stderr
        assert "build.cmake_args[0]" in res.stderr and "build.source_dir" in res.stderr
    for sd in ("../up", "/abs", "a/../../b"):
        bad = tmp_path / "bad.toml"
        bad.write_text(base + f'source_dir = "{sd}"\n')
        res = rocmbuild("plan", str(bad), "--arch", "gfx942", env=env_for(tmp_path))
        assert res.returncode == 3, res.stderr
        assert "build.source_dir" in res.stderr


def test_validate_requires_never_echoes_a_password(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    for value in ("--index-url=https://u:pw9ecret@h/simple", "x @ https://u:pw9ecret@h/x.whl ;;"):
        r = tmp_path / "r.toml"
        r.write_text(f'schema_version = 1\n[package]\nname = "d"\n[source]\npath = "tree"\n'
                     f'[validate]\nrequires = ["{value}"]\n')
        res = rocmbuild("plan", str(r), "--arch", "gfx942", env=env_for(tmp_path))
        assert res.returncode == 3, res.stderr
        assert "validate.requires[0]" in res.stderr
        assert "pw9ecret" not in res.stdout + res.stderr
