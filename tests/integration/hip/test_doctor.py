"""doctor on fixture trees and on this machine.

Faked (cannot exist here): the KFD sysfs topology, /dev/kfd and /dev/dri/renderD* (regular files
whose mode and group decide access), /etc/group and /etc/passwd, /proc/meminfo, /opt/rocm/.info,
/usr/local/cuda, and a ROCm / CUDA / CPU torch (a site dir holding only torch's dist-info and
torch/version.py; doctor reads them without importing torch). Real: the HIP compiler and its
per-arch test compile, which always run for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmbuild.pipeline import doctor
from rocmbuild.pipeline.doctor import GROUP_FIX, diagnose

TORCHES = {
    "rocm": ("2.5.1+rocm6.2", "hip = '6.2.41133-dd7f95766'\ncuda = None\n"),
    "cuda": ("2.5.1+cu124", "hip: Optional[str] = None\ncuda: Optional[str] = '12.4'\n"),
    "cpu": ("2.5.1+cpu", "hip = None\ncuda = None\n"),
}


def make_site(base: Path, kind: str) -> Path:
    version, body = TORCHES[kind]
    site = base / f"site-{kind}"
    di = site / f"torch-{version}.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text(f"__version__ = '{version}'\n{body}")
    return site


def make_root(base: Path, *, gpu: int = 90402, kfd: bool = True, member: bool = True,
              cuda: bool = False, rocm: str = "6.2.0-80") -> Path:
    root = base / "root"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 2\nsimd_count 0\ngfx_target_version 0\n")
    if gpu:
        (nodes / "1").mkdir()
        (nodes / "1/properties").write_text(f"simd_count 304\ngfx_target_version {gpu}\n")
    dri = root / "dev/dri"
    dri.mkdir(parents=True)
    devs = [dri / "renderD128"] + ([root / "dev/kfd"] if kfd else [])
    for d in devs:
        d.write_text("")
        d.chmod(0o660)
    gid = (root / "dev/dri/renderD128").stat().st_gid  # the fixture's "render" group
    who = "alice" if member else ""
    (root / "etc").mkdir()
    (root / "etc/group").write_text(f"video:x:{gid + 7}:{who}\nrender:x:{gid}:{who}\n"
                                    "alice:x:1000:\n")
    (root / "etc/passwd").write_text("alice:x:1000:1000::/home/alice:/bin/bash\n")
    (root / "proc").mkdir()
    (root / "proc/meminfo").write_text("MemTotal: 33554432 kB\nMemAvailable: 16777216 kB\n")
    if rocm:
        (root / "opt/rocm/.info").mkdir(parents=True)
        (root / "opt/rocm/.info/version").write_text(rocm + "\n")
    if cuda:
        (root / "usr/local/cuda/bin").mkdir(parents=True)
    return root


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("ROCMBUILD_HIP_COMPILER", "ROCMBUILD_HIP_FLAGS", "ROCM_PATH", "HIP_PATH",
                "HIP_PLATFORM"):
        monkeypatch.delenv(var, raising=False)


def run_doctor(tmp_path, *, site="rocm", archs=("gfx942",), index=None, **tree):
    root = make_root(tmp_path, **tree)
    return diagnose(root=root, archs=list(archs) if archs is not None else None, user="alice",
                    site_paths=[str(make_site(tmp_path, site))], env={}, index=index)


def test_healthy_gpu_host(tmp_path):
    rep = run_doctor(tmp_path)
    assert rep.ok, [(c.name, c.message) for c in rep.failures()]
    assert rep.get("rocm").data["version"] == "6.2.0"
    gpus = rep.get("gpus")
    assert gpus.status == "ok" and gpus.data["gpus"][0]["gfx"] == "gfx942"
    assert "MI300X" in gpus.message
    assert rep.get("arch:gfx942").status == "ok"  # real compile
    assert rep.get("devices").status == "ok"
    assert rep.get("groups").status == "ok"
    torch = rep.get("torch")
    assert torch.status == "ok" and "HIP 6.2.41133-dd7f95766" in torch.message
    assert torch.data["torch"]["kind"] == "rocm"
    assert rep.get("memory").data["jobs"] >= 1


def test_gpu_present_gives_default_arch(tmp_path):
    rep = run_doctor(tmp_path, archs=None, gpu=90010)
    assert rep.archs == ["gfx90a"]
    assert rep.get("arch:gfx90a").status == "ok"


def test_index_view_for_this_hosts_gpu(tmp_path):
    """With an index configured, doctor names the per-arch view for the GPU the (fixture) KFD
    topology reports: an MI200 (gfx90a) host is told the gfx90a view, as a pip line."""
    rep = run_doctor(tmp_path, archs=(), gpu=90010,
                     index="https://bob:s3cret@wheels.example/rocm/?token=t0k")
    c = rep.get("index-view")
    assert c.status == "ok"
    url = "https://wheels.example/rocm/stable/gfx90a/simple/"
    assert c.data["views"] == {"gfx90a": url}
    assert f"pip install --extra-index-url {url}" in c.message
    assert "s3cret" not in json.dumps(rep.to_json()) and "t0k" not in c.message
    local = run_doctor(tmp_path / "d", archs=(), gpu=90402, index=str(tmp_path / "idx"))
    assert local.get("index-view").data["views"] == {
        "gfx942": f"{(tmp_path / 'idx').as_uri()}/stable/gfx942/simple/"}
    assert not [c for c in run_doctor(tmp_path / "e", archs=()).checks if c.name == "index-view"]
    assert not [c for c in run_doctor(tmp_path / "f", archs=(), gpu=0, index="x").checks
                if c.name == "index-view"]  # no GPU: no view to name


def test_gpu_not_in_arch_list_warns(tmp_path):
    rep = run_doctor(tmp_path, archs=("gfx90a",))
    c = rep.get("arch-vs-gpus")
    assert c.status == "warn" and "gfx942" in c.message and c.fix == "add gfx942 to --arch"


def test_no_groups(tmp_path):
    rep = run_doctor(tmp_path, member=False)
    g = rep.get("groups")
    assert g.status == "warn" and "video, render" in g.message and g.fix == GROUP_FIX
    d = rep.get("devices")
    assert d.status == "warn" and "kfd" in d.message and d.fix == GROUP_FIX
    assert rep.ok  # compiling does not need the GPU


def test_no_dev_kfd(tmp_path):
    rep = run_doctor(tmp_path, kfd=False)
    d = rep.get("devices")
    assert d.status == "warn" and "dev/kfd missing" in d.message and "modprobe amdgpu" in d.fix


@pytest.mark.parametrize("kind", ["cuda", "cpu"])
def test_non_rocm_torch(tmp_path, kind):
    t = run_doctor(tmp_path, site=kind).get("torch")
    assert t.status == "warn"
    assert f"is a {kind.upper()} build" in t.message and "--no-build-isolation" in t.message
    assert "download.pytorch.org/whl/rocm" in t.fix


def test_torch_hip_vs_rocm_mismatch(tmp_path):
    t = run_doctor(tmp_path, rocm="6.4.1").get("torch")
    assert t.status == "warn" and "ROCm root is ROCm 6.4.1" in t.message


def test_no_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMBUILD_TOOLCHAIN_DIR", str(tmp_path / "empty"))
    rep = run_doctor(tmp_path)
    c = rep.get("hip-compiler")
    assert c.status == "fail" and "install-hip-toolchain.sh" in c.fix
    assert not rep.ok
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "doctor", "--root",
                        str(tmp_path / "root"), "--arch", "gfx942"], capture_output=True,
                       text=True,
                       env={**os.environ, "ROCMBUILD_TOOLCHAIN_DIR": str(tmp_path / "e")})
    assert p.returncode == 10
    assert "fail hip-compiler" in p.stderr and "doctor: 1 check(s) failed" in p.stderr


def test_arch_the_compiler_rejects(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMBUILD_HIP_COMPILER", "clang++-19")
    rep = run_doctor(tmp_path, archs=("gfx942", "gfx950"))
    assert rep.get("arch:gfx942").status == "ok"
    bad = rep.get("arch:gfx950")
    assert bad.status == "fail" and "gfx950" in bad.message and "--with-gfx950" in bad.fix
    assert [c.name for c in rep.failures()] == ["arch:gfx950"]


def test_hip_platform_trap(tmp_path):
    root = make_root(tmp_path, cuda=True)
    site = [str(make_site(tmp_path, "rocm"))]
    rep = diagnose(root=root, archs=["gfx942"], user="alice", site_paths=site, env={})
    assert rep.get("hip-platform").status == "warn"
    assert rep.get("hip-platform").fix == "export HIP_PLATFORM=amd for manual hipcc/cmake runs"
    rep = diagnose(root=root, archs=["gfx942"], user="alice", site_paths=site,
                   env={"HIP_PLATFORM": "nvidia"})
    assert rep.get("hip-platform").status == "fail" and not rep.ok


def test_disk_short(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor, "DEFAULT_DISK_GB", 10.0**9)
    rep = run_doctor(tmp_path)
    assert rep.get("disk").status == "fail" and "--workdir" in rep.get("disk").fix


def test_recipe_estimates_come_from_the_recipe(tmp_path):
    rep = diagnose(root=make_root(tmp_path), archs=["gfx942"], recipe="hip-attention-probe",
                   user="alice", site_paths=[str(make_site(tmp_path, "rocm"))], env={})
    assert rep.recipe == "hip-attention-probe"
    assert rep.get("memory").data["mem_per_job_gb"] == 0.5  # hip-attention-probe.toml


def test_json_on_fixture_root(tmp_path):
    root = make_root(tmp_path)
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "doctor", "--root", str(root),
                        "--arch", "gfx942", "--json"], capture_output=True, text=True)
    data = json.loads(p.stdout)
    names = {c["name"]: c for c in data["checks"]}
    assert names["gpus"]["data"]["gpus"][0]["gfx"] == "gfx942"
    assert names["arch:gfx942"]["status"] == "ok"
    assert p.returncode == (0 if data["ok"] else 10)
    # each step is named on stderr as it starts; stdout stays pure JSON (parsed above)
    steps = [ln for ln in p.stderr.splitlines() if ln.startswith("- ")]
    assert steps[0] == "- detecting the host: torch, the ROCm root, the HIP compiler, memory"
    assert "- compiling a test kernel for gfx942" in steps
    assert steps[-1] == "- checking disk space and memory"
    quiet = subprocess.run([sys.executable, "-m", "rocmbuild", "-q", "doctor", "--root",
                            str(root), "--arch", "gfx942", "--json"], capture_output=True,
                           text=True)
    assert json.loads(quiet.stdout)["ok"] == data["ok"]
    assert not [ln for ln in quiet.stderr.splitlines() if ln.startswith("- ")], quiet.stderr


def test_real_machine():
    """The real checks on this host (no GPU, Debian ROCm + install-hip-toolchain.sh here)."""
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "doctor", "--arch", "gfx90a,gfx942",
                        "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    c = {x["name"]: x for x in data["checks"]}
    assert c["rocm"]["status"] == "ok" and c["rocm"]["data"]["version"]
    assert c["hip-compiler"]["status"] == "ok"
    assert c["arch:gfx90a"]["status"] == c["arch:gfx942"]["status"] == "ok"
    if not Path("/dev/kfd").exists():
        assert c["devices"]["status"] == "warn" and c["gpus"]["status"] == "warn"
    torch = c["torch"]["data"]["torch"]
    if torch is not None:
        assert torch["kind"] in ("cpu", "cuda", "rocm")


@pytest.mark.parametrize(("recipe", "variant", "site", "status", "text"), [
    ("flash-attn", "ck", "cpu", "fail",
     "a ROCm build of torch >=2.2,<2.14 (found torch 2.5.1+cpu"),
    ("flash-attn", "ck", "rocm", "fail", "a ROCm SDK >=6.0,<7.1 with hipcc (found ROCm 6.2.0"),
    ("flash-attn", "triton", "cpu", "ok", "host requirements met (torch)"),
    ("pytorch", None, "rocm", "fail", "a ROCm SDK >=6.3,<6.5 with hipcc"),
])
def test_recipe_requirements_as_build_checks_them(tmp_path, recipe, variant, site, status, text):
    """The real recipes rendered and checked by the pipeline's own requirement check, with the
    fixture root (fake /opt/rocm 6.2.0 without bin/hipcc) and a fixture torch."""
    rep = diagnose(root=make_root(tmp_path), archs=["gfx942"], recipe=recipe, variant=variant,
                   user="alice", site_paths=[str(make_site(tmp_path, site))], env={})
    check = rep.get("recipe")
    assert check.status == status and text in check.message, check.message
    if status == "fail":
        assert not rep.ok  # doctor exits non-zero: the requested build cannot run here
