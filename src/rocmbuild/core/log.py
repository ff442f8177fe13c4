"""Console output. Everything the user sees goes through ``console`` (stderr) or ``out`` (stdout,
for data such as ``--json``).

Both are rich Consoles created on first use (importing rich was the largest part of a cache
hit's time, docs/benchmarks.md): until one is, :func:`info` and :func:`plain` write a line that
rich would print unchanged (printable ASCII, no markup, no ``:name:`` emoji code) straight to
stderr, the same bytes.

Text we echo may come from a file (a recipe string, a wheel's METADATA, a server's reply, a
saved host): every string printed through either Console, or straight to stderr, goes through
:func:`printable` first, so a terminal escape sequence in it is shown, never obeyed. Our own
colours are rich markup, turned into escape sequences after that."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    console: Console
    out: Console

_consoles: dict[str, Console] = {}



# up to the authority's last @ (a password may hold @, quotes too)
_USERINFO = re.compile(r"(?<=://)[^/\s]+@")
_CUT = re.compile(r"(?<=://)([^/\s'\"@]*):([^/\s'\"@]*)(?![^/\s'\"]*@)")


_CONTROLS = re.compile(r"[\s\x00-\x1f\x7f]")
_HEAD = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://|\s*/*")


def redact(text: str, *, strict: bool = False) -> str:
    """``text`` with every user:password it may show replaced by ``***``: the one redactor, for
    every message, log line and record that may hold a URL.

    In a message (the default) that is the userinfo of each ``scheme://`` URL, up to the
    authority's last ``@``, and a URL cut short before its ``@`` (``https://user:secr...``);
    other ``@`` are text (``file@1.0.tar.gz``, ``a@b``). ``strict``: ``text`` is one value that
    may be a URL or a location, however spelled (an ``--index``, a config's URL, a server's
    reason): besides, everything after its scheme up to its last ``@`` or ``%40`` is hidden
    with or without a scheme, over-redacting rather than leaking (a path with ``@`` loses the
    part before it), and control characters and whitespace but spaces are shown as ``?``."""
    if strict:
        text = _CONTROLS.sub(lambda m: " " if m.group() == " " else "?", text)
        head = m.group() if (m := _HEAD.match(text)) else ""
        rest = text[len(head):]
        ends = [rest.rfind("@") + 1, rest.lower().rfind("%40") + 3]  # '@', or '@' encoded
        cut = max(e for e in ends if e > 2 or e == ends[0])
        text = head + ("***@" + rest[cut:] if cut > 0 else rest)
    if "://" not in text:
        return text
    text = _USERINFO.sub("***@", text)
    # a URL cut short before its @ (a value shown to 40 characters): "user:secr..." is no port
    return _CUT.sub(lambda m: m.group() if m.group(2).isdigit() else "***", text)


def __getattr__(name: str) -> Console:
    """``log.console`` and ``log.out``, made on first use (PEP 562)."""
    if name not in ("console", "out"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _consoles:
        _consoles[name] = new_console(stderr=name == "console")
    return _consoles[name]


def new_console(**kwargs: Any) -> Console:
    """A rich Console (no highlighting, soft wrap) that prints every string it is given as
    :func:`printable` makes it: ``console`` and ``out`` are two."""
    from rich.console import Console

    class Printable(Console):
        def print(self, *objects: Any, **kw: Any) -> None:
            Console.print(self, *(printable(o) if isinstance(o, str) else o for o in objects),
                          **kw)

    return Printable(highlight=False, soft_wrap=True, **kwargs)


# C0 controls but tab and newline, DEL, C1 controls (a lone 0x9b is a CSI on some terminals),
# and the bidirectional overrides and isolates that reorder what a terminal shows
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to show on a terminal: a URL's user:password masked (``redact``: every
    line printed passes here, whichever value, key or table name it echoes), and each control
    character but tab and newline (ESC, BEL, CR, backspace, C1 controls) and each bidirectional
    override written as Python writes it in a literal (``\\x1b``, ``\\u202e``), so an escape
    sequence from a file is seen, not obeyed. Other text is returned as it is."""
    text = redact(text)
    if not UNPRINTABLE.search(text):
        return text
    return UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


# A markup tag, as rich reads one: "[" then a lowercase letter, "#", "/" or "@", up to the next
# "]" with no "[" between, and the backslashes in front of it.
_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?\])")


def escape(text: str) -> str:
    """``text`` made literal inside rich markup: what ``rich.markup.escape`` does (each tag-like
    ``[...]`` gets a backslash, the backslashes before it are doubled, and a lone trailing
    backslash is doubled), without importing rich."""
    text = _TAG.sub(lambda m: m.group(1) * 2 + "\\" + m.group(2), text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


# What rich prints as it is: printable ASCII without "[" (markup) or a ":...:" (an emoji code)
_VERBATIM = re.compile(r"[ -Z\\-~]*")
_EMOJI_CODE = re.compile(r":\S*:")


def _console() -> Console:
    return __getattr__("console")


def _print(msg: str, markup: bool = True) -> None:
    """``console.print(msg)``; straight to stderr while no Console exists (none can be showing a
    live display then) and rich would print ``msg`` unchanged."""
    if "console" not in _consoles and _VERBATIM.fullmatch(msg) and not _EMOJI_CODE.search(msg):
        sys.stderr.write(redact(msg) + "\n")
        sys.stderr.flush()
        return
    console = _console()
    console.print(msg, markup=markup, highlight=False)


def plain(msg: str) -> None:
    """One line of plain text (no markup) on stderr, whatever the level: a command's last word,
    such as build's ``<wheel>  sha256=...  built``."""
    _print(msg, markup=False)

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
        console = _console()
        console.print(f"[dim]-[/dim] {escape(msg)}")


@contextlib.contextmanager
def group(title: str) -> Iterator[None]:
    """Under GitHub Actions, fold what is printed inside into a ``::group::`` (the runner reads
    workflow commands from stderr as from stdout); elsewhere nothing."""
    if not (_github and _level >= 1):
        yield
        return
    console = _console()
    console.print(f"::group::{title}", markup=False, highlight=False)
    try:
        yield
    finally:
        console.print("::endgroup::", markup=False, highlight=False)


def info(msg: str) -> None:
    if _level >= 1:
        _print(msg)


def debug(msg: str) -> None:
    if _level >= 2:
        console = _console()
        console.print(f"[dim]{msg}[/dim]")


def warn(msg: str) -> None:
    console = _console()
    console.print(f"[yellow]warning:[/yellow] {msg}")


def is_tty() -> bool:
    return sys.stderr.isatty()
