"""Code-object audit: which gfx targets does each ELF shared object in a wheel carry?

A HIP host object or .so keeps its device code in the ELF section ``.hip_fatbin``: one clang
offload bundle per translation unit, each on a 4096-byte boundary. A bundle is either plain
(``__CLANG_OFFLOAD_BUNDLE__`` + entry table) or compressed (``CCOB`` v1/v2/v3 header + a zstd or
zlib stream that holds a plain bundle). ``-fgpu-rdc`` objects instead have one section per target,
``__CLANG_OFFLOAD_BUNDLE__<target id>``. Entry IDs look like
``hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`` (``hip-`` with the new offload driver).

Pure Python: the file is mmapped, only the ELF and bundle headers are read, and a compressed bundle
is decompressed only as far as its entry table. A 1 GB .so audits in milliseconds.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.core.errors import AuditError, UsageError

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
ELF_MAGIC = b"\x7fELF"
ALIGN = 4096
_EXTRACT_ABOVE = 32 * 1024 * 1024  # larger wheel members go through a temp file + mmap
_CCOB_HEAD_IN = 1 << 20  # compressed bytes read to reach a CCOB's entry table
_HOST_SYMBOLS = (b"__hip_fatbin\0", b"__hip_gpubin_handle", b"__hip_module_ctor")

# Generic targets (LLVM >= 19) and the processors whose code they run on.
GENERIC_TARGETS: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset({"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034",
                                  "gfx1035", "gfx1036"}),
    "gfx11-generic": frozenset({"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
                                "gfx1152", "gfx1153"}),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}


class BundleFormatError(ValueError):
    pass


@dataclass(frozen=True)
class Bundle:
    kind: str  # "plain", "CCOBv2", "rdc", ...
    offset: int  # file offset of the bundle (or rdc section)
    targets: tuple[str, ...]  # device target IDs: "gfx942:sramecc+:xnack-"
    entries: tuple[str, ...]  # all entry IDs as stored, host entry included


@dataclass
class SharedObjectAudit:
    name: str  # wheel member name, or the file path
    archs: list[str]  # sorted device target IDs found (features kept)
    bundles: list[Bundle]
    hip_host: bool  # has HIP host registration code (.hipFatBinSegment/.hip_fatbin/__hip_fatbin)
    links_hip_runtime: bool  # DT_NEEDED / dynstr names libamdhip64
    problems: list[str] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)  # DT_NEEDED entries of .dynamic

    @property
    def bundle_kinds(self) -> list[str]:
        return sorted({b.kind for b in self.bundles})

    @property
    def base_archs(self) -> list[str]:
        return sorted({a.split(":", 1)[0] for a in self.archs})

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "archs": self.archs, "base_archs": self.base_archs,
            "bundle_kinds": self.bundle_kinds, "hip_host": self.hip_host,
            "links_hip_runtime": self.links_hip_runtime, "problems": self.problems,
            "needed": self.needed,
            "bundles": [{"kind": b.kind, "offset": b.offset, "targets": list(b.targets),
                         "entries": list(b.entries)} for b in self.bundles],
        }


@dataclass
class WheelAudit:
    path: str
    archs: list[str]  # requested
    objects: list[SharedObjectAudit]
    problems: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def found_archs(self) -> list[str]:
        return sorted({a for o in self.objects for a in o.archs})

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "requested_archs": self.archs, "ok": self.ok,
                "found_archs": self.found_archs, "problems": self.problems,
                "warnings": self.warnings,
                "objects": [o.to_json() for o in self.objects]}


# --------------------------------------------------------------------------- target IDs


def device_target(entry_id: str) -> str | None:
    """'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+' -> 'gfx90a:xnack+'; host/other entries -> None."""
    kind, _, rest = entry_id.partition("-")
    if not kind.startswith("hip") and kind != "openmp":
        return None
    parts = rest.split("-", 4)
    if len(parts) < 5 or parts[0] != "amdgcn" or not parts[4]:
        return None
    return parts[4]


def covers(found: str, wanted: str) -> bool:
    """Does code for target ID ``found`` run on ``wanted``? Base names must match (or ``found``
    is a generic target that includes it); a feature that ``wanted`` fixes (xnack+) must not be
    contradicted by ``found``; a feature ``found`` leaves open (any) is fine either way."""
    fbase, *ffeat = found.split(":")
    wbase, *wfeat = wanted.split(":")
    if fbase != wbase and wbase not in GENERIC_TARGETS.get(fbase, frozenset()):
        return False
    fset = {f[:-1]: f[-1] for f in ffeat if f[-1:] in "+-"}
    for f in wfeat:
        name, sign = f[:-1], f[-1:]
        if name in fset and fset[name] != sign:
            return False
    return True


# --------------------------------------------------------------------------- ELF


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int


def elf_sections(buf: Any) -> list[_Section]:
    """Section headers of an ELF64 little-endian file in ``buf`` (bytes or mmap)."""
    if len(buf) < 64 or buf[:4] != ELF_MAGIC:
        raise BundleFormatError("not an ELF file")
    if buf[4] != 2 or buf[5] != 1:
        raise BundleFormatError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", buf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    if shoff == 0 or shnum == 0:
        return []
    if shentsize < 64 or shoff + shnum * shentsize > len(buf) or shstrndx >= shnum:
        raise BundleFormatError("truncated or corrupt section header table")
    raw = [struct.unpack_from("<IIQQQQ", buf, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = raw[shstrndx][4], raw[shstrndx][5]
    names = bytes(buf[str_off:str_off + str_size])
    out = []
    for name_off, sh_type, _flags, addr, off, size in raw:
        end = names.find(b"\0", name_off)
        name = names[name_off:end if end >= 0 else None].decode("latin-1")
        out.append(_Section(name, sh_type, addr, off, size))
    return out


def needed_libraries(buf: Any) -> list[str]:
    """The DT_NEEDED entries of an ELF file's .dynamic section (names from .dynstr)."""
    if bytes(buf[:4]) != ELF_MAGIC:
        return []
    sections = elf_sections(buf)
    dyn = next((s for s in sections if s.type == 6), None)  # SHT_DYNAMIC
    strtab = next((s for s in sections if s.name == ".dynstr"), None)
    if dyn is None or strtab is None or dyn.offset + dyn.size > len(buf):
        return []
    names = bytes(buf[strtab.offset:strtab.offset + strtab.size])
    out = []
    for pos in range(dyn.offset, dyn.offset + dyn.size - 15, 16):
        tag, val = struct.unpack_from("<qQ", buf, pos)
        if tag == 0:  # DT_NULL
            break
        if tag == 1 and val < len(names):  # DT_NEEDED
            end = names.find(b"\0", val)
            out.append(names[val:end if end >= 0 else None].decode("latin-1"))
    return out


_HIP_SONAME = re.compile(r"^libamdhip64\.so\.(\d+)")
_LABEL_ROCM = re.compile(r"\+(?:[^-]*\.)?rocm(\d+)((?:\.\d+)*)")


def hip_label_warnings(wheel_name: str, objects: Sequence[SharedObjectAudit]) -> list[str]:
    """A shared object linking ``libamdhip64.so.N`` whose N is not the major of the wheel's
    ``+rocmX.Y`` label: the label does not say what the wheel was linked against."""
    m = _LABEL_ROCM.search(wheel_name.split("-")[1] if wheel_name.count("-") >= 2 else "")
    if m is None:
        return []
    out = []
    for o in objects:
        for lib in o.needed:
            hm = _HIP_SONAME.match(lib)
            if hm and hm.group(1) != m.group(1):
                out.append(f"{wheel_name}: {o.name} links {lib} (ROCm {hm.group(1)}) but the "
                           f"label says rocm{m.group(1)}{m.group(2)}")
    return out


# --------------------------------------------------------------------------- bundles


def _entries(header: Any, pos: int = 0,
             limit: int | None = None) -> tuple[list[tuple[str, int, int]], int]:
    """Entry table of a plain bundle at header[pos:limit]: ([(id, offset, size)], bytes spanned)."""
    limit = len(header) if limit is None else limit
    if bytes(header[pos:pos + 24]) != BUNDLE_MAGIC:
        raise BundleFormatError("missing __CLANG_OFFLOAD_BUNDLE__ magic")
    if limit < pos + 32:
        raise BundleFormatError("truncated bundle header")
    (n,) = struct.unpack_from("<Q", header, pos + 24)
    if n > 4096:
        raise BundleFormatError(f"implausible bundle entry count {n}")
    p, span, out = pos + 32, 32, []
    for _ in range(n):
        if p + 24 > limit:
            raise BundleFormatError("truncated bundle entry table")
        off, size, idlen = struct.unpack_from("<QQQ", header, p)
        p += 24
        if idlen > 4096 or p + idlen > limit:
            raise BundleFormatError("truncated bundle entry id")
        out.append((bytes(header[p:p + idlen]).decode("ascii", "replace"), off, size))
        p += idlen
        span = max(span, off + size, p - pos)
    return out, span


class _NeedMore(Exception):
    pass


def _ccob(buf: Any, pos: int, limit: int) -> tuple[list[tuple[str, int, int]], int, int]:
    """Compressed bundle at buf[pos:]: (entries, version, end). Decompresses only as much as
    the entry table needs."""
    if pos + 8 > limit:
        raise BundleFormatError("truncated CCOB header")
    version, method = struct.unpack_from("<HH", buf, pos + 4)
    if version == 1:
        hdr, total = 20, 0
    elif version == 2:
        (total,) = struct.unpack_from("<I", buf, pos + 8)
        hdr = 24
    elif version == 3:
        (total,) = struct.unpack_from("<Q", buf, pos + 8)
        hdr = 32
    else:
        raise BundleFormatError(f"unknown CCOB version {version}")
    end = pos + total if total else limit
    if end > limit or end < pos + hdr:
        raise BundleFormatError(f"CCOB v{version} size {total} runs past the section")
    if method not in (0, 1):
        raise BundleFormatError(f"unknown CCOB compression method {method}")
    # Decompress only as far as the entry table reaches (it sits at the start of the payload);
    # the code objects after it are never inflated.
    payload = bytes(buf[pos + hdr:min(end, pos + hdr + _CCOB_HEAD_IN)])
    got = b""
    want = 4096
    try:
        while True:
            if method == 1:
                import zstandard

                with zstandard.ZstdDecompressor().stream_reader(payload) as reader:
                    got = reader.read(want)
            else:
                got = zlib.decompressobj().decompress(payload, want)
            try:
                entries, _ = _entries(got)
                break
            except BundleFormatError as exc:
                if "truncated" not in str(exc) or len(got) < want or want >= 1 << 24:
                    raise
                want *= 8
    except BundleFormatError:
        raise
    except Exception as exc:  # zstd / zlib errors
        raise BundleFormatError(f"CCOB v{version} payload does not decompress: {exc}") from exc
    if not total:  # v1 has no size field; probing for the next bundle goes on after the header
        end = pos + hdr
    return entries, version, end


def _bundle(kind: str, offset: int, entries: list[tuple[str, int, int]]) -> Bundle:
    targets = tuple(t for eid, _off, size in entries if size and (t := device_target(eid)))
    return Bundle(kind, offset, targets, tuple(eid for eid, _o, _s in entries))


def _bundle_at(buf: Any, pos: int, end: int) -> tuple[Bundle, int] | None:
    """The bundle starting at buf[pos] and where it ends, or None when no bundle starts there."""
    head = bytes(buf[pos:pos + 24])
    if head == BUNDLE_MAGIC:
        entries, span = _entries(buf, pos, end)
        return _bundle("plain", pos, entries), pos + span
    if head[:4] == CCOB_MAGIC:
        entries, version, stop = _ccob(buf, pos, end)
        return _bundle(f"CCOBv{version}", pos, entries), stop
    return None


def bundles_in(buf: Any, start: int = 0, end: int | None = None,
               starts: Sequence[int] | None = None) -> Iterator[Bundle]:
    """Bundles in buf[start:end], e.g. a .hip_fatbin. ``starts``: the known bundle offsets (from
    .hipFatBinSegment). Without them every 4096-byte boundary is probed, and each bundle found is
    skipped by its size, so payloads are never read."""
    end = len(buf) if end is None else end
    if starts is not None:
        for s in starts:
            found = _bundle_at(buf, s, end)
            if found is None:
                raise BundleFormatError(f"no offload bundle at {s:#x}, where .hipFatBinSegment "
                                        "points")
            yield found[0]
        return
    pos = start
    while pos < end:
        found = _bundle_at(buf, pos, end)
        if found is None:
            pos += ALIGN
            continue
        yield found[0]
        pos = start + max(pos - start + ALIGN, -(-(found[1] - start) // ALIGN) * ALIGN)


def _wrapper_starts(buf: Any, seg: _Section, fat: _Section) -> list[int] | None:
    """Bundle file offsets from the 24-byte HIPF wrappers in .hipFatBinSegment (a linked .so holds
    each bundle's address there); None when they cannot be used (relocatable .o: addresses 0)."""
    if seg.size % 24 or seg.size == 0 or seg.offset + seg.size > len(buf):
        return None
    ptrs = []
    for i in range(seg.offset, seg.offset + seg.size, 24):
        magic, _version, ptr = struct.unpack_from("<IIQ", buf, i)
        if magic != 0x48495046:
            return None
        ptrs.append(ptr)
    if len(set(ptrs)) != len(ptrs) or not all(fat.addr <= p < fat.addr + fat.size for p in ptrs):
        return None
    return sorted(fat.offset + (p - fat.addr) for p in ptrs)


def scan(buf: Any) -> tuple[list[Bundle], bool, bool]:
    """(bundles, hip_host, links_hip_runtime) of an ELF file or a raw bundle in ``buf``."""
    head = bytes(buf[:24])
    if head == BUNDLE_MAGIC or head[:4] == CCOB_MAGIC:  # a raw .hipfb / bundle file
        return list(bundles_in(buf)), False, False
    bundles: list[Bundle] = []
    hip_host = links_hip = False
    sections = elf_sections(buf)
    relocatable = struct.unpack_from("<H", buf, 0x10)[0] == 1  # ET_REL
    seg = next((s for s in sections if s.name == ".hipFatBinSegment"), None)
    for s in sections:
        if s.type == 8:  # SHT_NOBITS: nothing in the file
            continue
        if s.name == ".hip_fatbin":
            hip_host = True
            if s.offset + s.size > len(buf):
                raise BundleFormatError(".hip_fatbin runs past the end of the file")
            starts = None if relocatable or seg is None else _wrapper_starts(buf, seg, s)
            bundles.extend(bundles_in(buf, s.offset, s.offset + s.size, starts))
        elif s.name == ".hipFatBinSegment":
            hip_host = True
        elif s.name.startswith("__CLANG_OFFLOAD_BUNDLE__"):
            eid = s.name[len(BUNDLE_MAGIC):]
            bundles.append(_bundle("rdc", s.offset, [(eid, s.offset, s.size)]))
            if eid.startswith("host-"):
                hip_host = True
        elif s.name in (".dynstr", ".strtab") and s.offset + s.size <= len(buf):
            lo, hi = s.offset, s.offset + s.size
            if not hip_host and any(buf.find(sym, lo, hi) >= 0 for sym in _HOST_SYMBOLS):
                hip_host = True
            if s.name == ".dynstr" and buf.find(b"libamdhip64.so", lo, hi) >= 0:
                links_hip = True
    return bundles, hip_host, links_hip


def audit_buffer(name: str, buf: Any, archs: Sequence[str], label: str) -> SharedObjectAudit:
    try:
        bundles, hip_host, links_hip = scan(buf)
    except BundleFormatError as exc:
        raise AuditError(f"{label + ': ' if label else ''}{name}: {exc}",
                         hint="is it a complete file? rebuild it, or report a bug with the file "
                         "if clang-offload-bundler reads it") from exc
    try:
        needed = needed_libraries(buf)
    except (BundleFormatError, struct.error):
        needed = []
    found = sorted({t for b in bundles for t in b.targets})
    so = SharedObjectAudit(name, found, bundles, hip_host, links_hip, needed=needed)
    has_device = bool(found)
    who = f"{label}: {name}" if label else name
    if hip_host and not has_device:
        so.problems.append(f"{who} has HIP host code but no device code"
                           + (f" (wanted: {', '.join(archs)})" if archs else ""))
    elif has_device:
        for a in archs:
            if not any(covers(f, a) for f in found):
                so.problems.append(f"{who} has no device code for {a} "
                                   f"(found: {', '.join(found)})")
    return so


def _mapped(path: Path) -> tuple[Any, Any]:
    f = open(path, "rb")  # noqa: SIM115
    try:
        if os.fstat(f.fileno()).st_size == 0:
            return f, b""
        return f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except Exception:
        f.close()
        raise


def _audit_path(path: Path, name: str, archs: Sequence[str], label: str) -> SharedObjectAudit:
    f, buf = _mapped(path)
    try:
        return audit_buffer(name, buf, archs, label)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
        f.close()


def _is_elf_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    if info.is_dir() or info.file_size < 64:
        return False
    with zf.open(info) as fh:
        return fh.read(4) == ELF_MAGIC


def audit_wheel(path: Path, archs: Sequence[str]) -> WheelAudit:
    """Audit every ELF member of a wheel (or any zip)."""
    path = Path(path)
    archs = list(archs)
    objects: list[SharedObjectAudit] = []
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise AuditError(f"{path}: not a readable wheel: {exc}",
                         hint="pass a .whl file, a .so, or a HIP object file") from exc
    with zf, tempfile.TemporaryDirectory(prefix="rocmbuild-audit-") as tmp:
        for info in zf.infolist():
            if not _is_elf_member(zf, info):
                continue
            if info.file_size > _EXTRACT_ABOVE:
                dest = Path(tmp) / "member.so"
                with zf.open(info) as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                objects.append(_audit_path(dest, info.filename, archs, path.name))
                dest.unlink()
            else:
                objects.append(audit_buffer(info.filename, zf.read(info), archs, path.name))
    return WheelAudit(str(path), archs, objects, [p for o in objects for p in o.problems],
                      hip_label_warnings(path.name, objects))


def _require_wheel(path: Path) -> None:
    """A zip is audited only when it is a wheel: a ``*.dist-info/WHEEL`` member at the top."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise AuditError(f"{path}: not a readable wheel: {exc}",
                         hint="pass a .whl file, a .so, or a HIP object file") from exc
    if not any(n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")
               and n.endswith("/WHEEL") for n in names):
        raise UsageError(f"audit: {path}: a zip but not a wheel (no *.dist-info/WHEEL)",
                         hint="pass a .whl file built by a wheel builder, a .so, or a HIP "
                         "object file")


def audit_file(path: Path, archs: Sequence[str]) -> WheelAudit:
    """Audit a wheel (by zip magic) or a single ELF file / raw offload bundle."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"audit: {path}: no such file", hint="pass a .whl or .so path")
    with open(path, "rb") as fh:
        magic = fh.read(24)
    if magic[:4] == b"PK\x03\x04":
        _require_wheel(path)
        return audit_wheel(path, archs)
    if magic[:4] not in (ELF_MAGIC, CCOB_MAGIC) and magic != BUNDLE_MAGIC:
        raise UsageError(f"audit: {path}: not a wheel, ELF file or offload bundle",
                         hint="pass a .whl, a .so / .o, or a .hipfb bundle")
    so = _audit_path(path, str(path), list(archs), "")
    return WheelAudit(str(path), list(archs), [so], list(so.problems))


def require(audit: WheelAudit) -> None:
    """Raise AuditError naming the first .so and missing arch when the audit has problems."""
    if audit.ok:
        return
    more = len(audit.problems) - 1
    raise AuditError(
        audit.problems[0] + (f" (+{more} more)" if more else ""),
        hint="rebuild for the missing arch (--arch); check that the arch list reached the "
        "compiler (CMAKE_HIP_ARCHITECTURES, PYTORCH_ROCM_ARCH, GPU_TARGETS, --offload-arch)",
        detail="\n".join(audit.problems) if more else None,
    )


def require_all(audits: Sequence[WheelAudit], archs: Sequence[str]) -> None:
    """Raise AuditError listing every problem of every audit (none: return)."""
    problems = [p for a in audits for p in a.problems]
    if problems:
        require(WheelAudit(", ".join(a.path for a in audits), list(archs), [], problems))
