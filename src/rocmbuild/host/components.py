"""ROCm components a build needs, found by file checks under the ROCm root (no compiles).

Each component is looked for the way its consumer's CMake finds it: the package config file
``<root>/lib/cmake/<name>/<name>-config.cmake`` (or ``<Name>Config.cmake``; also under
``lib/<multiarch>/cmake`` and ``share/cmake``, as Debian's packaging has them), or else its shared
library ``<root>/lib/lib<name>.so*`` (header-only libraries have no library). ``find(root)`` checks
every component in ``COMPONENTS`` in a few milliseconds; the result travels in ``Host`` (and in
``doctor --json``), so a plan for another node is judged from what that node has.

The table of components (names, files, packages) is ``core.components``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from rocmbuild.core.components import COMPONENTS, Component

LIB_DIRS = ("lib", "lib64")
"""Where a ROCm root keeps CMake configs and libraries (``lib64``: some RPM layouts; a
distribution's ``/usr`` also has ``lib/<multiarch>``, e.g. ``lib/x86_64-linux-gnu``)."""


def _lib_dirs(root: Path) -> list[str]:
    return [*LIB_DIRS, *sorted(str(p.relative_to(root)) for p in root.glob("lib/*-linux-gnu"))]


def _config_in(d: Path, name: str) -> str | None:
    """``<name>-config.cmake`` or ``<Name>Config.cmake`` (any case) in ``d``."""
    try:
        entries = os.listdir(d)
    except OSError:
        return None
    wanted = {f"{name}-config.cmake".lower(), f"{name}config.cmake".lower()}
    return next((e for e in sorted(entries) if e.lower() in wanted), None)


def _config_evidence(root: Path, comp: Component, dirs: list[str]) -> str | None:
    # share/cmake: where CMake also looks (<prefix>/share/cmake/<name>*/), and where Debian's
    # packaging of ROCm puts the header-only libraries' configs (rocprim, hipcub)
    for lib in (*dirs, "share"):
        for n in comp.cmake:
            found = _config_in(root / lib / "cmake" / n, n)
            if found:
                return f"{lib}/cmake/{n}/{found}"
    return None


def _library_index(root: Path, dirs: list[str]) -> dict[str, str]:
    """``"lib/librccl"`` -> ``"lib/librccl.so.1"``: the shared libraries in the root's LIB_DIRS,
    listed once (a ROCm lib/ holds thousands of files)."""
    index: dict[str, str] = {}
    for lib in dirs:
        try:
            names = sorted(os.listdir(root / lib))  # names only: no Path per file
        except OSError:
            continue
        for name in names:
            stem, so, rest = name.partition(".so")
            if so and (not rest or rest.startswith(".")):
                index.setdefault(f"{lib}/{stem}", f"{lib}/{name}")
    return index


def evidence(root: Path, comp: Component) -> str | None:
    """The first file under ``root`` that shows ``comp`` is installed, relative to ``root``: its
    CMake config, else its library."""
    return _Finder(root).evidence(comp)


class _Finder:
    """One ROCm root's lib dirs and library index, each read once (a lib/ holds thousands)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs = _lib_dirs(root)
        self._index: dict[str, str] | None = None

    def evidence(self, comp: Component) -> str | None:
        found = _config_evidence(self.root, comp, self.dirs)
        if found or not comp.libs:
            return found
        if self._index is None:
            self._index = _library_index(self.root, self.dirs)
        index = self._index
        return next((index[f"{lib}/lib{n}"] for lib in self.dirs for n in comp.libs
                     if f"{lib}/lib{n}" in index), None)


def locate(root: Path, names: Iterable[str]) -> dict[str, str | None]:
    """Component name -> the file that shows it is installed (None: not installed)."""
    finder = _Finder(root)
    return {n: finder.evidence(COMPONENTS[n]) for n in names}


def find(root: Path) -> tuple[str, ...]:
    """Every component of COMPONENTS installed under ``root``, in table order. Only stats and
    at most one listing of each lib dir: milliseconds."""
    finder = _Finder(root)
    return tuple(name for name, c in COMPONENTS.items() if finder.evidence(c) is not None)
