"""The ROCm components a recipe may require (``build.rocm_components``): each one's CMake package
and library names, what it is, and AMD's package names to install it with (``-dev`` on
Debian/Ubuntu, ``-devel`` on RHEL/SLES, as ``amdgpu-install`` and the ROCm docs' native install
use them; the meta package ``rocm-hip-sdk`` or ``rocm-dev`` pulls in all of them). A table of
facts: the recipe checker, the planner and host detection (``host.components``, which looks for
them under a ROCm root) all read it here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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


def install_hint(names: Iterable[str]) -> str:
    """The install commands for these components (apt and dnf), each package once."""
    comps = [COMPONENTS[n] for n in names if n in COMPONENTS]
    apt = " ".join(dict.fromkeys(c.apt for c in comps))
    dnf = " ".join(dict.fromkeys(c.dnf for c in comps))
    return (f"sudo apt install {apt} (RHEL/SLES: sudo dnf install {dnf}) from AMD's ROCm "
            "repository, or the rocm-hip-sdk meta package")
