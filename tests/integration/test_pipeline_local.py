"""The whole pipeline on a small local project (a `path` source): patch, hipify step, real
`pip wheel --no-build-isolation` with setuptools, tag, cache -- and the failure paths: a build that
fails shows the log tail and the log path; a patch that does not apply stops before the build."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild

SETUP = """from setuptools import setup
setup(name="demo-ext", version="1.0", packages=["demo"])
"""


def make_recipe(tmp_path: Path, setup_py: str = SETUP, patch: str | None = None) -> Path:
    src = tmp_path / "src"
    (src / "demo").mkdir(parents=True)
    (src / "demo" / "__init__.py").write_text("VALUE = 1\n")
    (src / "setup.py").write_text(setup_py)
    patch = patch or (
        "--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
    )
    (tmp_path / "fix.patch").write_text(patch)
    sha = hashlib.sha256(patch.encode()).hexdigest()
    recipe = tmp_path / "demo.toml"
    recipe.write_text(f"""schema_version = 1
[package]
name = "demo-ext"
[source]
path = "src"
[arch]
supported = ["gfx90a", "gfx942"]
env = {{ GPU_ARCHS = "{{archs}}" }}
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
hipify = ["python", "-c", "open('demo/hipified.py', 'w').write('ARCHS = ' + repr('{{archs}}'))"]
[[patches]]
file = "fix.patch"
sha256 = "{sha}"
reason = "exercise the patch stage"
""")
    return recipe


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "ROCMBUILD_RETRY_BACKOFF": "0"}


def test_local_recipe_builds_patched_and_hipified(tmp_path: Path) -> None:
    recipe = make_recipe(tmp_path)
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942", env=env_for(tmp_path))
    assert res.returncode == 0, res.stderr
    wheel = tmp_path / "build/wheels/demo_ext-1.0+rocm6.2.gfx90a.gfx942-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("demo/__init__.py") == b"VALUE = 2\n"
        assert zf.read("demo/hipified.py") == b"ARCHS = 'gfx90a;gfx942'"
    # the source tree the recipe points at is never modified
    assert (tmp_path / "src/demo/__init__.py").read_text() == "VALUE = 1\n"
    again = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942", env=env_for(tmp_path))
    assert again.stderr.rstrip().endswith("cached"), again.stderr
    # changing the source tree changes the cache key: a rebuild, not a stale hit
    (tmp_path / "src/demo/extra.py").write_text("X = 1\n")
    res2 = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942", env=env_for(tmp_path))
    assert res2.returncode == 0 and res2.stderr.rstrip().endswith("built"), res2.stderr


def test_failing_build_shows_tail_and_log_path(tmp_path: Path) -> None:
    broken = SETUP + "raise SystemExit('boom: the compiler ran out of memory')\n"
    recipe = make_recipe(tmp_path, setup_py=broken)
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", env=env_for(tmp_path))
    assert res.returncode == 6, res.stderr
    assert "boom: the compiler ran out of memory" in res.stderr  # from the log tail
    line = next(x for x in res.stderr.splitlines() if x.startswith("build error:"))
    log_path = line.split("full log: ")[1].strip()
    assert Path(log_path).is_file() and "boom" in Path(log_path).read_text()
    assert 'Traceback (most recent call last):\n  File "' not in res.stderr.split("build error:")[1]


def test_patch_that_does_not_apply_stops_before_build(tmp_path: Path) -> None:
    bad = "--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -1 +1 @@\n-NOPE = 1\n+NOPE = 2\n"
    recipe = make_recipe(tmp_path, patch=bad)
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", env=env_for(tmp_path))
    assert res.returncode == 5, res.stderr
    assert "fix.patch: hunk at demo/__init__.py:1 does not apply" in res.stderr
    assert not list((tmp_path / "build").rglob("build.log"))


def test_concurrent_builds_of_the_same_inputs_build_once(tmp_path: Path) -> None:
    """Two real `rocmbuild build` processes at once on the same inputs and workspace: the second
    waits on the key's lock, then is served the first one's wheel from the cache."""
    import subprocess
    import sys

    slow = SETUP.replace("from setuptools import setup\n",
                         "import time\nfrom setuptools import setup\ntime.sleep(3)\n")
    recipe = make_recipe(tmp_path, setup_py=slow)
    env = {**__import__("os").environ, **env_for(tmp_path)}
    argv = [sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch", "gfx942"]
    procs = [subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    endings = sorted(o.rstrip().rsplit(" ", 1)[-1] for o in outs)
    assert endings == ["built", "cached"], outs
    assert any("waiting for another build of the same inputs" in o for o in outs)
    log = next((tmp_path / "build/logs").rglob("build.log")).read_text()
    assert log.count("-m pip wheel") == 1
