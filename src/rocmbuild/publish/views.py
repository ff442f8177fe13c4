"""Views of a static index: subsets of a stage's wheels with their own PEP 503/691 pages, next to
the all-wheels view (``<stage>/simple/``) and sharing its ``files/``::

    <index>/<stage>/simple/                  every wheel of the stage
    <index>/<stage>/rocm6.2/simple/          the wheels built for ROCm 6.2
    <index>/<stage>/gfx942/simple/           the wheels whose device code runs on gfx942

``pip install --index-url <index>/<stage>/rocm6.2/simple/ torch`` then cannot pick a wheel made
for another ROCm, and ``--extra-index-url <index>/<stage>/gfx90a/simple/`` cannot pick a wheel
with no code for an MI200. A view is a name and a rule that gives each wheel the views it
belongs to (``VIEWS``); to add one, add a rule. A view name is a single path segment that is
neither ``files`` nor ``simple``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from email.parser import HeaderParser
from email.policy import compat32
from pathlib import Path

from rocmbuild.artifacts import audit
from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.core.gfx import KNOWN_ARCHS

_REQUIRES_ROCM = re.compile(r"^rocm\s*\(\s*>=\s*(\d+)\.(\d+)")
_VERSION = re.compile(r"^(\d+)\.(\d+)")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def rocm_views(w: WheelInfo) -> tuple[str, ...]:
    """``rocmX.Y``: the ROCm release the wheel was built for. A host-bound wheel's
    ``Requires-External: rocm (>=X.Y,...)`` (METADATA) decides; else the ``rocm_version`` that
    rocmbuild recorded in ``rocmbuild.json`` (a bundled wheel carries its ROCm, and is listed
    under the release it bundles). Wheels with neither are in the all-wheels view only."""
    headers = HeaderParser(policy=compat32).parsestr(w.metadata.decode("utf-8", "replace"))
    for line in headers.get_all("Requires-External") or []:
        m = _REQUIRES_ROCM.match(line.strip())
        if m:
            return (f"rocm{int(m[1])}.{int(m[2])}",)
    version = (w.provenance or {}).get("rocm_version")
    m = _VERSION.match(version) if isinstance(version, str) else None
    return (f"rocm{int(m[1])}.{int(m[2])}",) if m else ()


def arch_views(w: WheelInfo) -> tuple[str, ...]:
    """``gfxNNN``: the GPU archs the wheel's device code runs on, as rocmbuild's own code-object
    audit (audit.py) finds them in the wheel's bytes at publish time. The ``archs`` in
    ``rocmbuild.json`` and the local label are what the build *asked for*; they are claims a
    wheel can carry without the code, so they decide nothing here.

    - Every ELF member with device code must cover the arch (a wheel runs on gfx942 only when
      each of its GPU libraries does); a generic target (gfx9-4-generic) counts for each
      processor it covers. Target features (``:xnack+``) are not split into views.
    - A wheel with no device code at all (pure Python, e.g. the Triton flash-attn, which
      compiles its kernels on the host at run time) runs on every arch: when rocmbuild built it
      (``rocmbuild.json`` present) it is in the view of every known arch (arch.KNOWN_ARCHS) and
      of every arch its build targeted. Other wheels without device code are not ROCm wheels and
      stay in the all-wheels view only.
    - A wheel the audit cannot read, or with HIP host code but no device code, is in no arch
      view (publish's own checks decide whether it is published at all).
    """
    found = _audited_archs(str(w.path), w.sha256)
    if found is None:
        return ()
    if found:
        return found
    if w.provenance is None:
        return ()
    return tuple(sorted({*KNOWN_ARCHS, *_claimed(w)}, key=_arch_key))


def fallback_views(w: WheelInfo) -> frozenset[str]:
    """The arch views a wheel is in only because it runs everywhere: for a rocmbuild wheel
    without device code, every arch its build did not target. There it is listed only while
    no build of the same release was made for that arch (``pages.preferred``): a gfx90a host
    gets the gfx90a-labelled build of a pure-Python release, not the gfx942 one whose local
    label sorts higher; an arch no build targeted gets them all, as before."""
    if _audited_archs(str(w.path), w.sha256) != () or w.provenance is None:
        return frozenset()
    return frozenset(arch_views(w)) - set(_claimed(w))


def _claimed(w: WheelInfo) -> list[str]:
    """The base archs rocmbuild.json says the build targeted: only real gfx targets
    (``KNOWN_ARCHS``, which ``--arch`` is checked against), so a claim such as "notanarch" or
    "rocm9.9" never makes a view of its name."""
    claimed = (w.provenance or {}).get("archs")
    bases = [a.split(":", 1)[0] for a in claimed if isinstance(a, str)] \
        if isinstance(claimed, list) else []
    return [b for b in bases if b in KNOWN_ARCHS]


def _arch_key(name: str) -> tuple[int, str]:
    return (len(name), name)


@functools.lru_cache(maxsize=256)
def _audited_archs(path: str, sha256: str) -> tuple[str, ...] | None:
    """The base archs every device-code object of the wheel at ``path`` covers; () when it has
    no device code; None when it cannot be trusted. ``sha256`` keys the cache to the bytes."""
    del sha256
    try:
        report = audit.audit_wheel(Path(path), [])
    except RocmbuildError:
        return None
    sets: list[set[str]] = []
    for so in report.objects:
        if so.hip_host and not so.archs:
            return None
        if so.archs:
            covered: set[str] = set()
            for target in so.archs:
                base = target.split(":", 1)[0]
                covered |= set(audit.GENERIC_TARGETS.get(base, {base}))
            sets.append(covered)
    if not sets:
        return ()
    return tuple(sorted(set.intersection(*sets), key=_arch_key))


VIEWS: tuple[Callable[[WheelInfo], tuple[str, ...]], ...] = (rocm_views, arch_views)
"""The rules: each gives the views a wheel belongs to."""


def views_of(w: WheelInfo) -> tuple[str, ...]:
    """Every view ``w`` belongs to, in rule order, each a valid view name."""
    out = [v for rule in VIEWS for v in rule(w)]
    return tuple(dict.fromkeys(v for v in out if is_view_name(v)))


def is_view_name(name: str) -> bool:
    return bool(_NAME.match(name)) and name not in {"files", "simple"}
