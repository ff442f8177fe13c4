"""The lock files of a published stack (docs/stacks.md), one pair per arch view:

- ``pylock.toml`` (PEP 751, lock-version 1.0): each wheel of the set by URL, size and sha256;
  ``uv pip install -r pylock.toml`` installs exactly those files.
- ``constraints.txt``: ``name==version`` for each wheel (and the torch they were built
  against), for ``pip install -c constraints.txt --index-url <view>/simple/ <names>``.

Both say which torch the set needs as its ABI-bound wheels' METADATA does (``Requires-Dist:
torch==X.Y.*``, written by the tag stage): pylock.toml in ``[tool.rocmbuild] torch-requires``,
constraints.txt by pinning that torch itself.

Both are text made from the wheels' names, versions, sizes and hashes and the URL they are served
at, in a fixed order: same inputs, same bytes (no dates, no host names). They sit in the index
next to the view's pages, ``<stage>/<view>/stacks/<stack>/``, written in the transaction that
publishes the wheels (``static_index.StaticIndex.publish``'s ``extra``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from rocmbuild.core.pep508 import major_minor

LOCK = "pylock.toml"
CONSTRAINTS = "constraints.txt"


@dataclass(frozen=True)
class Locked:
    """One wheel of the set as its lock entry needs it."""

    name: str
    """PEP 503 normalized."""
    version: str
    filename: str
    size: int
    sha256: str
    requires_python: str | None = None


@dataclass(frozen=True)
class StackLock:
    stack: str
    view: str
    """The arch view (``gfx942``)."""
    stage_url: str
    """Where the stage is served, ending in ``/``: ``https://host/stable/`` or a ``file://``
    URL of the stage directory."""
    wheels: tuple[Locked, ...]
    torch: str
    """The torch the set was built against (``2.13.0+rocm7.2``); "" when none."""
    torch_from: str
    """``host`` (torch is not in the set: the host's must be that one) or ``recipe``."""

    def torch_requires(self) -> str:
        """``torch==2.13.*``: what the set's torch-bound wheels require ("" without a torch)."""
        mm = major_minor(self.torch) if self.torch else ""
        return f"torch=={mm}.*" if mm else ""

    def rel_dir(self) -> str:
        """The lock files' directory, relative to the stage."""
        return f"{self.view}/stacks/{self.stack}"


def _s(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for the text we write)."""
    return json.dumps(text, ensure_ascii=False)


def pylock(lock: StackLock) -> str:
    view_index = f"{lock.stage_url}{lock.view}/simple/"
    out = [
        f"# PEP 751 lock of stack {lock.stack} for {lock.view}, written by rocmbuild.",
        "# Install exactly this set: uv pip install -r pylock.toml",
    ]
    if lock.torch_from == "host" and lock.torch:
        out.append(f"# The set was built against torch {lock.torch}: have that torch installed "
                   f"(its torch-bound wheels require {lock.torch_requires()}).")
    out += ['lock-version = "1.0"', 'created-by = "rocmbuild"', ""]
    for w in sorted(lock.wheels, key=lambda w: (w.name, w.version, w.filename)):
        out += ["[[packages]]", f"name = {_s(w.name)}", f"version = {_s(w.version)}"]
        if w.requires_python:
            out.append(f"requires-python = {_s(w.requires_python)}")
        out += [f"index = {_s(view_index)}", "",
                "[[packages.wheels]]", f"name = {_s(w.filename)}",
                f"url = {_s(lock.stage_url + 'files/' + quote(w.filename))}",
                f"size = {w.size}", f"hashes = {{sha256 = {_s(w.sha256)}}}", ""]
    out += ["[tool.rocmbuild]", f"stack = {_s(lock.stack)}", f"view = {_s(lock.view)}",
            f"torch = {_s(lock.torch)}", f"torch-from = {_s(lock.torch_from)}"]
    if lock.torch_requires():
        out.append(f"torch-requires = {_s(lock.torch_requires())}")
    out.append("")
    return "\n".join(out)


def constraints(lock: StackLock) -> str:
    names = " ".join(sorted({w.name for w in lock.wheels}))
    view_index = f"{lock.stage_url}{lock.view}/simple/"
    out = [f"# Constraints of stack {lock.stack} for {lock.view}, written by rocmbuild:",
           f"#   pip install -c constraints.txt --index-url {view_index} {names}"]
    if lock.torch_requires():
        out.append(f"# The torch-bound wheels require {lock.torch_requires()}; torch is pinned "
                   "to the one they were built against.")
    pins = {w.name: w.version for w in lock.wheels}
    if lock.torch and "torch" not in pins:
        pins["torch"] = lock.torch
    out += [f"{name}=={pins[name]}" for name in sorted(pins)]
    return "\n".join(out) + "\n"


def files(locks: Sequence[StackLock]) -> dict[str, bytes]:
    """Each lock's two files by their path relative to the stage."""
    out: dict[str, bytes] = {}
    for lock in locks:
        out[f"{lock.rel_dir()}/{LOCK}"] = pylock(lock).encode()
        out[f"{lock.rel_dir()}/{CONSTRAINTS}"] = constraints(lock).encode()
    return out
