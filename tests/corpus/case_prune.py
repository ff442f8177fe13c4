"""Bad inputs of `rocmbuild cache prune`: sizes and day counts that are not, and a prune with no
rule. Each is a usage error (exit 2) naming the flag, refused before anything is looked at or
removed."""

from __future__ import annotations

from tests.corpus import EXIT, Case

USAGE = EXIT["usage"]


def case(cid: str, argv: tuple[str, ...], needle: str) -> Case:
    return Case(cid, ("cache", "prune", *argv), USAGE, needle, "prune", writes_nothing=True)


CASES: list[Case] = [
    case("prune-size-unit", ("--max-size", "12X"), "--max-size"),
    case("prune-size-negative", ("--max-size=-5G",), "--max-size"),
    case("prune-size-empty", ("--max-size", ""), "--max-size"),
    case("prune-size-words", ("--max-size", "lots"), "--max-size"),
    case("prune-days-word", ("--keep-days", "two"), "--keep-days"),
    case("prune-days-negative", ("--keep-days=-1",), "--keep-days"),
    case("prune-days-nan", ("--keep-days", "nan"), "--keep-days"),
    case("prune-days-inf", ("--keep-days", "inf", "--dry-run"), "--keep-days"),
    case("prune-no-rule", ("--dry-run",), "--max-size or --keep-days"),
    case("prune-unknown-flag", ("--max-age", "3"), "--max-age"),
    Case("cache-no-subcommand", ("cache",), USAGE, "cache: give a subcommand", "prune",
         writes_nothing=True),
]
