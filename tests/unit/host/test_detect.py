"""The Host value: detection on fixture trees (a ROCm root, KFD sysfs, /proc/meminfo and a ROCm
torch's metadata, none of which exists on this machine), the saved JSON round trip, and one-line
errors for a malformed saved host."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.host import detect as hostmod


def fixture_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.2.0-66\n")
    (root / "opt/rocm/bin").mkdir()
    (root / "opt/rocm/bin/hipcc").write_text("#!/bin/sh\nexit 1\n")
    node = root / "sys/class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_text("simd_count 304\ngfx_target_version 90402\n")
    (root / "proc").mkdir()
    (root / "proc/meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 20971520 kB\n")
    return root


@pytest.fixture
def detected(tmp_path: Path, fake_rocm_torch: Path, monkeypatch: pytest.MonkeyPatch
             ) -> hostmod.Host:
    for var in ("ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(var, raising=False)
    return hostmod.detect(fs_root=fixture_root(tmp_path), want_compiler=False,
                          site_paths=[str(fake_rocm_torch)])


def test_detect_reads_the_fixture_host(detected: hostmod.Host) -> None:
    assert detected.torch.kind == "rocm" and detected.torch.hip_short == "6.2"
    assert detected.rocm_root is not None and detected.rocm_root.version == "6.2.0"
    assert detected.rocm_root.has_hipcc and detected.rocm_root.kind == "rocm"
    assert detected.gpus == ("gfx942",)
    assert detected.memory_bytes == 20 * 2**30 and detected.memory_source == "MemAvailable"
    assert detected.compiler is None and detected.compiler_error == ""
    assert "pip" in detected.dists


def test_saved_host_round_trips(detected: hostmod.Host, tmp_path: Path) -> None:
    f = tmp_path / "host.json"
    f.write_text(json.dumps(detected.to_json()))
    again = hostmod.load(f)
    assert again == replace(detected, origin=str(f))
    # doctor --json wraps the host in its report; that file is accepted as it is
    f.write_text(json.dumps({"ok": True, "checks": [], "host": detected.to_json()}))
    assert hostmod.load(f) == again


@pytest.mark.parametrize(("edit", "text"), [
    (lambda d: d.pop("cpus"), "cpus: missing"),
    (lambda d: d.update(cpus="8"), "cpus: expected int, got str"),
    (lambda d: d.update(cpus=True), "cpus: expected int, got bool"),
    (lambda d: d.update(cpus=0), "cpus: expected a whole number from 1 to 16384"),
    (lambda d: d.update(schema="rocmbuild-host/9"), "schema: expected 'rocmbuild-host/1'"),
    (lambda d: d["torch"].update(version=3), "torch.version: expected str"),
    (lambda d: d.update(gpus=[942]), "gpus: expected strings"),
    (lambda d: d.update(rocm_root={"path": "/opt/rocm"}), "rocm_root.version: missing"),
    # versions are checked where they are read: the --host file and key, never a failed plan
    (lambda d: d["torch"].update(version="banana"), "torch.version: 'banana' is not a version"),
    (lambda d: d["torch"].update(rocm="7.x"), "torch.rocm: '7.x' is not a version"),
    (lambda d: d["torch"].update(hip="7.2 beta"), "torch.hip: '7.2 beta' is not a version"),
    (lambda d: d["rocm_root"].update(version="seven"), "rocm_root.version: 'seven' is not"),
    (lambda d: d["rocm_root"].update(hip_version="x"), "rocm_root.hip_version: 'x' is not"),
    (lambda d: d["dists"].update(pip="latest"), "dists.pip: 'latest' is not a version"),
])
def test_malformed_saved_host_names_the_key(detected: hostmod.Host, tmp_path: Path, edit: object,
                                            text: str) -> None:
    data = detected.to_json()
    edit(data)  # type: ignore[operator]
    f = tmp_path / "host.json"
    f.write_text(json.dumps(data))
    with pytest.raises(UsageError) as exc:
        hostmod.load(f)
    assert str(f) in exc.value.message and text in exc.value.message
    assert exc.value.hint and "doctor --json" in exc.value.hint


def test_unreadable_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        hostmod.load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{nope}")
    with pytest.raises(UsageError, match="not valid JSON"):
        hostmod.load(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(UsageError, match="expected a JSON object"):
        hostmod.load(tmp_path / "list.json")
