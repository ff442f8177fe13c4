"""Network steps of a fetch, retried: ``classify`` decides whether a failure is worth another
try, ``retry`` tries a step up to three times with backoff (ROCMBUILD_RETRY_BACKOFF seconds,
doubled) while it is; a repository or commit that does not exist, a 404, a missing file are
reported at once with the tool's own words, a disk error of this machine with its path."""

from __future__ import annotations

import errno
import http.client
import re
import socket
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rocmbuild.core import fsutil, log, options
from rocmbuild.core.errors import CommandFailed, FetchError
from rocmbuild.core.log import redact
from rocmbuild.core.run import last_cause

ATTEMPTS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """Why a network step failed, as ``classify`` reads it."""

    transient: bool
    """Retrying may help (the network, a server's 5xx, a timeout); else it cannot."""
    cause: str
    """One line: the tool's own words (git's ``fatal: ...``) or the HTTP status / OS error."""


# What git, curl and servers say. A transient cause is retried; anything else is not.
_TRANSIENT = re.compile(
    r"could not resolve (host|proxy)|temporary failure in name resolution|timed? ?out|"
    r"connection (refused|reset|closed|aborted)|failed to connect|couldn't connect|"
    r"network is unreachable|no route to host|early eof|rpc failed|remote end hung up|"
    r"unexpected disconnect|returned error: (5\d\d|408|429)|\bHTTP (5\d\d|408|429)\b|"
    r"gnutls_handshake|ssl_read|short read|incomplete ?read|transfer closed",
    re.IGNORECASE,
)
_NET_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT,
               errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EPIPE}


def classify(exc: BaseException) -> Failure:
    """The one place that decides whether a failed fetch step is worth another try."""
    if isinstance(exc, urllib.error.HTTPError):
        code = exc.code
        why = (" (the server wants credentials: put them in ~/.netrc, or the file NETRC names, as "
               "`machine <host> login <user> password <token>`)" if code == 401 else "")
        return Failure(code in (408, 425, 429) or code >= 500, f"HTTP {code} {exc.reason}{why}")
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, socket.gaierror):
            return Failure(reason.errno == socket.EAI_AGAIN, f"cannot resolve the host: "
                           f"{reason.strerror or reason}")
        if isinstance(reason, OSError):
            return classify(reason)
        return Failure(bool(_TRANSIENT.search(str(reason))), str(reason))
    if isinstance(exc, CommandFailed):
        text = exc.detail or ""
        cause = last_cause(text) or exc.message
        if exc.returncode in (126, 127):  # the tool is missing: no retry brings it
            return Failure(False, exc.message)
        if "did not finish within" in exc.message:
            return Failure(True, exc.message)
        # git's output for one failed step is a few lines; a network word anywhere in it
        # (curl's "RPC failed" before git's "fatal: early EOF") makes it worth another try.
        return Failure(bool(_TRANSIENT.search(text or exc.message)), cause)
    if isinstance(exc, (TimeoutError, ConnectionError, http.client.HTTPException)):
        what = str(exc) or type(exc).__name__
        return Failure(True, f"{type(exc).__name__}: {what}" if str(exc) else what)
    if isinstance(exc, OSError):
        if exc.errno is None:  # our own "short read" and the like
            return Failure(True, str(exc))
        where = f"{exc.filename}: " if exc.filename else ""
        return Failure(exc.errno in _NET_ERRNOS, f"{where}{exc.strerror or exc}")
    return Failure(False, str(exc) or type(exc).__name__)


_RETRIED = (OSError, CommandFailed, http.client.HTTPException)
# OSErrors on this machine's own files (the cache, the workdir's logs), not on the source
_LOCAL_ERRNOS = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.EROFS, errno.ENOSPC,
                 errno.EDQUOT}


def retry(what: str, fn: Callable[[], T], where: Path) -> T:
    """``fn()``, tried up to ATTEMPTS times while ``classify`` calls its failure transient.
    ``where``: the local directory it writes (named when a disk error names no path)."""
    what = redact(what)
    delay = options.env_float("ROCMBUILD_RETRY_BACKOFF", 2.0)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return fn()
        except _RETRIED as exc:
            if isinstance(exc, OSError) and exc.errno in _LOCAL_ERRNOS:
                # this machine's disk, not the source: no retry, name the path
                raise fsutil.os_error(FetchError, what, exc, where,
                                      fsutil.WORKDIR_HINT) from exc
            failure = classify(exc)
            cause = redact(failure.cause)
            if not failure.transient:
                raise FetchError(
                    f"{what}: {cause}",
                    hint="retrying cannot fix this: check the recipe's [source] (url, commit, "
                    "submodules) and that it exists and is readable from here",
                ) from exc
            if attempt == ATTEMPTS:
                raise FetchError(
                    f"{what}: failed {ATTEMPTS} times; last error: {cause}",
                    hint="check the network or proxy (https_proxy) and that the server is up, "
                    "then run again; completed downloads are kept in the cache",
                ) from exc
            log.warn(f"{what}: {cause}; retrying in {delay:g}s "
                     f"(attempt {attempt + 1} of {ATTEMPTS})")
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover
