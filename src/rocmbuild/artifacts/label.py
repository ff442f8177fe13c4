"""The local version label of a built wheel (PEP 440: lower-case letters, digits and dots).

``rocm6.2.gfx90a.gfx942``: the ROCm version the wheel was built for, then the plain gfx names of
its targets (target features such as ``:xnack-`` cannot appear in a label; provenance and the
audit keep them). A recipe with ``target.label_torch`` puts the torch the build compiled against
between the two, as ``torch<major>.<minor>.cxx11abi<true|false>``:
``rocm6.2.torch2.9.cxx11abitrue.gfx942``. Upstream flash-attn spells it
``+rocm64torch2.9cxx11abiTRUE``; ours keeps the dots of the version numbers and is already in the
lower-case form pip normalises a label to, so the wheel's file name is the one an index lists.
A wheel without device code (build.rocm_runtime = "none") has neither the ROCm nor the gfx part:
``torch2.13.cxx11abitrue``, or no label at all.

Two marks follow the torch part on a wheel that must never reach a user: ``buildonly`` (compiled
against a build-only ROCm torch: scripts/install-build-only-torch.sh) and ``partial`` (an
option value that builds only part of the project, ``[options.<name>] partial``):
``rocm7.2.torch2.13.cxx11abitrue.buildonly.partial.gfx942``. Publishing refuses both
(``UNPUBLISHABLE_MARKS``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocmbuild.core import gfx as arch
from rocmbuild.core.pep508 import major_minor


def torch_part(version: str, cxx11_abi: bool) -> str:
    """``2.9.1+rocm6.4``, True -> ``torch2.9.cxx11abitrue``. ValueError for a version without a
    major.minor."""
    mm = major_minor(version)
    if not mm:
        raise ValueError(f"torch version {version!r} has no major.minor")
    return f"torch{mm}.cxx11abi{'true' if cxx11_abi else 'false'}"


BUILD_ONLY = "buildonly"
PARTIAL = "partial"
UNPUBLISHABLE_MARKS = (BUILD_ONLY, PARTIAL)


def local(rocm_version: str, archs: Sequence[str], torch: str = "", *,
          device: bool = True, marks: Sequence[str] = ()) -> str:
    """``rocm<version>[.<torch part>][.<marks>].<gfx>...`` (archs as plain names, repeats
    dropped). ``device=False`` (build.rocm_runtime = "none": no device code, no ROCm needed):
    the torch part and marks alone, or "" (no local label at all)."""
    if not device:
        return ".".join([*([torch] if torch else []), *marks])
    return ".".join([f"rocm{rocm_version}", *([torch] if torch else []), *marks,
                     *arch.names(archs)])


def marks_of(local_label: str) -> list[str]:
    """The unpublishable marks a local label carries (``UNPUBLISHABLE_MARKS``)."""
    parts = local_label.lower().split(".")
    return [m for m in UNPUBLISHABLE_MARKS if m in parts]
