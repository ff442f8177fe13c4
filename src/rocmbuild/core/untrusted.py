"""The one reader for JSON we did not just write: files on disk (memos, baselines, saved hosts,
manifests, reports, slurm.json, cache entries) and bytes from elsewhere (a wheel's
rocmbuild.json, a server's reply, a tool's output).

``read_json(path, limit)`` reads a regular file once (``fsutil.read_capped``: no symlink, no
FIFO, at most ``limit`` bytes); ``loads(blob)`` parses bytes. Both check, before and while
parsing: UTF-8, nesting at most ``MAX_DEPTH`` deep (100k ``[`` never reaches the recursive
parser), no NaN or Infinity, finite floats, integers of at most 19 digits. Failures are one
``BadJson`` with a short reason; the caller names the file and picks its error class. The typed
getters (``obj``, ``text``, ``integer``, ``number``, ``flag``) check one value each and name it by
the path the caller gives (``runs[3].tflops``).

``loads_toml(raw)`` is its sibling for the TOML files users write; ``controls(value, at)`` finds
the control characters in the strings of what it parsed (a file's keys and values are shown to
people and handed to builds: a terminal escape, a carriage return or a bidi override has no place
in them).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, log

MAX_DEPTH = 32
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_KEEP_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_PAIR = re.compile(rb"[\[{][\]}]")
# An integer of 20 digits or more (int() of a long one is slow; no count we read has 20 digits).
# A float's digits are not counted: float() is linear in them, and a float's repr has up to 21
# digits in a row (0.00012345678901234568, as the kernel gate's reports hold).
_LONG_INT = re.compile(rb"(?<![\d.eE+-])-?\d{20,}(?![\d.eE])")
_LONG_AT_KEY = re.compile(rb'"((?:[^"\\]|\\.){1,64})"\s*:\s*-?\d{20,}(?![\d.eE])')


# C0 controls (tab and line feed only in prose that may span lines), DEL, C1 controls, and the
# bidirectional overrides and isolates that reorder what a terminal or an editor shows
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_IN_LINES = log.UNPRINTABLE  # the same set: what log.printable escapes


class BadJson(ValueError):
    """Not JSON we accept: the reason, in a few words."""


class BadToml(ValueError):
    """Not TOML we accept: the reason, in a few words (``not UTF-8 text (byte 3: b'\\xff')``,
    ``invalid TOML: ...``)."""


def _depth_ok(brackets: bytes, limit: int) -> bool:
    """Whether ``brackets`` (a document's brackets outside strings) nest at most ``limit`` deep:
    each pass removes the innermost pairs (C speed), so a balanced tree is empty after its depth
    in passes."""
    for _ in range(limit):
        if not brackets:
            return True
        brackets = _PAIR.sub(b"", brackets)
    return not brackets


def _no_constant(name: str) -> Any:
    raise BadJson(f"{name} is not a number we accept")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJson(f"{text[:20]} is not a finite number")
    return value


def loads(blob: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``blob`` (bytes: UTF-8) as JSON we accept, or raise BadJson."""
    if isinstance(blob, str):
        text, blob = blob, blob.encode("utf-8", "surrogatepass")
    else:
        try:
            text = blob.decode("utf-8")
        except UnicodeDecodeError:
            raise BadJson("not UTF-8") from None
    outside = _STRINGS.sub(b"", blob)
    if _LONG_INT.search(outside):
        key = _LONG_AT_KEY.search(blob)  # for the message only: the key it is the value of
        at = f" (key {key.group(1).decode('utf-8', 'replace')!r})" if key else ""
        raise BadJson(f"a number of more than 19 digits{at}")
    if not _depth_ok(outside.translate(None, _KEEP_BRACKETS), max_depth):
        raise BadJson(f"nested deeper than {max_depth} levels, or brackets that do not pair")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise BadJson(f"not valid JSON ({exc.msg})") from None


def read_json(path: Path, limit: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON in the regular file ``path``, read once; BadJson when it is too large, not a
    regular file (a symlink, a FIFO) or not JSON we accept; other OSErrors as they come (a missing
    file)."""
    try:
        blob = fsutil.read_capped(path, limit)
    except fsutil.TooLarge:
        raise BadJson(f"larger than {limit} bytes") from None
    except fsutil.NotRegular as exc:
        raise BadJson(exc.strerror or "not a regular file") from None
    return loads(blob, max_depth)


def obj(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadJson(f"{where}: expected an object")
    return value


def text(value: object, where: str, max_len: int = 4096) -> str:
    if not isinstance(value, str) or len(value) > max_len or "\0" in value:
        raise BadJson(f"{where}: expected a string of at most {max_len} characters")
    return value


def integer(value: object, where: str, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise BadJson(f"{where}: expected a whole number from {lo} to {hi}")
    return value


def number(value: object, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not lo <= value <= hi:
        raise BadJson(f"{where}: expected a number from {lo:g} to {hi:g}")
    return float(value)


def flag(value: object, where: str) -> bool:
    if type(value) is not bool:
        raise BadJson(f"{where}: expected true or false")
    return value


def loads_toml(raw: bytes) -> dict[str, Any]:
    """The one parse of a TOML file a user wrote (recipes, stacks, nightly.toml,
    ``[tool.rocmbuild]``): UTF-8, a byte order mark skipped (Windows editors write one);
    BadToml otherwise, for a deep nesting too. The caller reads the bytes once and checks the
    values it finds."""
    import tomllib  # only where a TOML file is read: a cache hit parses none

    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadToml(f"not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})"
                      ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadToml(f"invalid TOML: {exc}") from None
    except ValueError:  # int() of a decimal integer past Python's digit limit
        raise BadToml(f"a number of more than {_DIGITS} digits") from None
    except RecursionError:
        raise BadToml("invalid TOML: nested too deeply") from None
    at = _unprintable_int(data)
    if at is not None:  # a 0x/0o/0b integer has no digit limit, but str() of it has
        raise BadToml(f"{at}: a number of more than {_DIGITS} digits")
    return data


_DIGITS = sys.get_int_max_str_digits()
_PRINTABLE = 10**_DIGITS


def _unprintable_int(value: Any) -> str | None:
    """The dotted key of the first integer in ``value`` (parsed TOML) of more than
    ``_DIGITS`` decimal digits, which Python cannot even put in a message; smaller ones are
    bounded by the readers that take them, naming the key."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        where, v = todo.pop()
        if type(v) is int and not -_PRINTABLE < v < _PRINTABLE:
            return where or "(value)"
        if isinstance(v, dict):
            todo += [(f"{where}.{k}" if where else str(k), item) for k, item in v.items()]
        elif isinstance(v, list):
            todo += [(f"{where}[{i}]", item) for i, item in enumerate(v)]
    return None


def control(text: str, lines: bool = False) -> str | None:
    """The first control character in ``text`` as ``control character U+001B`` (None: there is
    none); ``lines``: a tab and a line feed are allowed."""
    m = (_CONTROL_IN_LINES if lines else _CONTROL).search(text)
    return None if m is None else f"control character U+{ord(m.group()):04X}"


def controls(value: Any, at: str, lines: bool = False) -> list[tuple[str, str]]:
    """``(key, what)`` for each string and key name in ``value`` (what ``loads_toml`` parsed, at
    the dotted key ``at``: ``build.env.CC``, ``patches[0].reason``) holding a control character
    (``control``); a key is named as far as it is printable text."""
    out: list[tuple[str, str]] = []
    todo: list[tuple[str, Any]] = [(at, value)]
    while todo:
        where, v = todo.pop()
        if isinstance(v, str):
            what = control(v, lines)
            if what:
                out.append((where, what))
        elif isinstance(v, dict):
            for k, item in v.items():
                sub = f"{where}.{k}" if where else str(k)
                what = control(k)
                if what:
                    out.append((sub, f"{what} in the key's name"))
                else:
                    todo.append((sub, item))
        elif isinstance(v, list):
            todo += [(f"{where}[{i}]", item) for i, item in enumerate(v)]
    return sorted(out)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
"""Where a URL starts in a string: its scheme and ``://``."""


def userinfo(text: str) -> str | None:
    """The first URL in ``text`` (a value, a key's or a table's name, anywhere in it, a URL
    inside a URL too) that holds a user name or password (``https://user:token@host/...``), as
    it may be shown: up to the next URL or a space, the credentials as ``***``; None when there
    is none. An ssh login name alone (``ssh://git@host/...``) is no secret."""
    if "://" not in text:
        return None
    starts = [m.start() for m in _URL.finditer(text)]
    for start, end in zip(starts, [*starts[1:], len(text)][:len(starts)], strict=True):
        url = text[start:end].split(None, 1)[0]
        scheme, _, rest = url.partition("://")
        netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        user, at, host = netloc.rpartition("@")
        if not at or (scheme.lower() in ("ssh", "git+ssh") and ":" not in user):
            continue
        return f"{scheme}://***@{host}{rest[len(netloc):]}"
    return None


def credentials(value: Any, at: str, allowed: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """``(key, url)`` for each string, key name or table name in ``value`` (what ``loads_toml``
    parsed, at the dotted key ``at``) that holds a URL with a user name or password
    (``userinfo``), whatever its type or place: a list's item, a ``when`` value, a value of the
    wrong type, ``[releases."https://u:p@h"]``. ``key`` is shown redacted (a key's name may be
    the secret); keys in ``allowed`` (dotted, ``publish.index``) may hold credentials."""
    out: list[tuple[str, str]] = []
    todo: list[tuple[str, Any]] = [(at, value)]
    while todo:
        where, v = todo.pop()
        if where in allowed:
            continue
        if isinstance(v, str):
            found = userinfo(v)
            if found:
                out.append((log.redact(where), found))
        elif isinstance(v, dict):
            for k, item in v.items():
                sub = f"{where}.{k}" if where else str(k)
                found = userinfo(str(k))
                if found:
                    out.append((log.redact(sub), found))
                else:
                    todo.append((sub, item))
        elif isinstance(v, list):
            todo += [(f"{where}[{i}]", item) for i, item in enumerate(v)]
    return sorted(out)


CREDENTIALS_HINT = ("put user names and passwords in ~/.netrc (or the file NETRC names) as "
                    "`machine <host> login <user> password <token>`, never in a file that is "
                    "committed or shared")

