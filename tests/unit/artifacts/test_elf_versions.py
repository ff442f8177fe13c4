"""The symbol versions an ELF file needs (``.gnu.version_r``, ``elf.version_needs`` /
``glibc_needed``) and the manylinux platform tags they are compared with. The ELF files are real
system libraries of this Debian 12 (glibc 2.36), read in-process; a newer glibc than this host's
is made by editing one ``GLIBC_2.x`` name in a copy's .dynstr, a broken chain by editing its
``vn_next`` / ``vn_aux``."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from rocmbuild.artifacts.elf import (
    SHT_GNU_VERNEED,
    BundleFormatError,
    elf_sections,
    glibc_needed,
    version_needs,
)
from rocmbuild.artifacts.wheel import manylinux_glibc, raise_glibc

LIB = Path("/usr/lib/x86_64-linux-gnu")
HSAKMT = LIB / "libhsakmt.so.1"  # Debian's ROCm 5.2 thunk: needs GLIBC_2.34 (readelf -V)
needs_hsakmt = pytest.mark.skipif(not HSAKMT.exists(), reason="Debian's libhsakmt1 not installed")


@needs_hsakmt
def test_a_real_library_needs_what_readelf_lists() -> None:
    buf = HSAKMT.read_bytes()
    needs = version_needs(buf)
    assert ("libc.so.6", "GLIBC_2.34") in needs and ("libc.so.6", "GLIBC_2.2.5") in needs
    assert {lib for lib, _ in needs} <= {"libc.so.6", "libnuma.so.1", "libdrm.so.2",
                                         "libdrm_amdgpu.so.1", "libpthread.so.0", "libdl.so.2"}
    assert glibc_needed(buf) == (2, 34)


def test_libstdcxx_needs_glibc_but_its_own_versions_do_not_count() -> None:
    buf = (LIB / "libstdc++.so.6").read_bytes()
    assert any(v.startswith("GLIBC_") for _, v in version_needs(buf))
    assert not any(v.startswith("GLIBCXX_") for _, v in version_needs(buf))  # defined, not needed
    got = glibc_needed(buf)
    assert got is not None and (2, 2) < got <= (2, 36)  # this host's glibc is 2.36


@needs_hsakmt
def test_an_edited_version_name_is_what_counts(tmp_path: Path) -> None:
    buf = bytearray(HSAKMT.read_bytes())
    dynstr = next(s for s in elf_sections(buf) if s.name == ".dynstr")
    at = buf.index(b"GLIBC_2.34\0", dynstr.offset)
    buf[at:at + 10] = b"GLIBC_2.99"  # same length: nothing else moves
    assert glibc_needed(bytes(buf)) == (2, 99)
    buf[at:at + 10] = b"GLIBC_PRIV"  # not a version: the next highest counts
    assert glibc_needed(bytes(buf)) is not None and glibc_needed(bytes(buf)) < (2, 34)


@needs_hsakmt
def test_a_chain_that_leaves_the_section_is_a_format_error() -> None:
    buf = bytearray(HSAKMT.read_bytes())
    need = next(s for s in elf_sections(buf) if s.type == SHT_GNU_VERNEED)
    past = bytearray(buf)
    struct.pack_into("<I", past, need.offset + 12, need.size)  # vn_next: past the section
    with pytest.raises(BundleFormatError, match="Verneed entry outside the section"):
        version_needs(bytes(past))
    aux = bytearray(buf)
    struct.pack_into("<I", aux, need.offset + 8, 1 << 30)  # vn_aux far away
    with pytest.raises(BundleFormatError, match="Vernaux entry outside"):
        version_needs(bytes(aux))


def test_not_elf_or_no_versions() -> None:
    assert version_needs(b"not an elf file at all") == []
    assert glibc_needed(b"") is None


@pytest.mark.parametrize(("tag", "glibc"), [
    ("manylinux_2_28_x86_64", (2, 28)), ("manylinux2014_x86_64", (2, 17)),
    ("manylinux2010_x86_64", (2, 12)), ("manylinux1_x86_64", (2, 5)),
    ("linux_x86_64", None), ("musllinux_1_2_x86_64", None), ("any", None),
])
def test_manylinux_glibc(tag: str, glibc: tuple[int, int] | None) -> None:
    assert manylinux_glibc(tag) == glibc


@pytest.mark.parametrize(("platforms", "need", "want"), [
    # auditwheel's compressed set for an old glibc: both promise too little
    ("manylinux_2_17_x86_64.manylinux2014_x86_64", (2, 38), "manylinux_2_38_x86_64"),
    ("manylinux_2_28_x86_64", (2, 34), "manylinux_2_34_x86_64"),
    ("manylinux_2_28_x86_64", (2, 28), "manylinux_2_28_x86_64"),  # enough: kept
    ("manylinux_2_28_x86_64", (2, 17), "manylinux_2_28_x86_64"),  # never lowered
    ("manylinux_2_17_x86_64.manylinux_2_38_x86_64", (2, 34), "manylinux_2_38_x86_64"),
    ("manylinux2014_aarch64", (2, 38), "manylinux_2_38_aarch64"),
    ("linux_x86_64", (2, 38), "linux_x86_64"),  # promises nothing
])
def test_raise_glibc(platforms: str, need: tuple[int, int], want: str) -> None:
    assert raise_glibc(platforms, need) == want
    assert re.fullmatch(r"[a-z0-9_.]+", want)
