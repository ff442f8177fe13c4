"""The one parser for sizes, durations and day counts, shared by the command line and every
config file (nightly.toml, recipes, saved hosts).

Each parser takes what the user wrote (a string, or a TOML/JSON number) and returns a finite
number inside a stated range, or raises ``BadQuantity`` with a short reason; the caller names the
flag or key (``--max-size: '1e400' is not a size``) and picks the error class. A 400-digit number,
NaN, infinity, a negative value or a unit we do not know is a BadQuantity, never an
OverflowError or a value that breaks arithmetic later.
"""

from __future__ import annotations

import math
import re

MAX_BYTES = 1 << 60
"""The largest size accepted (1 EiB)."""
MAX_SECONDS = 366 * 86400
"""The longest duration accepted (a year)."""
MAX_DAYS = 36600.0
"""The most days accepted (a century)."""

_NUMBER = r"(\d{1,18}(?:\.\d{1,9})?)"
_SIZE = re.compile(_NUMBER + r"\s*([kmgtp]?)(?:i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_DURATION = re.compile(_NUMBER + r"\s*([smhd]?)")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

SIZE_HINT = ("a number of bytes with an optional binary unit K, M, G, T or P, e.g. 200G "
             "(1G = 1024^3 bytes), at most 1 EiB")
DURATION_HINT = 'seconds, or a number with s, m, h or d ("90m", "12h"), more than 0, at most a year'
DAYS_HINT = "a number of days >= 0, e.g. 14 or 0.5"


class BadQuantity(ValueError):
    """What the user wrote is not a quantity of the asked kind, or is out of range."""


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:40] + "..." if len(text) > 40 else text)


def _number(value: object, pattern: re.Pattern[str], units: dict[str, int],
            kind: str) -> float:
    if isinstance(value, bool):
        raise BadQuantity(f"{_shown(value)} is not {kind}")
    if isinstance(value, int):
        if abs(value) > MAX_BYTES:
            raise BadQuantity(f"{_shown(value)} is out of range")
        return float(value)
    if isinstance(value, float):
        return value
    if not isinstance(value, str):
        raise BadQuantity(f"{_shown(value)} is not {kind}")
    m = pattern.fullmatch(value.strip())
    if m is None:
        raise BadQuantity(f"{_shown(value)} is not {kind}")
    return float(m.group(1)) * units[m.group(2).lower()]


def size(value: object) -> int:
    """``"200G"``, ``"512M"``, ``"1.5T"``, ``"1000"``, ``1000`` -> bytes, 0 .. 1 EiB."""
    n = _number(value, _SIZE, _SIZE_UNITS, "a size")
    if not math.isfinite(n) or not 0 <= n <= MAX_BYTES:
        raise BadQuantity(f"{_shown(value)} is out of range (0 to 1 EiB)")
    return int(n)


def duration(value: object) -> float:
    """``"90m"``, ``"2h"``, ``"1d"``, ``"3600"``, ``3600`` -> seconds, more than 0, at most a
    year."""
    n = _number(value, _DURATION, _DURATION_UNITS, "a duration")
    if not math.isfinite(n) or not 0 < n <= MAX_SECONDS:
        raise BadQuantity(f"{_shown(value)} is out of range (more than 0 s, at most a year)")
    return n


def days(value: object) -> float:
    """A number of days, 0 .. a century (``"14"``, ``0.5``)."""
    given = value  # for messages: what the user wrote, not what it parsed to
    if isinstance(value, str):
        try:
            value = float(value) if len(value) <= 30 else math.nan
        except ValueError:
            raise BadQuantity(f"{_shown(given)} is not a number of days") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadQuantity(f"{_shown(given)} is not a number of days")
    n = float(value) if abs(value) <= MAX_DAYS else math.inf
    if not math.isfinite(n) or not 0 <= n <= MAX_DAYS:
        raise BadQuantity(f"{_shown(given)} is out of range (0 to 36600 days)")
    return n


def count(value: object, lo: int, hi: int, kind: str = "a whole number") -> int:
    """An integer in ``lo .. hi`` (a CPU count, a job count, a history length); a bool, a float
    or a 400-digit number is a BadQuantity."""
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,19}\s*", value):
        value = int(value)
    if type(value) is not int:
        raise BadQuantity(f"{_shown(value)} is not {kind}")
    if not lo <= value <= hi:
        raise BadQuantity(f"{_shown(value)} is out of range ({lo} to {hi})")
    return value
