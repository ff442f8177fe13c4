"""The size, duration and count flags: parsed by core.quantity through
``commands.common.quantity_flag``, each bad value one usage error naming the flag, with a hint
(the corpus, tests/corpus/case_untrusted.py, runs the same through the real CLI)."""

from __future__ import annotations

import pytest

from rocmbuild.commands import common
from rocmbuild.core import quantity
from rocmbuild.core.errors import UsageError

HUGE = "9" * 400


@pytest.mark.parametrize(("text", "value"), [
    ("200G", 200 * 1024**3), ("500M", 500 * 1024**2), ("1.5T", int(1.5 * 1024**4)),
    ("1024", 1024), ("2GiB", 2 * 1024**3), ("3gb", 3 * 1024**3), ("0", 0), ("10 K", 10240),
])
def test_max_size(text: str, value: int) -> None:
    assert common.quantity_flag("--max-size", text, quantity.size, quantity.SIZE_HINT) == value


@pytest.mark.parametrize("text", ["", "G", "12X", "-5G", "1e3G", "nan", "inf", "1.2.3M",
                                  "5 GB x", HUGE, HUGE + "G", "2000P"])
def test_max_size_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="^--max-size: ") as exc:
        common.quantity_flag("--max-size", text, quantity.size, quantity.SIZE_HINT)
    assert exc.value.hint and "\n" not in exc.value.message
    assert len(exc.value.message) < 200  # a 400-digit value is shown cut short
    if text in ("12X", "lots", ""):
        assert f"'{text}' is not a size" in exc.value.message


@pytest.mark.parametrize("text", ["abc", "-1", "nan", "inf", "", HUGE, "1e400", "-0.5"])
def test_keep_days_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="^--keep-days: ") as exc:
        common.quantity_flag("--keep-days", text, quantity.days, quantity.DAYS_HINT)
    assert exc.value.hint and len(exc.value.message) < 200


def test_keep_days() -> None:
    assert common.quantity_flag("--keep-days", "0.5", quantity.days, quantity.DAYS_HINT) == 0.5
