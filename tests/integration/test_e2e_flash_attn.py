"""End to end, for real: `python -m rocmbuild flash-attn --arch gfx942 --variant triton --source
pypi` downloads the PyPI sdist, builds with `pip wheel --no-build-isolation` against the installed
(CPU) torch, retags, records provenance, and the second run is a no-op served from the cache."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from wheel.wheelfile import WheelFile

from tests.conftest import TRITON_ARGS, rocmbuild

NAME = "flash_attn-2.8.3.post1+rocm6.2.gfx942-py3-none-any.whl"
SUMMARY = re.compile(r"(\S+\.whl)  sha256=([0-9a-f]{64})  (\d+\.\d\d)s  (built|cached)")


def summary(stderr: str) -> tuple[str, str, float, str]:
    m = SUMMARY.search(stderr)
    assert m, stderr
    return m.group(1), m.group(2), float(m.group(3)), m.group(4)


def test_cold_build_makes_a_tagged_wheel(triton_build: dict) -> None:
    wheel: Path = triton_build["wheel"]
    assert wheel.name == NAME
    path, sha, _, how = summary(triton_build["stderr"])
    assert how == "built" and path.endswith(NAME)
    import hashlib

    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == sha
    for stage in ("fetch", "patch", "hipify", "build", "tag"):
        assert f"] {stage}" in triton_build["stderr"]


def test_wheel_record_and_provenance(triton_build: dict) -> None:
    wheel: Path = triton_build["wheel"]
    with WheelFile(wheel) as wf:  # WheelFile checks every member against RECORD while reading
        names = wf.namelist()
        for n in names:
            if not n.endswith("/"):
                wf.read(n)
        meta = wf.read("flash_attn-2.8.3.post1+rocm6.2.gfx942.dist-info/METADATA").decode()
        prov = json.loads(wf.read("flash_attn-2.8.3.post1+rocm6.2.gfx942.dist-info/rocmbuild.json"))
        init = wf.read("flash_attn/flash_attn_triton_amd/__init__.py")
        iface = wf.read("flash_attn/flash_attn_triton_amd/interface_fa.py").decode()
    assert "Version: 2.8.3.post1+rocm6.2.gfx942" in meta
    # patch 0001 is for NVIDIA GPUs only (when = triton + nvidia): not applied here (the
    # --gpu-vendor nvidia build that applies it is in test_installed_tool.py); patch 0004 (the
    # sliding window refused) is, and its guard is in the wheel's code
    assert prov["gpu_vendor"] == "amd" and init == b""
    assert [Path(p["file"]).name[:4] for p in prov["patches"]] == ["0004"]
    assert iface.count("_refuse_window(window_size_left, window_size_right, causal)") == 3
    assert not any(n.startswith("flash_attn-2.8.3.post1.dist-info") for n in names)
    assert prov["archs"] == ["gfx942"] and prov["variant"] == "triton"
    assert prov["source"]["sha256"].startswith("55d5103e")
    assert prov["torch"]["version"].startswith("2.13.0") and prov["torch"]["hip"] is None
    assert prov["torch"]["cxx11_abi"] in (True, False)
    assert prov["plan"]["env"]["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    assert prov["source_date_epoch"] > 1700000000  # the sdist's newest member, not 1980
    # what describes this build only is beside the wheel, not in it (reproducible bytes)
    assert not {"jobs", "timings", "original_wheel"} & set(prov)
    assert "jobs" not in prov["plan"] and "jobs_reason" not in prov["plan"]
    record = json.loads(wheel.with_name(wheel.name + ".build.json").read_text())
    assert record["jobs"]["max_jobs"] >= 1 and "min(" in record["jobs"]["reason"]
    assert set(record["timings"]) >= {"fetch", "build"}
    assert record["original_wheel"]["name"] == "flash_attn-2.8.3.post1-py3-none-any.whl"
    assert record["sha256"] == summary(triton_build["stderr"])[1]


def test_built_in_the_recipes_build_env(triton_build: dict) -> None:
    """The recipe's build_requires went into a build env (setuptools below 80 although the host
    venv has a newer one), torch came from the host, and rocmbuild.json lists the versions."""
    with zipfile.ZipFile(triton_build["wheel"]) as zf:
        prov = json.loads(zf.read("flash_attn-2.8.3.post1+rocm6.2.gfx942.dist-info/"
                                  "rocmbuild.json"))
    env = prov["build_env"]
    packages = dict(p.split("==") for p in env["packages"])
    assert {"setuptools", "wheel", "packaging", "psutil", "ninja", "pip"} <= set(packages)
    assert int(packages["setuptools"].split(".")[0]) < 80
    assert prov["toolchain"]["setuptools"] == packages["setuptools"]
    assert any(p.startswith("torch==2.13.0") for p in env["host_packages"])
    assert env["requirements"][0] == "setuptools>=70.1,<80"
    assert "] env" in triton_build["stderr"] and "made flash-attn-" in triton_build["stderr"]


def test_pip_installs_and_reads_the_wheel(triton_build: dict, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(triton_build["wheel"]),
        ],
        check=True,
    )
    code = (
        "import importlib.metadata as m, sys; d = m.distribution('flash-attn'); "
        "print(d.version); print(any(str(f).endswith('rocmbuild.json') for f in d.files))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["2.8.3.post1+rocm6.2.gfx942", "True"]


def test_second_run_is_a_noop_without_pip(triton_build: dict) -> None:
    env = triton_build["env"]
    logs = list((Path(env["ROCMBUILD_WORKDIR"]) / "logs").rglob("build.log"))
    assert len(logs) == 1
    before = (logs[0].stat().st_mtime_ns, logs[0].read_text().count("-m pip wheel"))
    assert before[1] == 1
    res = rocmbuild(*TRITON_ARGS, env=env)
    assert res.returncode == 0, res.stderr
    path, sha, _, how = summary(res.stderr)
    assert how == "cached" and sha == summary(triton_build["stderr"])[1]
    assert (logs[0].stat().st_mtime_ns, logs[0].read_text().count("-m pip wheel")) == before
    assert "] build" not in res.stderr


def test_json_summary_of_a_cache_hit(triton_build: dict, tmp_path: Path) -> None:
    """`build --json` on the cached wheel: the summary on stdout and a copy of the same bytes in
    ROCMBUILD_WHEEL_DIR. (`--force` is tested on a small recipe in test_noop_memo.py; a forced
    rebuild of this wheel giving the same bytes is `verify` in test_verify_wheels.py, and the
    repeated cold builds are in benchmarks/bench_reproducible.py.)"""
    env = {**triton_build["env"], "ROCMBUILD_WHEEL_DIR": str(tmp_path / "out")}
    res = rocmbuild("build", *TRITON_ARGS, "--json", env=env)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["status"] == "cached" and Path(data["wheel"]).parent == tmp_path / "out"
    assert (tmp_path / "out" / NAME).read_bytes() == triton_build["wheel"].read_bytes()
