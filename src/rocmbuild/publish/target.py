"""What an ``--index`` / ``--simple-url`` value is, decided once, and the one way to show a URL.

An index is either

- a **directory** (a static index): a plain path, or a ``file:`` URL without credentials
  (``file:///srv/wheels``, ``file://localhost/srv/wheels``); or
- a **server**: an ``http://`` or ``https://`` URL with a host (``HTTPS://`` is the same), which
  may carry ``user:password@`` (percent-encoded; taken as the credentials, never shown).

Anything else is refused as a usage error (exit 2) before anything is read or written: other
schemes (``ftp:``, ``s3:``, ``sftp:``, ``git+https:``), ``scheme:/x`` without ``//host``,
``//host/...``, scp-like ``user@host:/path``, a ``file:`` URL with credentials or another host, a
URL with ``@`` outside its host part (an unencoded ``/``, ``?`` or ``#`` in the password), a
query or fragment, whitespace or control characters inside the value, and any path holding
``@`` (it cannot be told from ``user:password@host``). A value is stripped of surrounding
whitespace first.

``core.log.redact(text, strict=True)`` is the only way such a value is shown: it removes
everything that could be a ``user:password@`` part, for any spelling (it is also applied to
values that are refused, so a refused value can be printed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rocmbuild.core.errors import UsageError
from rocmbuild.core.log import redact

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BAD_CHARS = re.compile(r"[\s\x00-\x1f\x7f]")

FORMS = "a directory, file:///dir, or http(s)://host/path/ (credentials as user:password@host)"


@dataclass(frozen=True)
class IndexTarget:
    """A checked index location: a directory (``path``) or a server (``url``)."""

    path: Path | None  # a directory index
    url: str | None  # a server URL without credentials (scheme lowercased)
    username: str | None = None  # from the URL, percent-decoded
    password: str | None = None

    @property
    def is_server(self) -> bool:
        return self.url is not None

    def __repr__(self) -> str:  # never show the password, even in a traceback
        return f"IndexTarget(path={self.path!r}, url={self.url!r}, password=<hidden>)"

    @property
    def shown(self) -> str:
        return self.url if self.url is not None else str(self.path)


def _refuse(where: str, value: str, why: str, hint: str | None = None) -> UsageError:
    return UsageError(f"{where}: {redact(value, strict=True)!r}: {why}",
                      hint=hint or f"give {FORMS}")


def _server(where: str, raw: str, scheme: str) -> IndexTarget:
    after = raw[len(scheme) + 1 :]
    if not after.startswith("//"):
        raise _refuse(where, raw, "an http(s) URL needs '//host' after the scheme",
                      f"write {scheme.lower()}://host/path/")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        raise _refuse(
            where, raw, "not a valid URL (bad host or port)",
            "percent-encode '@', ':', '/', '?' and '#' in a user name or password (%40 %3A %2F "
            "%3F %23)",
        ) from None
    if "@" in parts.path + parts.query + parts.fragment:
        raise _refuse(
            where, raw, "'@' outside the host part of the URL",
            "percent-encode '/', '?', '#' and '@' in a password (%2F %3F %23 %40)",
        )
    if parts.query or parts.fragment or raw.endswith(("?", "#")):
        raise _refuse(where, raw, "an index URL has no ?query or #fragment")
    host = parts.hostname
    if not host:
        raise _refuse(where, raw, "the URL has no host", f"write {scheme}://host/path/")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    url = f"{scheme.lower()}://{netloc}{parts.path or '/'}"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return IndexTarget(None, url, user, password)


def _file(where: str, raw: str) -> IndexTarget:
    parts = urlsplit(raw)
    if "@" in parts.netloc or parts.username is not None:
        raise _refuse(
            where, raw, "a file: URL cannot carry credentials",
            "give the directory itself, e.g. file:///srv/wheels or /srv/wheels",
        )
    if parts.netloc not in ("", "localhost") or not raw[5:].startswith("//"):
        raise _refuse(
            where, raw, "a file: URL must be file:///path (or file://localhost/path)",
            "give the directory itself, e.g. /srv/wheels",
        )
    if parts.query or parts.fragment:
        raise _refuse(where, raw, "an index URL has no ?query or #fragment")
    path = unquote(parts.path)
    if not path.startswith("/") or "@" in path:
        raise _refuse(where, raw, "not an absolute directory path without '@'")
    return IndexTarget(Path(path), None)


def parse_index(value: object, where: str = "--index") -> IndexTarget:
    """Decide what ``value`` (from ``where``: a flag, variable or config key) is. Raises
    UsageError, with the value redacted, for everything that is neither a directory nor an
    http(s) server."""
    if not isinstance(value, str):
        raise UsageError(f"{where}: must be a string, not {type(value).__name__}",
                         hint=f"give {FORMS}")
    raw = value.strip()
    if not raw:
        raise UsageError(f"{where}: is empty", hint=f"give {FORMS}")
    if _BAD_CHARS.search(raw):
        raise _refuse(where, raw, "contains whitespace or control characters")
    m = _SCHEME.match(raw)
    if m:
        scheme = m.group()[:-1]
        if scheme.lower() in ("http", "https"):
            return _server(where, raw, scheme)
        if scheme.lower() == "file":
            return _file(where, raw)
        if "@" in raw:
            raise _refuse(where, raw, "not a directory or an http(s) URL (it carries '@')")
        raise _refuse(
            where, raw, f"scheme {scheme.lower()!r} is not supported",
            f"give {FORMS}; for a directory whose name holds ':', start it with ./",
        )
    if raw.startswith("//"):
        raise _refuse(where, raw, "looks like a URL without a scheme ('//host/...')",
                      "write https://host/... for a server or /path for a directory")
    if "@" in raw:
        raise _refuse(
            where, raw, "a path with '@' is refused (it cannot be told from user:password@host)",
            f"give {FORMS}; rename or symlink a directory whose name holds '@'",
        )
    return IndexTarget(Path(raw), None)


def parse_server_url(value: object, where: str) -> IndexTarget:
    """``value`` must be an http(s) URL (``--simple-url``)."""
    target = parse_index(value, where)
    if not target.is_server:
        raise UsageError(
            f"{where}: {redact(str(value).strip(), strict=True)!r}: must be an http(s) URL",
            hint="give the server's simple API root, e.g. https://host/simple/",
        )
    return target
