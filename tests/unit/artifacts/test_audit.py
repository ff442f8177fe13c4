"""Offload-bundle parsing on synthetic inputs the real compilers here cannot produce: CCOB v1
(LLVM 18 only) and zlib CCOBs, hand-made ELF files with several bundles, stray magic bytes,
and corrupt inputs. The real-compiler fixtures are in tests/integration/hip/test_audit_real.py."""

from __future__ import annotations

import struct
import zlib

import pytest
import zstandard

from rocmbuild.artifacts import audit
from rocmbuild.artifacts.elf import BUNDLE_MAGIC, device_target
from rocmbuild.core.errors import AuditError, UsageError

HOST = "host-x86_64-unknown-linux--"


def plain_bundle(targets: list[str], payload: bytes = b"\x7fELF" + b"\0" * 60) -> bytes:
    ids = [HOST] + [f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets]
    head = len(BUNDLE_MAGIC) + 8 + sum(24 + len(i) for i in ids)
    off = -(-head // 4096) * 4096
    table, blobs = b"", b""
    for i in ids:
        size = 0 if i == HOST else len(payload)
        table += struct.pack("<QQQ", off + len(blobs) if size else off, size, len(i)) + i.encode()
        if size:
            blobs += payload
    header = BUNDLE_MAGIC + struct.pack("<Q", len(ids)) + table
    return header + b"\0" * (off - len(header)) + blobs


def ccob(raw: bytes, version: int, method: int = 1) -> bytes:
    data = zstandard.ZstdCompressor().compress(raw) if method == 1 else zlib.compress(raw)
    if version == 1:
        hdr = struct.pack("<4sHHIQ", b"CCOB", 1, method, len(raw), 0)
    elif version == 2:
        hdr = struct.pack("<4sHHIIQ", b"CCOB", 2, method, 24 + len(data), len(raw), 0)
    else:
        hdr = struct.pack("<4sHHQQQ", b"CCOB", 3, method, 32 + len(data), len(raw), 0)
    return hdr + data


def pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4096)


def elf(sections: dict[str, bytes]) -> bytes:
    """A minimal ELF64 file: the given PROGBITS sections at 4096-aligned offsets + .shstrtab."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in sections) + b".shstrtab\0"
    body, hdrs, pos = b"", [struct.pack("<IIQQQQIIQQ", *([0] * 10))], 4096
    name_off = 1
    for n, data in sections.items():
        hdrs.append(struct.pack("<IIQQQQIIQQ", name_off, 1, 2, pos, pos, len(data), 0, 0, 4096, 0))
        name_off += len(n) + 1
        body += pad(data)
        pos += len(pad(data))
    hdrs.append(struct.pack("<IIQQQQIIQQ", name_off, 3, 0, 0, pos, len(names), 0, 0, 1, 0))
    shoff = pos + len(names)
    eh = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9, 3, 62, 1, 0, 0,
                     shoff, 0, 64, 0, 0, 64, len(hdrs), len(hdrs) - 1)
    return pad(eh) + body + names + b"".join(hdrs)


@pytest.mark.parametrize(("eid", "want"), [
    ("hipv4-amdgcn-amd-amdhsa--gfx942", "gfx942"),
    ("hip-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-"),
    ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+"),
    ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "gfx9-4-generic"),
    ("openmp-amdgcn-amd-amdhsa--gfx90a", "gfx90a"),
    ("host-x86_64-unknown-linux--", None),
    ("host-x86_64-unknown-linux-gnu-", None),
    ("hipv4-amdgcn-amd-amdhsa-", None),
    ("hip-nvptx64-nvidia-cuda--sm_80", None),
])
def test_device_target(eid, want):
    assert device_target(eid) == want


@pytest.mark.parametrize(("found", "wanted", "ok"), [
    ("gfx90a:xnack+", "gfx90a", True),
    ("gfx90a", "gfx90a:xnack+", True),
    ("gfx90a:xnack+", "gfx90a:xnack-", False),
    ("gfx942:sramecc+:xnack-", "gfx942:xnack-", True),
    ("gfx942", "gfx90a", False),
    ("gfx9-4-generic", "gfx950", True),
    ("gfx9-4-generic", "gfx90a", False),
    ("gfx94", "gfx942", False),
])
def test_covers(found, wanted, ok):
    assert audit.covers(found, wanted) is ok


@pytest.mark.parametrize(("version", "method"), [(1, 1), (2, 1), (3, 1), (2, 0), (3, 0)])
def test_ccob_versions_in_elf(tmp_path, version, method):
    fat = pad(plain_bundle(["gfx90a"])) + pad(ccob(plain_bundle(["gfx942", "gfx950"]), version,
                                                   method))
    f = tmp_path / "x.so"
    f.write_bytes(elf({".hipFatBinSegment": b"\0" * 24, ".hip_fatbin": fat}))
    (so,) = audit.audit_file(f, ["gfx90a", "gfx942", "gfx950"]).objects
    assert so.archs == ["gfx90a", "gfx942", "gfx950"]
    assert so.bundle_kinds == sorted(["plain", f"CCOBv{version}"])
    assert [b.offset % 4096 for b in so.bundles] == [0, 0]


def test_raw_bundle_file_and_stray_magic(tmp_path):
    # a payload that contains the magic (not on a page boundary) must not count as a bundle
    payload = b"\x7fELF" + b"x" * 100 + BUNDLE_MAGIC + b"\0" * 64
    fat = plain_bundle(["gfx942"], payload=payload)
    f = tmp_path / "k.hipfb"
    f.write_bytes(fat)
    (so,) = audit.audit_file(f, []).objects
    assert so.archs == ["gfx942"] and len(so.bundles) == 1


def test_rdc_sections(tmp_path):
    f = tmp_path / "r.o"
    dev = "__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a:xnack-"
    f.write_bytes(elf({dev: b"BC\xc0\xde",
                       "__CLANG_OFFLOAD_BUNDLE__host-x86_64-pc-linux-gnu-": b"\0"}))
    (so,) = audit.audit_file(f, ["gfx90a"]).objects
    assert so.archs == ["gfx90a:xnack-"] and so.bundle_kinds == ["rdc"] and so.hip_host


def test_empty_fatbin_is_host_without_device_code(tmp_path):
    f = tmp_path / "e.so"
    f.write_bytes(elf({".hip_fatbin": b""}))
    res = audit.audit_file(f, ["gfx942"])
    assert res.problems == [f"{f} has HIP host code but no device code (wanted: gfx942)"]


@pytest.mark.parametrize(("blob", "msg"), [
    (pad(b"CCOB" + struct.pack("<HHIIQ", 9, 1, 100, 100, 0)), "unknown CCOB version 9"),
    (pad(b"CCOB" + struct.pack("<HHIIQ", 2, 1, 64, 100, 0) + b"junk" * 10), "does not decompress"),
    (pad(b"CCOB" + struct.pack("<HHIIQ", 2, 1, 10**9, 100, 0)), "runs past the section"),
    (BUNDLE_MAGIC + struct.pack("<Q", 1) + struct.pack("<QQQ", 0, 0, 999), "truncated"),
])
def test_corrupt_bundles_raise_audit_error(tmp_path, blob, msg):
    f = tmp_path / "bad.so"
    f.write_bytes(elf({".hip_fatbin": blob}))
    with pytest.raises(AuditError) as ei:
        audit.audit_file(f, [])
    assert msg in str(ei.value) and "bad.so" in str(ei.value)


def test_bad_inputs(tmp_path):
    t = tmp_path / "notes.txt"
    t.write_text("hello")
    with pytest.raises(UsageError, match="not a wheel, ELF file or offload bundle"):
        audit.audit_file(t, [])
    with pytest.raises(UsageError, match="no such file"):
        audit.audit_file(tmp_path / "missing.whl", [])
    z = tmp_path / "broken.whl"
    z.write_bytes(b"PK\x03\x04" + b"\0" * 10)
    with pytest.raises(AuditError, match="not a readable wheel"):
        audit.audit_file(z, [])
    e32 = tmp_path / "x32.so"
    e32.write_bytes(b"\x7fELF\x01\x01" + b"\0" * 100)
    with pytest.raises(AuditError, match="not a 64-bit"):
        audit.audit_file(e32, [])


def typed(buf: bytes, etype: int) -> bytes:
    """``buf`` (an ELF file) with its e_type set: 1 ET_REL, 2 ET_EXEC, 3 ET_DYN, 4 ET_CORE."""
    return buf[:16] + struct.pack("<H", etype) + buf[18:]


def _device(etype: int) -> bytes:
    fat = pad(plain_bundle(["gfx942"]))
    return typed(elf({".hipFatBinSegment": b"\0" * 24, ".hip_fatbin": fat}), etype)


@pytest.mark.parametrize(("name", "etype", "problem"), [
    ("x.so", 1, "x.so is a relocatable object, not a shared object: nothing can load it"),
    ("libx.so.1.2", 1, "libx.so.1.2 is a relocatable object, not a shared object"),
    ("x.so", 2, "x.so is an executable, not a shared object"),
    ("x.so", 4, "x.so is a core dump, not a shared object"),
    ("x.so", 9, "x.so is an ELF file of type 9, not a shared object"),
    ("x.o", 1, None),  # a HIP object file given by itself is audited as it is
    ("tool", 2, None),
    ("x.so", 3, None),
])
def test_a_file_named_as_a_shared_object_must_be_one(tmp_path, name, etype, problem):
    f = tmp_path / name
    f.write_bytes(_device(etype))
    res = audit.audit_file(f, ["gfx942"])
    (so,) = res.objects
    assert so.archs == ["gfx942"]  # its device code is still read and listed
    shown = [p.replace(f"{tmp_path}/", "") for p in res.problems]
    assert shown == [] if problem is None else len(shown) == 1 and shown[0].startswith(problem)
    if problem:
        with pytest.raises(AuditError) as err:
            audit.require(res)
        assert err.value.hint == "link it as a shared object (-shared -fPIC), or leave it out " \
            "of the wheel"


def test_in_a_wheel_nothing_loads_a_relocatable_object(tmp_path):
    import zipfile

    w = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as zf:
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("pkg/x.o", _device(1))
        zf.writestr("pkg/bin/tool", _device(2))  # an executable may ship in a wheel
        zf.writestr("pkg/_C.so", _device(3))
        zf.writestr("pkg/_D.so", _device(2))
    res = audit.audit_file(w, ["gfx942"])
    assert {o.name: o.kind for o in res.objects} == {
        "pkg/x.o": "relocatable object", "pkg/bin/tool": "executable",
        "pkg/_C.so": "shared object", "pkg/_D.so": "executable"}
    assert res.problems == [
        f"{w.name}: pkg/x.o is a relocatable object, not a shared object: nothing can load it "
        "from an installed wheel",
        f"{w.name}: pkg/_D.so is an executable, not a shared object: nothing can load it from "
        "an installed wheel"]
    assert res.to_json()["objects"][0]["kind"] == "relocatable object"


def test_hip_label_warnings_read_the_label_through_the_wheel_name_parser() -> None:
    """A library linking libamdhip64.so.7 in a wheel labelled rocm6.2 is named; the same library
    under a rocm7 label, or a file that is not a wheel (a .so audited alone), gives nothing."""
    so = audit.SharedObjectAudit("pkg/_C.so", ["gfx942"], [], True, True,
                           needed=["libamdhip64.so.7", "libc.so.6"])
    got = audit.hip_label_warnings("pkg-1.0+rocm6.2.gfx942-cp311-cp311-linux_x86_64.whl", [so])
    assert got == ["pkg-1.0+rocm6.2.gfx942-cp311-cp311-linux_x86_64.whl: pkg/_C.so links "
                   "libamdhip64.so.7 (ROCm 7) but the label says rocm6.2"]
    assert audit.hip_label_warnings("pkg-1.0+rocm7.2-cp311-cp311-linux_x86_64.whl", [so]) == []
    assert audit.hip_label_warnings("lib-1-2-3.so", [so]) == []
