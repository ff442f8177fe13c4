"""The bad-input corpus: every case is one rocmbuild command line that must fail cleanly.

Each module ``tests/corpus/case_*.py`` exports ``CASES: list[Case]``;
``tests/integration/test_corpus.py`` runs every case through the real CLI (``python -m
rocmbuild``) in a fresh directory and asserts, for each:

- the exit code is the one the case names (its class's code in the README's table);
- stderr has exactly one error line (``<kind>: ...``) that contains ``needle`` and names the
  file and key, or the flag, or the variable (``needle`` is chosen so that it does);
- a ``hint:`` line follows;
- no ``Traceback`` anywhere, and the internal-error guard is never reached;
- with ``secret`` set: the secret appears nowhere, not in stdout, stderr, file names or file
  contents under the case's directory;
- with ``writes_nothing``: no file appears in the workspace's wheels/, index/ or cache/ (the
  "accepted today" classes must not write, publish or serve anything).

``files`` are written into the case directory before the run (str: text, bytes: raw), then
``fifos`` and ``links`` made (a FIFO or a symlink cannot be a file's content); ``{dir}``
in ``argv``, ``env`` values and text files is replaced by that directory, and ``{wheel}`` by
the path of a small valid wheel the runner builds once (for cases that need a real wheel).
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT = {"usage": 2, "recipe": 3, "fetch": 4, "patch": 5, "build": 6, "audit": 7,
        "validation": 8, "publish": 9, "toolchain": 10, "cache": 11, "command": 12,
        "cells": 14, "busy": 15}


@dataclass(frozen=True)
class Case:
    id: str
    """Unique, short, kebab-case: shown as the test id."""
    argv: tuple[str, ...]
    """Arguments after ``rocmbuild`` (global options such as --workdir are added by the runner:
    ``--workdir {dir}/build``)."""
    code: int
    """Expected exit code (use EXIT["usage"], ...)."""
    needle: str
    """Text the one error line must contain (names the file and key, flag or variable)."""
    klass: str
    """The issue's class: secrets, cache, identity, tracebacks, processes, inputs, causes, or a
    short name of your own for others."""
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)
    secret: str | None = None
    writes_nothing: bool = False
    timeout: float = 120.0
    fifos: tuple[str, ...] = ()
    """Paths (relative to the case directory) made FIFOs before the run, with no writer: a
    reader that opens one blocks for ever, so the case's short ``timeout`` shows a hang."""
    links: dict[str, str] = field(default_factory=dict)
    """Symbolic links made before the run: path -> target (``{dir}`` substituted)."""
