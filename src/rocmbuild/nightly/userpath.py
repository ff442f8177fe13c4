"""A path written in nightly.toml (``workdir``, ``reports.dir``, ``executor.shared_dir``, ...),
checked before anything uses it: no NUL or control character, ``~`` only for a user that
exists, not absurdly long; relative paths are taken from the config file's directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

MAX_LEN = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadPath(ValueError):
    """The text is not a path nightly.toml may name (the reason, without the text)."""


def checked(value: str, base: Path) -> Path:
    """``value`` as an absolute path (``~`` and ``~user`` expanded, a relative path taken from
    ``base``); BadPath with a short reason for a NUL byte, a control character, a ``~user``
    that does not exist or more than MAX_LEN characters."""
    if "\0" in value:
        raise BadPath("contains a NUL byte")
    if _CONTROL.search(value):
        raise BadPath("contains a control character")
    if len(value) > MAX_LEN:
        raise BadPath(f"is longer than {MAX_LEN} characters")
    if value.startswith("~"):
        expanded = os.path.expanduser(value)
        if expanded.startswith("~"):
            user = value[1:].split("/")[0]
            raise BadPath(f"~{user[:40]}: no such user (or no home directory) on this host")
        value = expanded
    p = Path(value)
    return p if p.is_absolute() else base / p
