"""ROCm components a build needs, found by file checks under the ROCm root (no compiles).

Each component is looked for the way its consumer's CMake finds it: the package config file
``<root>/lib/cmake/<name>/<name>-config.cmake`` (or ``<Name>Config.cmake``; also under
``lib/<multiarch>/cmake`` and ``share/cmake``, as Debian's packaging has them), or else its shared
library ``<root>/lib/lib<name>.so*`` (header-only libraries have no library). ``find(root)`` checks
every component in ``COMPONENTS`` in a few milliseconds; the result travels in ``Host`` (and in
``doctor --json``), so a plan for another node is judged from what that node has.

The package names are AMD's (repo.radeon.com, as ``amdgpu-install`` and the ROCm docs' native
install use them): ``-dev`` on Debian/Ubuntu, ``-devel`` on RHEL/SLES. The meta package
``rocm-hip-sdk`` (or ``rocm-dev``) pulls in all of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

LIB_DIRS = ("lib", "lib64")
"""Where a ROCm root keeps CMake configs and libraries (``lib64``: some RPM layouts; a
distribution's ``/usr`` also has ``lib/<multiarch>``, e.g. ``lib/x86_64-linux-gnu``)."""


def _lib_dirs(root: Path) -> list[str]:
    return [*LIB_DIRS, *sorted(str(p.relative_to(root)) for p in root.glob("lib/*-linux-gnu"))]


@dataclass(frozen=True)
class Component:
    """A ROCm component a recipe may require, and how to find it under a ROCm root."""

    name: str
    """The name recipes use in ``build.rocm_components`` (its CMake package name)."""
    what: str
    cmake: tuple[str, ...]
    """CMake package names: ``lib/cmake/<n>/<n>-config.cmake`` or ``<N>Config.cmake``."""
    libs: tuple[str, ...]
    """Library names: ``lib/lib<n>.so*`` (empty for header-only libraries)."""
    apt: str
    dnf: str

    def looked_for(self) -> list[str]:
        """The files that count, relative to the ROCm root (``lib/`` shown; ``lib64/`` too)."""
        return ([f"lib/cmake/{n}/{n}-config.cmake" for n in self.cmake]
                + [f"lib/lib{n}.so*" for n in self.libs])

    def packages(self) -> str:
        """``apt rccl-dev / dnf rccl-devel``."""
        return f"apt {self.apt} / dnf {self.dnf}"


def _c(name: str, what: str, apt: str, dnf: str, *, libs: tuple[str, ...] | None = None,
       cmake: tuple[str, ...] | None = None) -> Component:
    return Component(name, what, (name,) if cmake is None else cmake,
                     (name,) if libs is None else libs, apt, dnf)


COMPONENTS: dict[str, Component] = {c.name: c for c in (
    _c("hip", "HIP runtime and headers", "hip-dev", "hip-devel", libs=("amdhip64",)),
    _c("hiprtc", "HIP runtime compilation", "hip-dev", "hip-devel"),
    _c("hsa-runtime64", "ROCr (HSA runtime)", "hsa-rocr-dev", "hsa-rocr-devel"),
    _c("amd_comgr", "code object manager", "comgr", "comgr"),
    _c("rocrand", "rocRAND", "rocrand-dev", "rocrand-devel"),
    _c("hiprand", "hipRAND", "hiprand-dev", "hiprand-devel"),
    _c("rocblas", "rocBLAS", "rocblas-dev", "rocblas-devel"),
    _c("hipblas", "hipBLAS", "hipblas-dev", "hipblas-devel"),
    _c("hipblaslt", "hipBLASLt", "hipblaslt-dev", "hipblaslt-devel"),
    _c("miopen", "MIOpen", "miopen-hip-dev", "miopen-hip-devel", libs=("MIOpen",)),
    _c("hipfft", "hipFFT", "hipfft-dev", "hipfft-devel"),
    _c("hipsparse", "hipSPARSE", "hipsparse-dev", "hipsparse-devel"),
    _c("rocprim", "rocPRIM (header-only)", "rocprim-dev", "rocprim-devel", libs=()),
    _c("hipcub", "hipCUB (header-only)", "hipcub-dev", "hipcub-devel", libs=()),
    _c("rocthrust", "rocThrust (header-only)", "rocthrust-dev", "rocthrust-devel", libs=()),
    _c("hipsolver", "hipSOLVER", "hipsolver-dev", "hipsolver-devel"),
    _c("rocsolver", "rocSOLVER", "rocsolver-dev", "rocsolver-devel"),
    _c("rccl", "RCCL", "rccl-dev", "rccl-devel"),
    _c("rocm_smi", "ROCm SMI library", "rocm-smi-lib", "rocm-smi-lib", libs=("rocm_smi64",)),
    _c("roctracer", "roctracer / roctx", "roctracer-dev", "roctracer-devel",
       libs=("roctracer64", "roctx64")),
    # PyTorch's LoadHIP.cmake requires it from ROCm 7.14 (find_package(hipfile)); the package
    # names follow AMD's -dev/-devel pattern and were not checked against repo.radeon.com.
    _c("hipfile", "hipFile (GPU direct storage I/O)", "hipfile-dev", "hipfile-devel"),
    # PyTorch 2.15's LoadHIP.cmake requires it from ROCm 7.14 (find_package(amd_smi), l.370 of
    # the 2.15.0 wheel's copy): AMD SMI's library libamd_smi.so and its config
    # lib/cmake/amd_smi/amd_smi-config.cmake; AMD's package is amd-smi-lib (the name was not
    # checked against repo.radeon.com).
    _c("amd_smi", "AMD SMI library", "amd-smi-lib", "amd-smi-lib"),
)}


def required_since(base: tuple[str, ...], since: Iterable[str], rocm: str) -> tuple[str, ...]:
    """``base`` and the components of ``since`` (``hipfile>=7.14``: required from ROCm 7.14 on,
    as the recipe checker has made sure) that a build for ROCm ``rocm`` (``7.2``, ``10.0.1``)
    requires, in their order, each once."""
    def mm(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split(".")[:2] if p.isdigit())

    extra = [n for n, _, v in (s.partition(">=") for s in since) if mm(rocm) >= mm(v)]
    return tuple(dict.fromkeys((*base, *extra)))


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


def install_hint(names: Iterable[str]) -> str:
    """The install commands for these components (apt and dnf), each package once."""
    comps = [COMPONENTS[n] for n in names if n in COMPONENTS]
    apt = " ".join(dict.fromkeys(c.apt for c in comps))
    dnf = " ".join(dict.fromkeys(c.dnf for c in comps))
    return (f"sudo apt install {apt} (RHEL/SLES: sudo dnf install {dnf}) from AMD's ROCm "
            "repository, or the rocm-hip-sdk meta package")
