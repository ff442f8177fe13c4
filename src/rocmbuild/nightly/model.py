"""The typed values the nightly's parts pass between them.

A run lives in ``<reports>/<run_id>/``: ``manifest.json`` (the cells and their resolved pins, so a
night can be rebuilt exactly), ``cells/<cell_id>/`` (``log.txt``, ``result.json``, the build's
``.ninja_log`` when there is one), ``report.json`` and ``summary.md``. ``<reports>/index.html``
and ``<reports>/rocmbuild.prom`` cover the last runs.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import (
    Pin as Pin,  # the nightly's resolved upstream (render needs it)
)
from rocmbuild.artifacts.results import Status
from rocmbuild.sources.drift import DriftReport

CELL_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
"""A cell id: also a directory name under the run, so no ``/`` and no leading dot."""
RUN_ID = re.compile(r"\d{8}T\d{6}Z(?:-\d{1,4})?")
"""A run id: the run's UTC start, ``20261130T161500Z`` (``-2``... for a second run started in
the same second); also the run's directory name under the reports directory."""


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: recipe x variant x source x arch set (x options)."""

    id: str
    """Stable across nights, e.g. ``flash-attn.triton.pypi.gfx942``."""
    recipe: str
    variant: str | None
    source: str
    arch: str
    """Comma-separated gfx targets, as ``--arch`` takes them."""
    follow: bool = False
    """Follow upstream (the git source's ``ref``, PyPI's newest version) instead of the
    recipe's pin."""
    options: tuple[tuple[str, str], ...] = ()
    """Recipe options (``--opt``), sorted by name."""
    timeout_s: int = 6 * 3600
    entry: int = 0
    """The ``[[matrix]]`` table it came from (``matrix[entry]`` in errors); not in its id."""
    group: str = ""
    """The stack this cell is a member of, ``<stack>.<archs>`` (a matrix entry's ``stacks``);
    its cells are promoted only when all of them are green. "" : a cell on its own."""


class Validation(enum.Enum):
    """A cell's validate step, apart from its build (``CellOutcome.validation``); its value is
    the string report.json and result.json carry."""

    NOT_REACHED = ""
    """The build failed, the cell was skipped, or an older report."""
    PASSED = "passed"
    PENDING = "pending"
    """Built and in staging, not validated: this host cannot, ``nightly --validate-pending`` on
    a GPU host will; never promoted before."""
    FAILED = "failed"

    @classmethod
    def parse(cls, text: str) -> Validation:
        """The state a report or a task's result.json names; ValueError (one line) when it
        names none."""
        for v in cls:
            if v.value == text:
                return v
        raise ValueError(f"validation: {text[:40]!r} is not one of "
                         f"{', '.join(v.value for v in cls if v.value)}")


class Held(enum.Enum):
    """Why a green cell's wheel stays in staging, not promoted (``CellOutcome.held``)."""

    NO = ""
    STACK = "stack"
    """A member of its stack group (``Cell.group``) is not green."""

    @classmethod
    def parse(cls, text: str) -> Held:
        """The held state report.json's ``held`` names; ValueError (one line) when it names
        none."""
        for h in cls:
            if h.value == text:
                return h
        raise ValueError(f"held: {text[:40]!r} is not one of "
                         f"{', '.join(h.value for h in cls if h.value)}")


HELD_BY_STACK = "not promoted: stack "
"""How the reason of a member its stack holds says so, for people (then the group and the
members that are not green); report.json also keeps the state in ``held`` and ``held_why``."""


class Decision(enum.Enum):
    BUILD = "build"
    SKIP = "skip"


@dataclass(frozen=True)
class CellPlan:
    """The controller's decision for one cell, printed by ``--dry-run``."""

    cell: Cell
    pin: Pin
    cache_key: str
    decision: Decision
    reasons: tuple[str, ...]
    """Why: ``never built``, ``new upstream commit abc123 (was def456)``, ``new version 2.8.4``,
    ``recipe changed``, ``patch changed: x.patch``, ``toolchain changed``; for SKIP,
    ``validated wheel for key <short> in stage staging``."""


class End(enum.Enum):
    """How a cell's task ended, told apart in the report."""

    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    KILLED = "killed"
    CANCELLED = "cancelled"
    NODE_FAIL = "node_fail"
    OUT_OF_MEMORY = "out_of_memory"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CellOutcome:
    """What one cell did: written by the task as ``result.json`` (the executor fills in what a
    task killed before it could write one leaves out) and read back by the controller."""

    cell_id: str
    status: Status
    """SUCCESS (built, validated or gate SKIPPED, in staging), FAILED, SKIPPED (unchanged)."""
    end: End
    reason: str = ""
    duration_s: float = 0.0
    peak_rss_bytes: int | None = None
    disk_bytes: int | None = None
    """Bytes the cell's build left in the workspace (source tree, logs)."""
    wheel: str | None = None
    """The wheel's file name."""
    wheel_size: int | None = None
    version: str | None = None
    project: str | None = None
    cache_hit_rate: float | None = None
    """The compile cache's hit rate in the build (0..1), when the build used one."""
    tflops: float | None = None
    """The kernel gate's best TFLOP/s, when it ran."""
    exit_code: int | None = None
    log: str = ""
    """The cell's log, relative to the run directory."""
    promoted: bool = False
    validation: Validation = Validation.NOT_REACHED
    """The validate step, apart from the build."""
    held: Held = Held.NO
    """Green, its wheel in staging, and not promoted: why (the promotion decision's HOLD)."""
    held_why: str = ""
    """What the hold added to ``reason`` (``"; "`` and this): "" when not held."""

    @property
    def pending(self) -> bool:
        return self.validation is Validation.PENDING

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell_id, "status": self.status.value, "end": self.end.value,
            "reason": self.reason, "duration_s": round(self.duration_s, 3),
            "peak_rss_bytes": self.peak_rss_bytes, "disk_bytes": self.disk_bytes,
            "wheel": self.wheel, "wheel_size": self.wheel_size, "project": self.project,
            "version": self.version, "cache_hit_rate": self.cache_hit_rate,
            "tflops": self.tflops, "exit_code": self.exit_code, "log": self.log,
            "promoted": self.promoted, "validation": self.validation.value,
            **({"held": self.held.value, "held_why": self.held_why}
               if self.held is not Held.NO else {}),
        }


@dataclass(frozen=True)
class Task:
    """What an executor runs for one cell: the same ``python -m rocmbuild`` command everywhere."""

    cell_id: str
    argv: tuple[str, ...]
    result: Path
    """The ``result.json`` the command writes (a CellOutcome)."""
    log: Path
    cpus: int
    mem_bytes: int
    gpus: int = 0
    time_s: int = 6 * 3600


@dataclass(frozen=True)
class RunReport:
    """One nightly run, as report.json has it."""

    run_id: str
    started: str
    """UTC, ISO 8601 to the second."""
    finished: str
    executor: str
    outcomes: tuple[CellOutcome, ...]
    lock_note: str = ""
    """Set when a stale lock of a dead holder was taken over: whose it was."""
    freed_bytes: int = 0
    """What the retention prune freed."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    drift: DriftReport | None = None
    """The "Upstream drift" section (nightly/drift.py); None in reports read back."""

    @property
    def ok(self) -> bool:
        """Exit 0 only when every non-skipped cell succeeded."""
        return all(o.status in (Status.SUCCESS, Status.WARNING, Status.SKIPPED)
                   for o in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id, "started": self.started, "finished": self.finished,
            "executor": self.executor, "ok": self.ok, "lock_note": self.lock_note,
            "freed_bytes": self.freed_bytes, "notes": list(self.notes),
            "cells": [o.to_json() for o in self.outcomes],
            **({"upstream_drift": self.drift.to_json()} if self.drift is not None else {}),
        }
