"""Console output. Everything the user sees goes through ``console`` (stderr) or ``out`` (stdout,
for data such as ``--json``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape

console = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

# 0 = quiet, 1 = normal, 2 = verbose (-v: subprocess output streams to the console). The command
# layer sets it from -v/-q and ROCMBUILD_VERBOSITY.
_level = 1
# GitHub Actions: fold each stage in ::group:: / ::endgroup:: (the command layer sets it from
# GITHUB_ACTIONS through options).
_github = False


def set_level(level: int) -> None:
    global _level
    _level = level


def level() -> int:
    return _level


def set_github(on: bool) -> None:
    global _github
    _github = on


def github() -> bool:
    return _github


def step(msg: str) -> None:
    """One step of a longer command, printed as it starts (validate, doctor): no blank terminal
    during the seconds it takes."""
    if _level >= 1:
        console.print(f"[dim]-[/dim] {escape(msg)}")


@contextlib.contextmanager
def group(title: str) -> Iterator[None]:
    """Under GitHub Actions, fold what is printed inside into a ``::group::`` (the runner reads
    workflow commands from stderr as from stdout); elsewhere nothing."""
    if not (_github and _level >= 1):
        yield
        return
    console.print(f"::group::{title}", markup=False, highlight=False)
    try:
        yield
    finally:
        console.print("::endgroup::", markup=False, highlight=False)


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
