"""Wheels built and published to staging but not validated: the host that built them cannot
(the validate step said so with a ToolchainError, exit 10: no GPU where the recipe's validation
needs one, a runtime module the host lacks). One record per cell, ``<workdir>/pending/<cell>.json``,
written atomically by the cell's task and read back (untrusted) by ``nightly --validate-pending``,
which validates the wheel where it can, promotes it when green and removes the record.

A pending wheel is never promoted: only ``--validate-pending`` (or a later run that validates it)
does. A newer run's record for the same cell replaces the older one (its wheel supersedes).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, untrusted
from rocmbuild.nightly.model import CELL_ID, RUN_ID

DIR = "pending"
MAX_BYTES = 64 << 10
HOW = "rocmbuild nightly --config {config} --validate-pending"
"""How a pending wheel gets validated (the report says it)."""
NOT_VALIDATED = ", NOT VALIDATED"
"""Where a pending cell's reason says so: what follows is replaced once it is validated."""


def built_part(reason: str) -> str:
    """A cell's reason without what its pending state added (``NOT_VALIDATED`` on)."""
    return reason.split(NOT_VALIDATED)[0]


@dataclass(frozen=True)
class PendingWheel:
    run_id: str
    """The run that built it (its manifest has the cell and its pin)."""
    cell_id: str
    cache_key: str
    wheel: str
    project: str
    version: str
    reason: str
    """Why this host could not validate it (the validate step's one line)."""
    since: float
    sha256: str = ""
    """The staged wheel's sha256 ("": a record written before it was kept)."""

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "run": self.run_id, "cell": self.cell_id,
                "cache_key": self.cache_key, "wheel": self.wheel, "project": self.project,
                "wheel_version": self.version, "sha256": self.sha256, "reason": self.reason,
                "since": round(self.since, 3)}

    def mismatch(self, wheel: str, project: str, version: str, sha256: str) -> str | None:
        """How the cached wheel of ``cache_key`` (its file name, normalized project, version
        and sha256) differs from what this record claims (None: it is the record's wheel): a
        record edited to name another cell's key must never get that wheel validated or
        promoted in its name."""
        if wheel != self.wheel:
            return f"the cache key holds {wheel}, not the record's {self.wheel}"
        if (project, version) != (self.project, self.version):
            return (f"the cached {wheel} is {project} {version}, not the record's "
                    f"{self.project[:60]} {self.version[:60]}")
        if self.sha256 and sha256 != self.sha256:
            return f"the cached {wheel} has sha256 {sha256[:16]}..., not the record's"
        return None


def path_of(root: Path, cell_id: str) -> Path:
    return root / DIR / f"{cell_id}.json"


def write(root: Path, rec: PendingWheel) -> Path:
    p = path_of(root, rec.cell_id)
    p.parent.mkdir(parents=True, exist_ok=True)
    fsutil.write_atomic(p, json.dumps(rec.to_json(), indent=1) + "\n")
    return p


def remove(root: Path, cell_id: str) -> None:
    path_of(root, cell_id).unlink(missing_ok=True)


def parse(data: object) -> PendingWheel:
    """A PendingWheel from its JSON; BadJson (a ValueError) naming the key otherwise."""
    d = untrusted.obj(data, "the record")
    if untrusted.integer(d.get("version"), "version", 1, 1) != 1:
        raise untrusted.BadJson("version: not 1")
    run = untrusted.text(d.get("run"), "run", 40)
    if not RUN_ID.fullmatch(run):
        raise untrusted.BadJson("run: not a run id")
    cell = untrusted.text(d.get("cell"), "cell", 128)
    if not CELL_ID.fullmatch(cell):
        raise untrusted.BadJson("cell: not a cell id")
    key = untrusted.text(d.get("cache_key"), "cache_key", 64)
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        raise untrusted.BadJson("cache_key: not 64 hex digits")
    wheel = untrusted.text(d.get("wheel"), "wheel", 255)
    if not wheel.endswith(".whl") or "/" in wheel or wheel.startswith("."):
        raise untrusted.BadJson("wheel: not a wheel file name")
    sha = untrusted.text(d.get("sha256", ""), "sha256", 64)
    if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
        raise untrusted.BadJson("sha256: not 64 hex digits")
    return PendingWheel(
        run, cell, key, wheel, untrusted.text(d.get("project"), "project", 200),
        untrusted.text(d.get("wheel_version"), "wheel_version", 200),
        untrusted.text(d.get("reason"), "reason", 1000),
        untrusted.number(d.get("since"), "since", 0, 1e11), sha)


def read(path: Path) -> PendingWheel:
    """One record file, checked: BadJson (or OSError) when it is not one; the file's name must
    be its cell's."""
    rec = parse(untrusted.read_json(path, MAX_BYTES))
    if path.name != f"{rec.cell_id}.json":
        raise untrusted.BadJson(f"cell: {rec.cell_id} is not the file's name")
    return rec


def listed(root: Path, run_id: str = "") -> tuple[list[PendingWheel], list[str]]:
    """Every pending record under ``root`` (of run ``run_id`` only, when given), by cell id,
    and a warning for each file that is not one (left where it is)."""
    d = root / DIR
    if not d.is_dir() or d.is_symlink():
        return [], []
    out: list[PendingWheel] = []
    warnings: list[str] = []
    for p in sorted(d.iterdir()):
        if not p.name.endswith(".json"):
            continue
        try:
            rec = read(p)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            warnings.append(f"{p}: not a pending record: {why}"[:300])
            continue
        if not run_id or rec.run_id == run_id:
            out.append(rec)
    return out, warnings


def record(run_id: str, cell_id: str, cache_key: str, wheel: str, project: str, version: str,
           reason: str, sha256: str = "") -> PendingWheel:
    return PendingWheel(run_id, cell_id, cache_key, wheel, project, version, reason[:1000],
                        time.time(), sha256)
