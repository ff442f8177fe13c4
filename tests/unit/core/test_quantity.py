"""core.quantity: the one parser for sizes, durations, day counts and counts."""

from __future__ import annotations

import pytest

from rocmbuild.core import quantity


def test_sizes() -> None:
    assert quantity.size("200G") == 200 << 30
    assert quantity.size("1.5T") == 3 << 39
    assert quantity.size("512 MiB") == 512 << 20
    assert quantity.size("1000") == quantity.size(1000) == 1000
    for bad in ("1" * 400, "nan", "inf", "-1", "1e5", "5X", "", True, None, 2 ** 70, 1e300,
                float("nan"), "2000P"):
        with pytest.raises(quantity.BadQuantity):
            quantity.size(bad)


def test_durations() -> None:
    assert quantity.duration("90m") == 5400
    assert quantity.duration("2h") == quantity.duration(7200) == 7200
    for bad in ("0", "9" * 400, "nan", float("inf"), "400d", -5, "soon", False):
        with pytest.raises(quantity.BadQuantity):
            quantity.duration(bad)


def test_days_and_counts() -> None:
    assert quantity.days("14") == 14.0 and quantity.days(0.5) == 0.5
    for bad in ("nan", "-1", 1e30, "1" * 400, True, "x"):
        with pytest.raises(quantity.BadQuantity):
            quantity.days(bad)
    assert quantity.count(64, 1, 1 << 20) == 64
    for bad in (10 ** 30, 0, 1.0, True, "9" * 400):
        with pytest.raises(quantity.BadQuantity):
            quantity.count(bad, 1, 1 << 20)
