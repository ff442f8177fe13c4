"""Code-object audit: which gfx targets does each ELF shared object in a wheel carry, and are
they the ones asked for?

``artifacts.elf`` reads the ELF sections and offload bundles; this module judges them: every
object with HIP host code must carry device code for each requested arch (a generic target such
as ``gfx9-4-generic`` covers its processors); a ``libamdhip64.so.N`` it links that is not the
major of the wheel's ``+rocmX.Y`` label is a warning. The file is mmapped (a large wheel member
goes through a temp file first): a 1 GB .so audits in milliseconds.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import struct
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.elf import (
    BUNDLE_MAGIC,
    CCOB_MAGIC,
    ELF_MAGIC,
    Bundle,
    BundleFormatError,
    elf_kind,
    needed_libraries,
    scan,
)
from rocmbuild.artifacts.wheel import SHARED_LIB, WheelFormatError, parse_wheel_name
from rocmbuild.core.errors import AuditError, UsageError

_EXTRACT_ABOVE = 32 * 1024 * 1024  # larger wheel members go through a temp file + mmap


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


@dataclass
class SharedObjectAudit:
    name: str  # wheel member name, or the file path
    archs: list[str]  # sorted device target IDs found (features kept)
    bundles: list[Bundle]
    hip_host: bool  # has HIP host registration code (.hipFatBinSegment/.hip_fatbin/__hip_fatbin)
    links_hip_runtime: bool  # DT_NEEDED / dynstr names libamdhip64
    problems: list[str] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)  # DT_NEEDED entries of .dynamic
    kind: str = "shared object"  # elf.elf_kind: relocatable object, executable, ...

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
            "needed": self.needed, "kind": self.kind,
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


_HIP_SONAME = re.compile(r"^libamdhip64\.so\.(\d+)")
_LABEL_ROCM = re.compile(r"\+(?:[^-]*\.)?rocm(\d+)((?:\.\d+)*)")


def hip_label_warnings(wheel_name: str, objects: Sequence[SharedObjectAudit]) -> list[str]:
    """A shared object linking ``libamdhip64.so.N`` whose N is not the major of the wheel's
    ``+rocmX.Y`` label: the label does not say what the wheel was linked against."""
    try:
        m = _LABEL_ROCM.search(parse_wheel_name(wheel_name).raw_version)
    except WheelFormatError:  # a .so or a HIP object audited on its own: no label
        return []
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




def kind_problem(name: str, kind: str, in_wheel: bool) -> str | None:
    """Why an ELF file of ``kind`` (``elf.elf_kind``) cannot stand where it was found (None: it
    can): a file named as a shared object (``.so``, ``.so.N``) must be one, and nothing loads a
    relocatable object or a core dump from an installed wheel. Executables may ship in a wheel
    and a ``.o`` or raw bundle given to ``audit`` by itself is audited as it is."""
    if kind in ("shared object", "offload bundle"):
        return None
    if SHARED_LIB.search(name) or (in_wheel and kind != "executable"):
        return (f"{name} is a{'n' if kind[0] in 'aeiouE' else ''} {kind}, not a shared object: "
                "nothing can load it" + (" from an installed wheel" if in_wheel else ""))
    return None


def audit_buffer(name: str, buf: Any, archs: Sequence[str], label: str) -> SharedObjectAudit:
    """The audit of one ELF file or raw bundle (``label``: the wheel it is a member of, or
    ``""`` for a file given by itself)."""
    try:
        bundles, hip_host, links_hip = scan(buf)
        kind = elf_kind(buf)
    except BundleFormatError as exc:
        raise AuditError(f"{label + ': ' if label else ''}{name}: {exc}",
                         hint="is it a complete file? rebuild it, or report a bug with the file "
                         "if clang-offload-bundler reads it") from exc
    try:
        needed = needed_libraries(buf)
    except (BundleFormatError, struct.error):
        needed = []
    found = sorted({t for b in bundles for t in b.targets})
    so = SharedObjectAudit(name, found, bundles, hip_host, links_hip, needed=needed, kind=kind)
    has_device = bool(found)
    who = f"{label}: {name}" if label else name
    misplaced = kind_problem(who, kind, bool(label))
    if misplaced:
        so.problems.append(misplaced)
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


NO_DEVICE = 'but build.rocm_runtime = "none" says it carries none'
"""The end of a problem of a wheel that should carry no device code (``no_device_problem``)."""


def no_device_problem(label: str, so: SharedObjectAudit) -> str | None:
    """Why an object cannot be in a wheel without device code (build.rocm_runtime = "none"):
    it has device code, HIP host code or links the HIP runtime (None: it has none)."""
    what = (f"device code for {', '.join(so.archs)}" if so.archs
            else "HIP host code" if so.hip_host
            else "a link to the HIP runtime" if so.links_hip_runtime else "")
    return f"{label}: {so.name} has {what}, {NO_DEVICE}" if what else None


def audit_wheel(path: Path, archs: Sequence[str], device: bool = True) -> WheelAudit:
    """Audit every ELF member of a wheel (or any zip). ``device=False`` (rocm_runtime =
    "none"): no member may carry device code, HIP host code or a HIP runtime link."""
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
    if not device:
        for o in objects:
            problem = no_device_problem(path.name, o)
            if problem:
                o.problems.append(problem)
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
    misplaced = ", not a shared object: " in audit.problems[0]  # kind_problem's
    raise AuditError(
        audit.problems[0] + (f" (+{more} more)" if more else ""),
        hint="link it as a shared object (-shared -fPIC), or leave it out of the wheel"
        if misplaced else "the build compiled GPU code: give the variant rocm_runtime = "
        "\"host\" (or \"bundle\"), or keep its HIP sources out of the build"
        if audit.problems[0].endswith(NO_DEVICE)
        else "rebuild for the missing arch (--arch); check that the arch list reached the "
        "compiler (CMAKE_HIP_ARCHITECTURES, PYTORCH_ROCM_ARCH, GPU_TARGETS, --offload-arch)",
        detail="\n".join(audit.problems) if more else None,
    )


def require_all(audits: Sequence[WheelAudit], archs: Sequence[str]) -> None:
    """Raise AuditError listing every problem of every audit (none: return)."""
    problems = [p for a in audits for p in a.problems]
    if problems:
        require(WheelAudit(", ".join(a.path for a in audits), list(archs), [], problems))
