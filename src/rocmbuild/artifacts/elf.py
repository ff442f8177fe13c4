"""ELF files and the clang offload bundles in them: which gfx targets does a code object carry?

A HIP host object or .so keeps its device code in the ELF section ``.hip_fatbin``: one clang
offload bundle per translation unit, each on a 4096-byte boundary. A bundle is either plain
(``__CLANG_OFFLOAD_BUNDLE__`` + entry table) or compressed (``CCOB`` v1/v2/v3 header + a zstd or
zlib stream that holds a plain bundle). ``-fgpu-rdc`` objects instead have one section per target,
``__CLANG_OFFLOAD_BUNDLE__<target id>``. Entry IDs look like
``hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`` (``hip-`` with the new offload driver).

Pure Python: only the ELF and bundle headers are read, and a compressed bundle is decompressed
only as far as its entry table. ``artifacts.audit`` judges what ``scan`` finds.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
ELF_MAGIC = b"\x7fELF"
ALIGN = 4096
_CCOB_HEAD_IN = 1 << 20  # compressed bytes read to reach a CCOB's entry table
_HOST_SYMBOLS = (b"__hip_fatbin\0", b"__hip_gpubin_handle", b"__hip_module_ctor")


class BundleFormatError(ValueError):
    pass


@dataclass(frozen=True)
class Bundle:
    kind: str  # "plain", "CCOBv2", "rdc", ...
    offset: int  # file offset of the bundle (or rdc section)
    targets: tuple[str, ...]  # device target IDs: "gfx942:sramecc+:xnack-"
    entries: tuple[str, ...]  # all entry IDs as stored, host entry included


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


SHT_GNU_VERNEED = 0x6FFFFFFE
"""The section type of ``.gnu.version_r``: the symbol versions an ELF file needs, per library."""


def version_needs(buf: Any) -> list[tuple[str, str]]:
    """(library, version) for each symbol version an ELF file needs (``.gnu.version_r``: the
    Elf64_Verneed chain, each with its Elf64_Vernaux chain; names from .dynstr), e.g.
    ``("libc.so.6", "GLIBC_2.34")``. [] without the section; BundleFormatError when a chain
    leaves the section or loops."""
    if bytes(buf[:4]) != ELF_MAGIC:
        return []
    sections = elf_sections(buf)
    need = next((s for s in sections if s.type == SHT_GNU_VERNEED), None)
    strtab = next((s for s in sections if s.name == ".dynstr"), None)
    if need is None or strtab is None:
        return []
    if need.offset + need.size > len(buf) or strtab.offset + strtab.size > len(buf):
        raise BundleFormatError(".gnu.version_r or .dynstr runs past the end of the file")
    names = bytes(buf[strtab.offset:strtab.offset + strtab.size])

    def name(off: int) -> str:
        if off >= len(names):
            raise BundleFormatError(".gnu.version_r names a string outside .dynstr")
        end = names.find(b"\0", off)
        return names[off:end if end >= 0 else None].decode("latin-1")

    out: list[tuple[str, str]] = []
    lo, hi = need.offset, need.offset + need.size
    pos, steps = lo, need.size // 16 + 1  # each entry is 16 bytes: more steps mean a loop
    while True:
        if not lo <= pos <= hi - 16 or steps <= 0:
            raise BundleFormatError(".gnu.version_r: a Verneed entry outside the section")
        _ver, cnt, file_off, aux, nxt = struct.unpack_from("<HHIII", buf, pos)
        library, apos = name(file_off), pos + aux
        for _ in range(cnt):
            if not lo <= apos <= hi - 16 or steps <= 0:
                raise BundleFormatError(".gnu.version_r: a Vernaux entry outside the section")
            _hash, _flags, _other, vname, anext = struct.unpack_from("<IHHII", buf, apos)
            out.append((library, name(vname)))
            steps -= 1
            if anext == 0:
                break
            apos += anext
        steps -= 1
        if nxt == 0:
            return out
        pos += nxt


_GLIBC_VERSION = re.compile(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?")


def glibc_needed(buf: Any) -> tuple[int, int] | None:
    """The highest ``GLIBC_x.y`` symbol version an ELF file needs (None: none, or not ELF):
    the oldest glibc it loads on."""
    found = [(int(m[1]), int(m[2])) for _lib, v in version_needs(buf)
             if (m := _GLIBC_VERSION.fullmatch(v))]
    return max(found) if found else None


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


ELF_KINDS = {1: "relocatable object", 2: "executable", 3: "shared object", 4: "core dump"}
"""ELF e_type -> what it is (ET_REL, ET_EXEC, ET_DYN, ET_CORE)."""


def elf_kind(buf: Any) -> str:
    """What an ELF file or raw bundle in ``buf`` is: an ``ELF_KINDS`` value, ``offload bundle``
    or ``ELF file of type N``. A position-independent executable is ET_DYN: a shared object."""
    head = bytes(buf[:24])
    if head == BUNDLE_MAGIC or head[:4] == CCOB_MAGIC:
        return "offload bundle"
    (etype,) = struct.unpack_from("<H", buf, 0x10)
    return ELF_KINDS.get(etype, f"ELF file of type {etype}")


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
