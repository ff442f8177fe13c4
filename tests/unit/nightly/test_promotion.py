"""The one promotion decision (``promotion.decide``), pure: each cell's standing (stack group,
green, a wheel in staging not served yet) to PROMOTE, HOLD (why) or LEAVE; a stack group's
members are held together until every member is green. And the held state read back from a
report.json, from fields of its own."""

from __future__ import annotations

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.nightly.model import CellOutcome, End, Held, Validation
from rocmbuild.nightly.promotion import Standing, Verdict, decide, green
from rocmbuild.nightly.report.history import parse_outcome

P, H, L = Verdict.PROMOTE, Verdict.HOLD, Verdict.LEAVE

# (cells as (id, group, green, staged), the verdict of each, in order)
CASES = {
    "alone green staged": ([("a", "", True, True)], [P]),
    "alone green served already": ([("a", "", True, False)], [L]),
    "alone not green": ([("a", "", False, True)], [L]),
    "alone not green, nothing staged": ([("a", "", False, False)], [L]),
    "a stack all green": ([("a", "s", True, True), ("b", "s", True, True)], [P, P]),
    "a stack with a red member holds the green ones": (
        [("a", "s", True, True), ("b", "s", False, False), ("c", "s", True, True)], [H, L, H]),
    "a held member served already is left": (
        [("a", "s", True, False), ("b", "s", False, True)], [L, L]),
    "another stack's red member holds nothing here": (
        [("a", "s", True, True), ("b", "t", False, False), ("c", "", True, True)], [P, L, P]),
    "a red cell on its own holds nothing": (
        [("a", "", False, False), ("b", "", True, True)], [L, P]),
    "two stacks, one red": (
        [("a", "s", True, True), ("b", "s", True, True), ("c", "t", True, True),
         ("d", "t", False, True)], [P, P, H, L]),
    "a green member with nothing staged still counts for its stack": (
        [("a", "s", True, False), ("b", "s", True, True)], [L, P]),
}


@pytest.mark.parametrize("cells,want", CASES.values(), ids=list(CASES))
def test_decide(cells: list[tuple[str, str, bool, bool]], want: list[Verdict]) -> None:
    got = decide(Standing(*c) for c in cells)
    assert [got[c[0]].verdict for c in cells] == want
    for c, v in zip(cells, want, strict=True):
        assert (got[c[0]].why != "") == (v is Verdict.HOLD)


def test_a_hold_names_its_stack_and_every_member_that_is_not_green() -> None:
    got = decide([Standing("b", "duo.gfx942", False, True), Standing("a", "duo.gfx942", True, True),
                  Standing("c", "duo.gfx942", False, False)])
    assert got["a"].why == "not promoted: stack duo.gfx942 is not green (b, c not)"


@pytest.mark.parametrize("status,validation,ok", [
    (Status.SUCCESS, Validation.PASSED, True), (Status.WARNING, Validation.PASSED, True),
    (Status.SKIPPED, Validation.NOT_REACHED, True), (Status.SUCCESS, Validation.PENDING, False),
    (Status.FAILED, Validation.FAILED, False), (Status.FAILED, Validation.NOT_REACHED, False)])
def test_green(status: Status, validation: Validation, ok: bool) -> None:
    assert green(CellOutcome("a", status, End.COMPLETED, validation=validation)) is ok


@pytest.mark.parametrize("held,why", [
    (Held.NO, ""),
    (Held.STACK, "not promoted: stack s is not green (b not)"),
])
def test_the_held_state_round_trips_as_fields(held: Held, why: str) -> None:
    """report.json keeps the held state in fields of its own; the reader reads them, and never
    the reason text (which says the same for people)."""
    reason = "built, validation passed" + (f"; {why}" if why else "")
    o = CellOutcome("a", Status.SUCCESS, End.COMPLETED, reason=reason,
                    validation=Validation.PASSED, held=held, held_why=why)
    back = parse_outcome(o.to_json())
    assert (back.held, back.held_why, back.reason, back.validation) == (held, why, reason,
                                                                        Validation.PASSED)
    assert ("held" in o.to_json()) is (held is Held.STACK)


def test_the_reader_does_not_parse_the_held_state_out_of_the_reason() -> None:
    o = parse_outcome({"cell": "a", "status": "success", "end": "completed", "validation":
                       "passed", "reason": "not promoted: stack s is not green (b not)"})
    assert (o.held, o.held_why) == (Held.NO, "")


def test_an_unknown_held_state_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^held: 'maybe' is not one of stack$"):
        parse_outcome({"cell": "a", "status": "success", "end": "completed", "held": "maybe"})


def test_an_unknown_validation_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^validation: 'maybe' is not one of passed, pending, "
                       r"failed$"):
        Validation.parse("maybe")
