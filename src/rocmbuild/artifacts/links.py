"""Links that would load: every undefined symbol of a shared library resolves against a library
it needs (its NEEDED entries, followed transitively through the search directories) or the
Python interpreter that will import it (extensions do not NEED libpython: the interpreter
exports the C API). A shared library links with undefined symbols, so "it linked" says nothing
until this check has run; on a build-only ROCm torch (scripts/install-build-only-torch.sh) its
libc10_hip/libtorch_hip stubs export exactly what torch's hipified headers declare, so a symbol
that resolves nowhere is a real fault of the build (a header it needs, an API the ROCm torch does
not have, a library it forgot to link).

Weak undefined symbols may stay unresolved (the loader allows it). Symbol versions are not
compared (the glibc floor is the repair and bundle stages' business). ELF files are read with
pyelftools (auditwheel's own reader), each once.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
               "/lib", "/usr/lib")


@dataclass(frozen=True)
class ElfSymbols:
    """What one ELF file gives and takes: NEEDED, RUNPATH/RPATH, defined and undefined dynamic
    symbols (undefined strong ones only: a weak reference may stay unresolved)."""

    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    defined: frozenset[str]
    undefined: tuple[str, ...]


def read_symbols(path: Path) -> ElfSymbols:
    """The dynamic facts of ``path``; ValueError for a file that is not a readable ELF. A file
    read before with the same size and mtime is not read again (libtorch_cpu.so is needed by
    every object of a torch extension's wheel)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"{path}: not a readable ELF file ({exc})") from exc
    return _read_symbols(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _read_symbols(path: str, size: int, mtime_ns: int) -> ElfSymbols:
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            needed: list[str] = []
            runpath: list[str] = []
            for sec in elf.iter_sections():
                if isinstance(sec, DynamicSection):
                    for tag in sec.iter_tags():
                        if tag.entry.d_tag == "DT_NEEDED":
                            needed.append(str(getattr(tag, "needed", "")))
                        elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                            value = getattr(tag, "runpath", None) or getattr(tag, "rpath", "")
                            runpath += [p for p in str(value).split(":") if p]
            defined: set[str] = set()
            undefined: list[str] = []
            dynsym = elf.get_section_by_name(".dynsym")
            syms = dynsym.iter_symbols() if isinstance(dynsym, SymbolTableSection) else ()
            for sym in syms:
                bind = sym["st_info"]["bind"]
                if not sym.name or bind not in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE"):
                    continue
                if sym["st_shndx"] == "SHN_UNDEF":
                    if bind == "STB_GLOBAL":
                        undefined.append(sym.name)
                else:
                    defined.add(sym.name)
    except (OSError, ELFError, KeyError) as exc:
        raise ValueError(f"{path}: not a readable ELF file ({exc})") from exc
    return ElfSymbols(tuple(needed), tuple(runpath), frozenset(defined),
                      tuple(sorted(set(undefined))))


@dataclass(frozen=True)
class LinkReport:
    """One library's check: its unresolved symbols (with the libraries searched) and the
    NEEDED entries no search directory has."""

    name: str
    unresolved: tuple[str, ...]
    missing_libs: tuple[str, ...]
    searched: tuple[str, ...]
    """The libraries whose symbols were searched (file names, in order)."""
    checked: int = 0
    """How many undefined (strong) symbols it has."""

    @property
    def ok(self) -> bool:
        return not self.unresolved and not self.missing_libs

    def problem(self) -> str:
        """One line: the first unresolved symbol and the libraries it was looked for in."""
        if self.missing_libs:
            return (f"{self.name}: needs {', '.join(self.missing_libs)}, found in no search "
                    "directory")
        more = f" (+{len(self.unresolved) - 1} more)" if len(self.unresolved) > 1 else ""
        return (f"{self.name}: undefined symbol {self.unresolved[0]}{more} resolves against "
                f"none of {', '.join(self.searched)} nor the Python interpreter")


def _expand(entry: str, origin: Path) -> str:
    return entry.replace("$ORIGIN", str(origin)).replace("${ORIGIN}", str(origin))


def check(path: Path, search_dirs: Sequence[Path], interpreter: Iterable[Path] = (),
          name: str = "") -> LinkReport:
    """Resolve ``path``'s undefined symbols through its NEEDED closure (found in its RUNPATH,
    then ``search_dirs``, then SYSTEM_DIRS) and the ``interpreter`` files' exports."""
    top = read_symbols(path)
    seen: dict[str, ElfSymbols] = {}
    missing: list[str] = []
    order: list[str] = []
    queue: list[tuple[str, ElfSymbols, Path]] = [(n, top, path.parent) for n in top.needed]
    while queue:
        lib, owner, origin = queue.pop(0)
        if lib in seen or lib in missing:
            continue
        dirs = [Path(_expand(r, origin)) for r in owner.runpath] + list(search_dirs) + [
            Path(d) for d in SYSTEM_DIRS]
        found = next((d / lib for d in dirs if (d / lib).is_file()), None)
        if found is None:
            missing.append(lib)
            continue
        facts = read_symbols(Path(os.path.realpath(found)))
        seen[lib] = facts
        order.append(lib)
        queue += [(n, facts, found.parent) for n in facts.needed]
    provided: set[str] = set()
    for facts in seen.values():
        provided |= facts.defined
    for exe in interpreter:
        provided |= read_symbols(exe).defined
    unresolved = tuple(s for s in top.undefined if s not in provided)
    return LinkReport(name or path.name, unresolved, tuple(missing), tuple(order),
                      len(top.undefined))


def interpreter_files(python: str) -> list[Path]:
    """The files whose exports an extension loaded by ``python`` sees: the interpreter binary
    and, for a shared-libpython build, that library."""
    import sysconfig

    exe = Path(os.path.realpath(python))
    out = [exe]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        lib = Path(str(sysconfig.get_config_var("LIBDIR"))) / str(
            sysconfig.get_config_var("LDLIBRARY"))
        if lib.is_file():
            out.append(lib)
    return out
