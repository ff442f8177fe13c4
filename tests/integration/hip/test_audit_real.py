"""audit on real device code compiled in this session (see conftest.py): exact arch sets for each
bundle kind, wheels, the CLI's exit code 7 and JSON. Runs here on the CPU-only Debian toolchain."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rocmbuild.artifacts import audit, elf
from rocmbuild.core.errors import AuditError

from .conftest import make_wheel


@pytest.mark.parametrize(
    ("name", "archs", "kinds", "nbundles"),
    [
        ("one.so", ["gfx942"], ["plain"], 1),
        ("two.so", ["gfx90a:xnack+", "gfx942"], ["plain"], 1),
        ("comp.so", ["gfx90a", "gfx942"], ["CCOBv2"], 1),
        ("multi.so", ["gfx90a", "gfx942"], ["CCOBv2", "plain"], 2),
        ("rdc.o", ["gfx90a", "gfx942"], ["rdc"], 3),  # two device sections + the host section
        ("nok.so", [], [], 0),
        ("host.so", [], [], 0),
        ("hostonly.o", [], [], 0),
    ],
)
def test_exact_archs(objs, clang19, name, archs, kinds, nbundles):
    if name == "comp.so" and not clang19.version.startswith("19"):
        kinds = [f"CCOBv{3 if int(clang19.version.split('.')[0]) >= 21 else 2}"]
    res = audit.audit_file(objs[name], [])
    (so,) = res.objects
    assert so.archs == archs
    assert so.bundle_kinds == kinds
    assert len(so.bundles) == nbundles


def test_multi_tu_bundles_are_page_aligned(objs):
    (so,) = audit.audit_file(objs["multi.so"], []).objects
    offs = [b.offset for b in so.bundles]
    assert offs[0] % 4096 == 0 and offs[1] % 4096 == 0 and offs[1] > offs[0]


def test_clang22_ccob_v3_features_gfx950_generic(objs, clang22):
    if clang22 is None:
        pytest.skip("clang-22 toolchain not installed (install-hip-toolchain.sh --with-gfx950)")
    (so,) = audit.audit_file(objs["c22.so"], ["gfx942", "gfx950"]).objects
    assert so.archs == ["gfx942:sramecc+:xnack-", "gfx950"]
    assert so.bundle_kinds == ["CCOBv3"]
    assert not so.problems
    res = audit.audit_file(objs["generic.so"], ["gfx942"])
    assert res.objects[0].archs == ["gfx9-4-generic"] and res.ok  # generic covers gfx942
    assert not audit.audit_file(objs["generic.so"], ["gfx90a"]).ok


def test_problems_missing_arch_and_no_device_code(objs):
    res = audit.audit_file(objs["one.so"], ["gfx90a", "gfx942"])
    assert not res.ok
    assert res.problems == [f"{objs['one.so']} has no device code for gfx90a (found: gfx942)"]
    # gfx90a matches gfx90a:xnack+ (base name before ':')
    assert audit.audit_file(objs["two.so"], ["gfx90a", "gfx942"]).ok
    assert not audit.audit_file(objs["two.so"], ["gfx90a:xnack-"]).ok
    hostonly = audit.audit_file(objs["hostonly.o"], ["gfx942"])
    assert hostonly.objects[0].hip_host
    assert hostonly.problems == [
        f"{objs['hostonly.o']} has HIP host code but no device code (wanted: gfx942)"]
    # a plain C library and a HIP library without kernels are not HIP device-code carriers
    assert audit.audit_file(objs["host.so"], ["gfx942"]).ok
    nok = audit.audit_file(objs["nok.so"], ["gfx942"])
    assert nok.ok and nok.objects[0].links_hip_runtime


def test_wheel_audit(objs, tmp_path, monkeypatch):
    whl = make_wheel(tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl", {
        "demo/__init__.py": b"",
        "demo/_two.so": objs["two.so"],
        "demo/_multi.cpython-311-x86_64-linux-gnu.so": objs["multi.so"],
        "demo/libhost.so.1": objs["host.so"],
        "demo/data.bin": b"\x7fELX" + b"0" * 100,
    })
    res = audit.audit_wheel(whl, ["gfx90a", "gfx942"])
    assert res.ok, res.problems
    got = {o.name: o.archs for o in res.objects}
    assert got == {"demo/_two.so": ["gfx90a:xnack+", "gfx942"],
                   "demo/_multi.cpython-311-x86_64-linux-gnu.so": ["gfx90a", "gfx942"],
                   "demo/libhost.so.1": []}
    # large members go through a temp file + mmap: same answer
    monkeypatch.setattr(audit, "_EXTRACT_ABOVE", 0)
    assert {o.name: o.archs for o in audit.audit_wheel(whl, []).objects} == got
    data = res.to_json()
    assert data["ok"] and data["found_archs"] == ["gfx90a", "gfx90a:xnack+", "gfx942"]


def test_pure_python_wheel_is_ok(tmp_path):
    whl = make_wheel(tmp_path / "pure-1.0-py3-none-any.whl", {"pure/__init__.py": b"x = 1\n"})
    res = audit.audit_wheel(whl, ["gfx942"])
    assert res.ok and res.objects == []


def test_require_names_wheel_so_and_arch(objs, tmp_path):
    whl = make_wheel(tmp_path / "only942-1.0-cp311-cp311-linux_x86_64.whl",
                     {"only942/_k.so": objs["one.so"]})
    res = audit.audit_wheel(whl, ["gfx90a"])
    with pytest.raises(AuditError) as ei:
        audit.require(res)
    assert str(ei.value) == ("only942-1.0-cp311-cp311-linux_x86_64.whl: only942/_k.so has no "
                             "device code for gfx90a (found: gfx942)")
    assert ei.value.exit_code == 7 and ei.value.hint


def test_cli_exit_7_names_the_so_and_json(objs, tmp_path):
    whl = make_wheel(tmp_path / "only942-1.0-cp311-cp311-linux_x86_64.whl",
                     {"only942/_k.so": objs["one.so"]})
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "audit", str(whl), "--arch", "gfx90a"],
                       capture_output=True, text=True)
    assert p.returncode == 7, p.stderr
    assert "only942/_k.so has no device code for gfx90a" in p.stderr
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "audit", str(objs["two.so"]),
                        str(objs["comp.so"]), "--arch", "gfx90a,gfx942", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert [d["objects"][0]["base_archs"] for d in data] == [["gfx90a", "gfx942"]] * 2
    p = subprocess.run([sys.executable, "-m", "rocmbuild", "audit", str(tmp_path / "nope.whl")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "nope.whl: no such file" in p.stderr


def test_linked_so_bundles_come_from_hipfatbinsegment(objs):
    """In a linked .so, .hipFatBinSegment's HIPF wrappers point at each TU's bundle; the audit
    follows them (no probing) and they agree with probing every page of .hip_fatbin."""
    data = objs["multi.so"].read_bytes()
    secs = {s.name: s for s in elf.elf_sections(data)}
    fat, seg = secs[".hip_fatbin"], secs[".hipFatBinSegment"]
    starts = elf._wrapper_starts(data, seg, fat)
    assert starts is not None and len(starts) == 2
    probed = [b.offset for b in elf.bundles_in(data, fat.offset, fat.offset + fat.size)]
    assert starts == probed
