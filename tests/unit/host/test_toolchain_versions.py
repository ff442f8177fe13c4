"""ROCm and HIP versions from ROCm 6 to 10, and ROCm installed from pip (TheRock) as a ROCm root.

From ROCm 10 the HIP version is not the ROCm version (ROCm 10.1 ships HIP 7.16) and torch has
``torch.version.rocm``: the torch/SDK check compares ROCm with ROCm, and labels say the ROCm
version. None of this can exist on this machine, so everything is faked with small fixture
trees: ROCm roots for 6.2, 7.2, 7.14 and 10.1 (make_rocm_root with .info/version, rocm-core's
rocm_version.h and hip_version.h), ROCm torches as metadata only (make_rocm_torch: dist-info and
torch/version.py), and TheRock's pip install as a site dir of files (make_therock_site). The real
reading code runs on them: toolchain.find_rocm_root, torch_info, requirements, render."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import ToolchainError
from rocmbuild.host import detect as hostmod
from rocmbuild.host import toolchain
from rocmbuild.host.detect import Host
from rocmbuild.plan import requirements
from rocmbuild.plan.model import Plan
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.conftest import ROCM_TREES, make_rocm_root, make_rocm_torch, make_therock_site
from tests.unit.plan.test_render import on_fork

# release -> (torch version, torch.version.hip, torch.version.rocm); torch 2.5 predates the field
TORCHES = {
    "6.2": ("2.5.1+rocm6.2", "6.2.41133-dd7f95766", None),
    "7.2": ("2.11.0+rocm7.2", "7.2.26015-1a2b3c4d5", "7.2.0"),
    "7.14": ("2.14.0+rocm7.14", "7.14.26211-1a2b3c4d5", "7.14.0"),
    "10.1": ("2.15.0+rocm10.1", "7.16.26400-1a2b3c4d5", "10.1.0"),
}


@pytest.fixture(autouse=True)
def _no_rocm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(var, raising=False)


def sdk(tmp_path: Path, release: str, version_file: str = ".info") -> toolchain.RocmRoot:
    version, hip = ROCM_TREES[release]
    root = make_rocm_root(tmp_path / f"rocm-{release}", version, hip=hip,
                          version_file=version_file)
    found = toolchain.find_rocm_root(str(root))
    assert found is not None
    return found


def torch(tmp_path: Path, release: str) -> toolchain.TorchInfo:
    version, hip, rocm = TORCHES[release]
    return toolchain.torch_info([str(make_rocm_torch(tmp_path / f"torch-{release}", version,
                                                     hip, rocm))])


def host(t: toolchain.TorchInfo, root: toolchain.RocmRoot | None) -> Host:
    return Host(python="3.11", python_tag="cp311", platform="linux", torch=t, rocm_root=root,
                compiler=None, cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")


def ck_plan(h: Host) -> Plan:
    """flash-attn's CK variant on its 2.8-fork line (the version rules, not line selection)."""
    return render(on_fork(load(find_recipe("flash-attn"))), Target(arch="gfx942", variant="ck"), h)


# --------------------------------------------------------------------------- version facts


@pytest.mark.parametrize("release", list(ROCM_TREES))
def test_root_versions_keep_rocm_and_hip_apart(tmp_path: Path, release: str) -> None:
    version, hip = ROCM_TREES[release]
    for version_file, origin in ((".info", ".info/version"),
                                 ("header", "include/rocm-core/rocm_version.h")):
        found = sdk(tmp_path / version_file, release, version_file)
        assert found.version == version.split("-")[0] and found.version_from == origin
        assert found.hip_version == hip
    # no rocm-core file at all (ROCm < 10 trees, Debian): the HIP version stands in, and says so
    bare = sdk(tmp_path / "none", release, "none")
    assert bare.version == hip and "HIP version" in bare.version_from


def test_torch_version_rocm_is_read_as_text(tmp_path: Path) -> None:
    t = torch(tmp_path, "10.1")
    assert (t.rocm, t.hip_short, t.rocm_short) == ("10.1.0", "7.16", "10.1")
    assert t.kind == "rocm" and t.rocm_from == "torch.version.rocm 10.1.0"
    old = torch(tmp_path, "6.2")  # no torch.version.rocm: the HIP version is the ROCm version
    assert old.rocm is None and old.rocm_short == "6.2" and "no torch.version.rocm" in old.rocm_from


# --------------------------------------------------------------------------- torch vs SDK


@pytest.mark.parametrize(("torch_for", "sdk_is", "accepted"), [
    ("6.2", "6.2", True),
    ("7.2", "7.2", True),
    ("7.14", "7.14", True),
    ("10.1", "10.1", True),   # HIP 7.16 on both sides of ROCm 10.1: the old HIP==SDK rule refused
    ("6.2", "7.2", False),
    ("7.2", "7.14", False),
    ("7.14", "10.1", False),  # torch's ROCm 7.14 vs ROCm 10.1 (whose HIP 7.16 is not compared)
    ("10.1", "7.14", False),
    ("6.2", "10.1", False),   # no torch.version.rocm: its HIP 6.2 stands for ROCm 6.2
])
def test_torch_and_sdk_pairs(tmp_path: Path, torch_for: str, sdk_is: str, accepted: bool) -> None:
    h = host(torch(tmp_path, torch_for), sdk(tmp_path, sdk_is))
    mismatch = requirements.torch_sdk_mismatch(ck_plan(h), h)
    if accepted:
        assert mismatch is None
        return
    assert mismatch is not None and f"SDK's ROCm {sdk_is}" in mismatch
    t = TORCHES[torch_for]
    # the message names the facts compared: which torch field, which SDK file
    assert f"ROCm {torch_for}, from torch.version.{'rocm' if t[2] else 'hip'}" in mismatch
    assert "from its .info/version" in mismatch
    assert requirements.hint(ck_plan(h), [mismatch], h) is not None


def test_a_root_without_rocm_version_files_compares_its_hip(tmp_path: Path) -> None:
    """ROCm 10.1 headers without rocm-core's files: only HIP 7.16 is known, and the message says
    that the SDK's version came from hip_version.h."""
    h = host(torch(tmp_path, "10.1"), sdk(tmp_path, "10.1", "none"))
    mismatch = requirements.torch_sdk_mismatch(ck_plan(h), h)
    assert mismatch is not None and "include/hip/hip_version.h (the HIP version" in mismatch


# --------------------------------------------------------------------------- labels


def test_label_says_the_rocm_version_not_hip(tmp_path: Path) -> None:
    h = host(torch(tmp_path, "10.1"), sdk(tmp_path, "10.1"))
    p = ck_plan(h)
    assert p.rocm.version == "10.1" and p.local_version.startswith("rocm10.1.")
    assert "rocm7.16" not in p.local_version and "torch.version.rocm" in p.rocm.version_from
    # a plan that does not ask torch (no ROCm torch here): the root's ROCm version, not its HIP
    bare = ck_plan(host(toolchain.TorchInfo("", None, None), sdk(tmp_path / "b", "10.1")))
    assert bare.local_version.startswith("rocm10.1.") and bare.rocm.version_kind == "rocm-root"


# --------------------------------------------------------------------------- pip ROCm (TheRock)


def test_pip_rocm_is_a_root_with_its_targets(tmp_path: Path) -> None:
    site = make_therock_site(tmp_path / "site")
    found = toolchain.find_rocm_root(site_paths=[str(site)], fs_root=tmp_path / "fs")
    assert found is not None and found.where == "rocm_sdk (pip)" and not found.unusable
    assert found.path == site / "_rocm_sdk_devel" and found.has_hipcc and found.kind == "rocm"
    assert (found.version, found.hip_version) == ("10.1.0", "7.16.26400")
    assert found.targets == ("gfx942", "gfx950")
    assert found.components and "hipblaslt" in found.components


def test_precedence_rocm_path_then_pip_then_opt_rocm(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    site = [str(make_therock_site(tmp_path / "site", "7.14"))]
    fs = tmp_path / "fs"
    make_rocm_root(fs / "opt/rocm", "6.2.0-66")
    make_rocm_root(fs / "elsewhere", "7.2.0-43")
    assert toolchain.find_rocm_root(site_paths=site, fs_root=fs).where == "rocm_sdk (pip)"
    monkeypatch.setenv("ROCM_PATH", "/elsewhere")
    assert toolchain.find_rocm_root(site_paths=site, fs_root=fs).version == "7.2.0"
    monkeypatch.delenv("ROCM_PATH")
    assert toolchain.find_rocm_root(str(fs / "opt/rocm"), site_paths=site).where == "--rocm-path"
    # rocm[libraries] only (TheRock's torch pulls it in): /opt/rocm wins, else it is reported
    bare = [str(make_therock_site(tmp_path / "bare", "7.14", devel="absent"))]
    assert toolchain.find_rocm_root(site_paths=bare, fs_root=fs).where == "/opt/rocm"
    alone = toolchain.find_rocm_root(site_paths=bare, fs_root=tmp_path / "empty")
    assert alone is not None and 'pip install "rocm[libraries,devel]"' in alone.unusable


def test_packed_devel_tree_says_run_rocm_sdk_init(tmp_path: Path) -> None:
    site = make_therock_site(tmp_path / "site", devel="packed")
    found = toolchain.find_rocm_root(site_paths=[str(site)], fs_root=tmp_path / "fs")
    assert found is not None and found.version == "10.1.0"  # from _rocm_sdk_core/.info/version
    assert found.version_from == "_rocm_sdk_core/.info/version" and not found.has_hipcc
    assert "run `rocm-sdk init`" in found.unusable
    h = host(torch(tmp_path, "10.1"), found)
    lacking = requirements.missing(ck_plan(h), h)
    assert any("rocm_sdk (pip)" in m and "rocm-sdk init" in m for m in lacking), lacking
    hint = requirements.hint(ck_plan(h), lacking, h)
    assert hint and "run `rocm-sdk init` with this Python (or set ROCM_PATH" in hint
    assert not any("components" in m for m in lacking)  # not judged in a tree not unpacked
    # a plan that only compiles HIP code would use the root too (ROCM_PATH): refused the same way
    probe = replace(ck_plan(h), host_requires=("hip-compiler",), rocm_components=())
    assert any("rocm-sdk init" in m for m in requirements.missing(probe, h))
    assert requirements.missing(replace(probe, host_requires=("torch",)), h) == []


def test_saved_host_carries_the_new_facts_and_old_ones_stay_readable(tmp_path: Path) -> None:
    site = make_therock_site(tmp_path / "site")
    detected = hostmod.detect(fs_root=tmp_path / "fs", want_compiler=False,
                              site_paths=[str(make_rocm_torch(site, *TORCHES["10.1"]))])
    f = tmp_path / "host.json"
    f.write_text(json.dumps(detected.to_json()))
    again = hostmod.load(f)
    assert again == replace(detected, origin=str(f))
    assert again.rocm_root is not None and again.rocm_root.targets == ("gfx942", "gfx950")
    assert again.torch.rocm == "10.1.0" and again.rocm_root.hip_version == "7.16.26400"
    old = detected.to_json()  # as written before: no torch.rocm, version_from, hip, targets
    old["torch"].pop("rocm")
    for key in ("version_from", "hip_version", "targets"):
        old["rocm_root"].pop(key)
    f.write_text(json.dumps(old))
    read = hostmod.load(f)
    assert read.torch.rocm is None and read.torch.rocm_short == "7.16"  # only HIP was known
    assert read.rocm_root is not None and read.rocm_root.targets is None
    assert read.rocm_root.version == "10.1.0" and read.rocm_root.version_from == ""


# --------------------------------------------------------------------------- untrusted files


def _bad_json(site: Path) -> None:
    (site / "_rocm_sdk_core/share/therock/dist_info.json").write_text("{not json")


def _bad_targets(site: Path) -> None:
    (site / "_rocm_sdk_core/share/therock/dist_info.json").write_text(
        '{"dist_amdgpu_targets": ["gfx942"]}')


def _escaping_link(site: Path) -> None:
    f = site / "_rocm_sdk_core/share/therock/dist_info.json"
    outside = site.parent / "outside.json"
    outside.write_text('{"dist_amdgpu_targets": "gfx942"}')
    f.unlink()
    f.symlink_to(os.path.relpath(outside, f.parent))


def _huge(site: Path) -> None:
    (site / "_rocm_sdk_core/.info/version").write_text("10.1.0" + " " * (1 << 20))


def _not_a_version(site: Path) -> None:
    (site / "_rocm_sdk_core/.info/version").write_text("ten point one\n")


@pytest.mark.parametrize(("spoil", "file", "needle"), [
    (_bad_json, "dist_info.json", "not JSON"),
    (_bad_targets, "dist_info.json", "dist_amdgpu_targets: expected a string"),
    (_escaping_link, "dist_info.json", "a link leading out of"),
    (_huge, ".info/version", "over 65536 bytes"),
    (_not_a_version, ".info/version", "is not a version like 6.2.0"),
])
def test_bad_therock_files_are_one_line_errors(tmp_path: Path, spoil: object, file: str,
                                               needle: str) -> None:
    site = make_therock_site(tmp_path / "site", devel="packed")  # core's files are read
    spoil(site)  # type: ignore[operator]
    with pytest.raises(ToolchainError) as exc:
        toolchain.find_rocm_root(site_paths=[str(site)], fs_root=tmp_path / "fs")
    msg = exc.value.message
    assert "\n" not in msg and needle in msg and file in msg and str(site) in msg
    assert exc.value.hint and "rocm[libraries,devel]" in exc.value.hint


def test_a_version_link_out_of_an_sdk_root_is_refused(tmp_path: Path) -> None:
    root = make_rocm_root(tmp_path / "rocm", version_file="none")
    (tmp_path / "elsewhere").write_text("6.2.0\n")
    (root / ".info").mkdir()
    (root / ".info/version").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ToolchainError) as exc:
        toolchain.find_rocm_root(str(root))
    assert "a link leading out of" in exc.value.message and ".info/version" in exc.value.message
