"""Learned memory: each compile unit's measured peak RSS, kept per recipe + variant + arch set +
compiler, so the next plan sizes MAX_JOBS by what the units really took.

A build records its units with launchers/memlog.py (one JSON line per command: output, whether
it is a compile unit, peak RSS, seconds, exit status; CMake-driven builds through the compiler
launchers, the pip-wheel backend through its CC/CXX and HIP_CLANG_PATH wrappers); ``record``
merges the compile units into
``<cache>/learned/<recipe>/<identity>.json`` (each output's largest peak over the builds, so a
compile-cache hit, which takes little memory, never lowers a unit's figure), written atomically.
``load`` reads those files back as untrusted input: a file that is not what ``record`` writes is
skipped with a warning. ``pick`` finds the one that matches a plan's recipe, variant, archs and
compiler; ``render`` plans with its p95 plus ``MARGIN``. MAX_JOBS is not part of the cache key,
so learning never changes a wheel's key.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import fsutil, log, untrusted

SCHEMA = "rocmbuild-learned/1"
MARGIN = 0.15
"""Planned memory per job = measured p95 x (1 + MARGIN)."""
MIN_UNITS = 3
"""Fewer measured units than this teach nothing (a configure probe, one link)."""
MAX_FILE = 64 << 20  # bytes: a learned file or a units log larger than this is not read
MAX_RSS = 1 << 44  # bytes (16 TiB): a compile unit's peak RSS above this is not a measurement
GiB = 1024**3
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class LearnedMemory:
    """What the units of earlier builds of one recipe + variant + archs + compiler took."""

    recipe: str
    variant: str
    archs: tuple[str, ...]
    compiler: str
    """The HIP compiler's version ("" for builds without one)."""
    count: int
    """Units measured (distinct outputs)."""
    p50: int
    p95: int
    max: int
    """Peak RSS in bytes."""
    path: str = ""
    """The file it was read from (for messages)."""

    def per_job_gb(self) -> float:
        return self.p95 * (1 + MARGIN) / GiB

    def why(self) -> str:
        """For MAX_JOBS' reason: ``9.1 GiB p95 measured over 412 units + 15 %``."""
        return (f"{self.p95 / GiB:.3g} GiB p95 measured over {self.count} units "
                f"+ {MARGIN * 100:.0f} %")


def identity(recipe: str, variant: str, archs: Sequence[str], compiler: str) -> str:
    """The file name's hash: what decides how much memory a unit takes."""
    text = json.dumps([recipe, variant, list(archs), compiler])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_for(cache: Path, recipe: str, variant: str, archs: Sequence[str],
             compiler: str) -> Path | None:
    """``<cache>/learned/<recipe>/<identity>.json``; None for a recipe name that is not a plain
    file name (it must not lead outside the cache)."""
    if not _NAME.fullmatch(recipe):
        return None
    return cache / "learned" / recipe / f"{identity(recipe, variant, archs, compiler)}.json"


def percentile(values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of ``values`` (not empty), ``q`` in (0, 1]."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def read_units(path: Path, root: Path | None = None) -> dict[str, int]:
    """output -> peak RSS (bytes) of the compile units that compiled (exit 0) in a memlog file.
    Links (the pip-wheel backend's wrappers see them too) and CMake's configure checks are not
    units; a line that is not a memlog record is skipped (the file is written by the build's
    children). An absolute output under ``root`` (torch's cpp_extension names its objects by
    absolute path, in a tree whose path has the cache key in it) is named relative to it, so
    the same unit is one unit over every build of the recipe."""
    units: dict[str, int] = {}
    try:
        text = fsutil.read_capped(path, MAX_FILE)
    except (OSError, fsutil.TooLarge):
        return units
    for line in text.splitlines():
        try:
            rec = untrusted.loads(line)
        except untrusted.BadJson:
            continue
        if not isinstance(rec, dict):
            continue
        out, rss, rc = rec.get("out"), rec.get("rss"), rec.get("rc")
        if (isinstance(out, str) and out and "cmTC_" not in out  # cmake's configure checks
                and rec.get("unit") is True and type(rss) is int and 0 < rss <= MAX_RSS
                and rc == 0):
            if root is not None and os.path.isabs(out):
                rel = os.path.relpath(out, root)
                out = out if rel.startswith("..") else rel
            units[out] = max(units.get(out, 0), rss)
    return units


def _parse(data: object, path: Path) -> tuple[LearnedMemory, dict[str, int]]:
    """A learned file's content, checked; ValueError names what is wrong."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"schema: not {SCHEMA}")
    recipe, variant, compiler = data.get("recipe"), data.get("variant"), data.get("compiler")
    archs, units = data.get("archs"), data.get("units")
    for key, value in (("recipe", recipe), ("variant", variant), ("compiler", compiler)):
        if not isinstance(value, str):
            raise ValueError(f"{key}: not a string")
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError("archs: not a list of strings")
    if not isinstance(units, dict) or not all(
            isinstance(k, str) and type(v) is int and 0 < v <= MAX_RSS for k, v in units.items()):
        raise ValueError("units: not an object of output -> bytes")
    assert isinstance(recipe, str) and isinstance(variant, str) and isinstance(compiler, str)
    if not units:
        raise ValueError("units: empty")
    rss = list(units.values())
    return (LearnedMemory(recipe, variant, tuple(archs), compiler, len(rss),
                          percentile(rss, 0.5), percentile(rss, 0.95), max(rss), str(path)),
            units)


def load(cache: Path, recipe: str) -> tuple[LearnedMemory, ...]:
    """Every learned file of ``recipe`` in the cache (none: ``()``); a broken one is skipped
    with one warning naming it."""
    found: list[LearnedMemory] = []
    if not _NAME.fullmatch(recipe):
        return ()
    d = cache / "learned" / recipe
    try:
        files = sorted(d.glob("*.json"))
    except OSError:
        return ()
    for f in files:
        try:
            found.append(_parse(untrusted.read_json(f, MAX_FILE), f)[0])
        except (OSError, ValueError) as exc:  # untrusted.BadJson is a ValueError
            log.warn(f"{f}: ignored ({exc}); MAX_JOBS is planned from the recipe's "
                     "mem_per_job_gb; delete the file to learn again")
    return tuple(found)


def pick(learned: Iterable[LearnedMemory], recipe: str, variant: str, archs: Sequence[str],
         compiler: str) -> LearnedMemory | None:
    """The learned figure for exactly this recipe, variant, arch set and compiler, with at least
    MIN_UNITS units."""
    for m in learned:
        if ((m.recipe, m.variant, m.archs, m.compiler) == (recipe, variant, tuple(archs), compiler)
                and m.count >= MIN_UNITS):
            return m
    return None


def record(cache: Path, units_log: Path, recipe: str, variant: str, archs: Sequence[str],
           compiler: str, root: Path | None = None) -> LearnedMemory | None:
    """Merge a build's memlog file into its learned file (atomically); the merged figures, or
    None when the build measured nothing. ``root``: the build's tree (``read_units``)."""
    new = read_units(units_log, root)
    target = file_for(cache, recipe, variant, archs, compiler)
    if not new or target is None:
        return None
    units: dict[str, int] = {}
    try:
        units = _parse(untrusted.read_json(target, MAX_FILE), target)[1]
    except (OSError, ValueError):
        units = {}  # a broken file is replaced by this build's figures
    for out, rss in new.items():
        units[out] = max(units.get(out, 0), rss)
    data = {"schema": SCHEMA, "recipe": recipe, "variant": variant, "archs": list(archs),
            "compiler": compiler, "units": dict(sorted(units.items()))}
    target.parent.mkdir(parents=True, exist_ok=True)
    with fsutil.atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return _parse(data, target)[0]
