"""The one promotion decision: which cells' wheels go from staging to the served stage.

``decide`` is pure: from each cell's standing (its stack group, green or not, a wheel in
staging that is not served yet or not) to a ruling: PROMOTE, HOLD (why) or LEAVE. A member of a
stack group (``Cell.group``) is promoted only when every member of its group is green; until
then it is held in staging. ``settle`` applies the rulings: it is where the normal run, its
``--collect`` and ``--validate-pending`` all end.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.nightly import changes
from rocmbuild.nightly.config import NightlyConfig
from rocmbuild.nightly.model import HELD_BY_STACK, CellOutcome, Held
from rocmbuild.publish import api as pub


class Verdict(enum.Enum):
    PROMOTE = "promote"
    HOLD = "hold"
    """Green, its wheel in staging, but a member of its stack group is not green."""
    LEAVE = "leave"
    """Not green, or nothing to promote (served already, or no wheel)."""


@dataclass(frozen=True)
class Standing:
    """One cell as the decision sees it."""

    cell_id: str
    group: str
    """Its stack group, "" for a cell on its own."""
    green: bool
    """It counts for its stack (``green``)."""
    staged: bool
    """Its wheel is in staging and not promoted or served yet: there is something to promote."""


@dataclass(frozen=True)
class Ruling:
    verdict: Verdict
    why: str = ""
    """For HOLD: ``not promoted: stack <group> is not green (<members> not)``."""


def decide(cells: Iterable[Standing]) -> dict[str, Ruling]:
    """Each cell's ruling: LEAVE when it is not green or has nothing staged, HOLD when a member
    of its stack group is not green, else PROMOTE."""
    cells = list(cells)
    bad: dict[str, list[str]] = {}
    for c in cells:
        if c.group and not c.green:
            bad.setdefault(c.group, []).append(c.cell_id)
    out: dict[str, Ruling] = {}
    for c in cells:
        if not c.green or not c.staged:
            out[c.cell_id] = Ruling(Verdict.LEAVE)
        elif c.group in bad:
            out[c.cell_id] = Ruling(Verdict.HOLD, f"{HELD_BY_STACK}{c.group} is not green "
                                                  f"({', '.join(bad[c.group])} not)")
        else:
            out[c.cell_id] = Ruling(Verdict.PROMOTE)
    return out


def green(o: CellOutcome) -> bool:
    """A cell that counts for its stack: succeeded (validated) or SKIPPED (unchanged, its
    validated wheel in staging)."""
    return o.status in (Status.SUCCESS, Status.WARNING, Status.SKIPPED) and not o.pending


def served(cfg: NightlyConfig, wheel: str) -> bool:
    """The served stage has this wheel already (a SKIP cell's: nothing to promote)."""
    project, _ = changes.wheel_project(wheel)
    return changes.in_stage(cfg.index, cfg.promote_to, project, wheel)


def promote(cfg: NightlyConfig, o: CellOutcome) -> CellOutcome:
    """Promote a green cell's wheel from staging to the served stage; a failure to promote
    makes the cell failed (the last good wheel stays served)."""
    if pub.is_url(cfg.index) or not o.project or not o.version:
        return o
    try:
        pub.promote(pub.PromoteOptions(index=cfg.index, project=o.project, version=o.version,
                                       from_stage=cfg.stage, to_stage=cfg.promote_to,
                                       index_from=f"{cfg.path.name}: publish.index"))
    except RocmbuildError as exc:
        return replace(o, status=Status.FAILED, reason=f"promote failed: {exc.message}"[:500])
    return replace(o, promoted=True)


def settle(cfg: NightlyConfig, outcomes: Sequence[CellOutcome], standings: Iterable[Standing]
           ) -> list[CellOutcome]:
    """The rulings over ``standings`` (every cell of the run, so that a group is judged whole)
    applied to ``outcomes``: PROMOTE promotes (``promote``), HOLD marks the outcome held and
    adds why to its reason, LEAVE keeps it as it is."""
    rulings = decide(standings)
    out: list[CellOutcome] = []
    for o in outcomes:
        r = rulings.get(o.cell_id, Ruling(Verdict.LEAVE))
        if r.verdict is Verdict.PROMOTE:
            out.append(promote(cfg, o))
        elif r.verdict is Verdict.HOLD:
            out.append(replace(o, reason="; ".join(x for x in (o.reason, r.why) if x),
                               held=Held.STACK, held_why=r.why))
        else:
            out.append(o)
    return out


def promote_cells(cfg: NightlyConfig, outcomes: Sequence[CellOutcome],
                  groups: dict[str, str]) -> list[CellOutcome]:
    """A run's cells, built or SKIPPED, when the run ends (``groups``: cell id -> stack group):
    a green built cell has its wheel in staging; a SKIP cell only when the served stage does
    not have its wheel yet (an earlier promote failed, or its stack was held), and it stays
    SKIPPED."""
    def staged(o: CellOutcome) -> bool:
        if o.status is not Status.SKIPPED:
            return True
        return bool(o.wheel and o.project) and not served(cfg, o.wheel or "")

    standings = []
    for o in outcomes:
        ok = green(o)  # the served stage is asked about green SKIP cells only
        standings.append(Standing(o.cell_id, groups.get(o.cell_id, ""), ok, ok and staged(o)))
    return settle(cfg, outcomes, standings)
