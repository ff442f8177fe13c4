"""The command layer: one module per command. Each has ``register(sub)``, which adds its parser
(flags from ``common``, defined once), and ``run(args) -> int``, which turns the Namespace into
typed values (through ``rocmbuild.core.options``), calls the domain API and prints. Only this
package
and ``cli.py`` see argparse, print for the user and decide exit codes; domain modules return
values or raise ``rocmbuild.core.errors``."""

from __future__ import annotations

from collections.abc import Collection

COMMANDS = ("build", "plan", "recipes", "doctor", "audit", "validate", "verify", "publish",
            "promote", "cache", "stack", "nightly", "completion")
"""The commands, in --help's order: ``rocmbuild.commands.<name>``, each imported when its parser
is built (a run builds the parser of its command only)."""

# Global options that take a value (needed to find the first positional for the shorthand).
GLOBAL_VALUE_OPTS = {"--workdir", "--cache-dir", "--recipes"}


def first_positional(argv: list[str]) -> int | None:
    """Where the command (or the recipe of the shorthand) is in ``argv``."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in GLOBAL_VALUE_OPTS:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i
    return None


def insert_build(argv: list[str], commands: Collection[str]) -> list[str]:
    """`rocmbuild flash-attn ...` -> `rocmbuild build flash-attn ...`."""
    i = first_positional(argv)
    if i is not None and argv[i] not in commands:
        return argv[:i] + ["build"] + argv[i:]
    return argv


def command_of(argv: list[str]) -> str | None:
    """The command whose parser ``argv`` needs alone (after ``insert_build``); None: the whole
    parser (no command given; ``completion``, whose script lists every command)."""
    i = first_positional(argv)
    name = None if i is None else argv[i]
    return name if name in COMMANDS and name != "completion" else None
