"""The host environment does not leak into a build: a real `pip wheel` build of a small local
project whose setup.py (and hipify step) record the environment they see, run with a
variant-switching variable, a random one and a proxy with a password exported. Only the
allow-list (hostenv.PASS_ENV), the recipe's build.pass_env and the plan's env reach the build;
the password reaches no log and no output. The recipe also says target.label_torch: the wheel's
label carries the torch this interpreter has (a CPU torch here; the arithmetic is the same)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import secrets
import zipfile
from pathlib import Path

from tests.conftest import rocmbuild

SETUP = """import json, os
from setuptools import setup
with open("demo/build_env.py", "w") as f:  # a module: packages=["demo"] ships .py files
    f.write("ENV = " + json.dumps(json.dumps(dict(os.environ))))
setup(name="demo-env", version="1.0", packages=["demo"])
"""


def make_recipe(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "demo").mkdir(parents=True)
    (src / "demo" / "__init__.py").write_text("")
    (src / "setup.py").write_text(SETUP)
    (src / "hipify_env.py").write_text(
        "import json, os\nseen = json.dumps(dict(os.environ))\n"
        "open('demo/hipify_env.py', 'w').write('ENV = ' + json.dumps(seen))\n")
    recipe = tmp_path / "demo.toml"
    recipe.write_text("""schema_version = 1
[package]
name = "demo-env"
[target]
label_torch = true
[source]
path = "src"
[arch]
env = { GPU_ARCHS = "{arch_names}", HIP_ARCHS = "{archs}" }
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
pass_env = ["MY_SITE_*"]
env = { BUILD_TARGET = "rocm" }
hipify = ["python", "hipify_env.py"]
""")
    return recipe


def test_build_sees_only_the_allow_list(tmp_path: Path) -> None:
    recipe = make_recipe(tmp_path)
    foo = f"FOO_{secrets.token_hex(4).upper()}"
    password = secrets.token_hex(8)
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "ROCMBUILD_RETRY_BACKOFF": "0",
           "FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE", foo: "1",
           "MY_SITE_FLAGS": "kept", "https_proxy": f"http://user:{password}@127.0.0.1:9",
           "LC_ALL": "C.UTF-8"}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942:sramecc+:xnack-", "-v", env=env)
    assert res.returncode == 0, res.stderr
    # target.label_torch: the torch this interpreter builds against, and its C++ ABI
    torch_mm = ".".join(importlib.metadata.version("torch").split(".")[:2])
    wheels = list((tmp_path / "build/wheels").glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    m = re.fullmatch(r"demo_env-1\.0\+rocm6\.2\.torch(\d+\.\d+)\.cxx11abi(true|false)"
                     r"\.gfx942-py3-none-any\.whl", wheel.name)
    assert m and m.group(1) == torch_mm, wheel.name
    with zipfile.ZipFile(wheel) as zf:
        seen = json.loads(json.loads(zf.read("demo/build_env.py").decode()[len("ENV = "):]))
        hipify_seen = json.loads(json.loads(
            zf.read("demo/hipify_env.py").decode()[len("ENV = "):]))
    for names in (set(seen), set(hipify_seen)):
        assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in names and foo not in names
        assert {"PATH", "HOME", "LC_ALL", "https_proxy", "MY_SITE_FLAGS", "GPU_ARCHS"} <= names
    # the plan's env: plain names for GPU_ARCHS, the features kept in HIP_ARCHS
    assert seen["GPU_ARCHS"] == "gfx942" and seen["HIP_ARCHS"] == "gfx942:sramecc+:xnack-"
    assert seen["BUILD_TARGET"] == "rocm" and seen["MY_SITE_FLAGS"] == "kept"
    # pip's own children add a few of theirs; nothing else of the host's is there
    logs = list((tmp_path / "build").rglob("*.log"))
    build_log = next(p for p in logs if p.name == "build.log").read_text()
    assert "# env withheld:" in build_log and foo in build_log  # a name, for debugging
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(zf.read("demo_env-1.0+" + wheel.name.split("+")[1].split("-")[0]
                                  + ".dist-info/rocmbuild.json"))
    assert prov["local_version"] == wheel.name.split("+")[1].split("-")[0]
    assert prov["torch"]["cxx11_abi"] is (m.group(2) == "true")
    for text in [res.stdout, res.stderr, *(p.read_text() for p in logs)]:
        assert password not in text


def test_ck_plan_ignores_an_exported_variant_switch() -> None:
    env = {"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}
    res = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--variant", "ck", "--json",
                    "--release", "2.8-fork", env=env)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in plan["env"]
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in plan["host_env"]["passed"]
    assert "PATH" in plan["host_env"]["passed"]
    human = rocmbuild("plan", "flash-attn", "--arch", "gfx942", "--release", "2.8-fork", env=env)
    line = next(ln for ln in human.stdout.splitlines() if ln.startswith("host env"))
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE" not in line and "PATH" in line
