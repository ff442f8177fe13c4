"""Views of a static index: subsets of a stage's wheels with their own PEP 503/691 pages, next to
the all-wheels view (``<stage>/simple/``) and sharing its ``files/``::

    <index>/<stage>/simple/                  every wheel of the stage
    <index>/<stage>/rocm6.2/simple/          the wheels built for ROCm 6.2

``pip install --index-url <index>/<stage>/rocm6.2/simple/ torch`` then cannot pick a wheel made
for another ROCm. A view is a name and a rule that gives each wheel the views it belongs to
(``VIEWS``); to add one (issue 11: per-arch views), add a rule. A view name is a single path
segment that is neither ``files`` nor ``simple``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from email.parser import HeaderParser
from email.policy import compat32

from rocmbuild.wheel import WheelInfo

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


VIEWS: tuple[Callable[[WheelInfo], tuple[str, ...]], ...] = (rocm_views,)
"""The rules: each gives the views a wheel belongs to."""


def views_of(w: WheelInfo) -> tuple[str, ...]:
    """Every view ``w`` belongs to, in rule order, each a valid view name."""
    out = [v for rule in VIEWS for v in rule(w)]
    return tuple(dict.fromkeys(v for v in out if is_view_name(v)))


def is_view_name(name: str) -> bool:
    return bool(_NAME.match(name)) and name not in {"files", "simple"}
