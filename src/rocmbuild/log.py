"""Console output. Everything the user sees goes through ``console`` (stderr) or ``out`` (stdout,
for data such as ``--json``)."""

from __future__ import annotations

import sys

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

# 0 = quiet, 1 = normal, 2 = verbose (-v: subprocess output streams to the console). The command
# layer sets it from -v/-q and ROCMBUILD_VERBOSITY.
_level = 1


def set_level(level: int) -> None:
    global _level
    _level = level


def level() -> int:
    return _level


def info(msg: str) -> None:
    if _level >= 1:
        console.print(msg)


def debug(msg: str) -> None:
    if _level >= 2:
        console.print(f"[dim]{msg}[/dim]")


def warn(msg: str) -> None:
    console.print(f"[yellow]warning:[/yellow] {msg}")


def is_tty() -> bool:
    return sys.stderr.isatty()
