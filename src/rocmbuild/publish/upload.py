"""Upload wheels to a real index server (pypiserver, devpi, Artifactory, ...) through twine.

Immutability does not rely on the server: before uploading, the project's simple page is read
and each wheel's sha256 compared with the server's (``#sha256=`` fragment, or the file itself
when the page has no sha256). Identical bytes are a no-op; different bytes are refused with both
hashes. Only then is twine asked to upload the rest.

Credentials: ``ROCMBUILD_INDEX_USER`` / ``ROCMBUILD_INDEX_PASSWORD``, else twine's own
``TWINE_USERNAME`` / ``TWINE_PASSWORD``, else the URL's ``user:password@``, else keyring (twine
looks it up); ``credentials(url, env)`` picks them from the mapping it is given (the command passes
os.environ). They are passed to twine in memory only; nothing here prints, logs or stores them,
and URLs are printed with any ``user:password@`` part removed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from rocmbuild import log
from rocmbuild.errors import PublishError
from rocmbuild.wheel import WheelInfo


def redact(url: str) -> str:
    """``url`` without a ``user:password@`` part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class Credentials:
    username: str | None
    password: str | None

    def __repr__(self) -> str:  # never show the password, even in a traceback
        return f"Credentials(username={self.username!r}, password=<hidden>)"


def credentials(url: str, env: Mapping[str, str] | None = None) -> Credentials:
    """The credentials for ``url``: from ``env`` (the command passes the credential variables),
    else the URL."""
    env = env or {}
    parts = urlsplit(url)
    user = (
        env.get("ROCMBUILD_INDEX_USER")
        or env.get("TWINE_USERNAME")
        or (unquote(parts.username) if parts.username else None)
    )
    password = (
        env.get("ROCMBUILD_INDEX_PASSWORD")
        or env.get("TWINE_PASSWORD")
        or (unquote(parts.password) if parts.password else None)
    )
    return Credentials(user, password)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


class _SameHostRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects only on the same host: pypiserver redirects unknown projects to PyPI,
    which must read as "not on this server"."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if urlsplit(newurl).netloc != urlsplit(req.full_url).netloc:
            raise urllib.error.HTTPError(newurl, 404, "redirected off this server", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _get(url: str, creds: Credentials) -> bytes | None:
    """GET ``url``; None on 404 (or an off-host redirect)."""
    clean = redact(url)
    req = urllib.request.Request(clean, headers={"Accept": "text/html"})
    if creds.username and creds.password:
        token = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    opener = urllib.request.build_opener(_SameHostRedirect)
    try:
        with opener.open(req, timeout=60) as resp:
            body: bytes = resp.read()
            return body
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise PublishError(
            f"{clean}: HTTP {exc.code} {exc.reason}",
            hint="check --simple-url and the credentials (ROCMBUILD_INDEX_USER/PASSWORD)",
        ) from None
    except urllib.error.URLError as exc:
        raise PublishError(
            f"{clean}: cannot connect ({exc.reason})",
            hint="is the index server running? check --index",
        ) from None


def server_files(simple_url: str, project: str, creds: Credentials) -> dict[str, tuple[str, str]]:
    """{filename: (href, sha256 or "")} from the server's simple page of ``project``."""
    page_url = urljoin(simple_url.rstrip("/") + "/", f"{project}/")
    body = _get(page_url, creds)
    if body is None:
        return {}
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    out: dict[str, tuple[str, str]] = {}
    for href in parser.hrefs:
        path, _, frag = href.partition("#")
        name = unquote(path.rsplit("/", 1)[-1])
        digest = frag[len("sha256=") :] if frag.startswith("sha256=") else ""
        out[name] = (urljoin(page_url, path), digest)
    return out


@dataclass(frozen=True)
class UploadResult:
    uploaded: tuple[str, ...]  # file names uploaded (or that would be, with dry_run)
    unchanged: tuple[str, ...]  # already on the server with the same sha256

    def to_json(self) -> dict[str, Any]:
        return {"uploaded": list(self.uploaded), "unchanged": list(self.unchanged)}


def upload(
    wheels: Sequence[WheelInfo],
    url: str,
    creds: Credentials,
    simple_url: str | None = None,
    dry_run: bool = False,
    verbose: bool = False,
) -> UploadResult:
    """Check immutability against the server, then upload the new wheels with twine."""
    clean_url = redact(url)
    simple = redact(simple_url) if simple_url else urljoin(clean_url.rstrip("/") + "/", "simple/")
    unchanged: list[str] = []
    todo: list[WheelInfo] = []
    cache: dict[str, dict[str, tuple[str, str]]] = {}
    for w in wheels:
        if w.name not in cache:
            cache[w.name] = server_files(simple, w.name, creds)
        existing = cache[w.name].get(w.filename)
        if existing is None:
            todo.append(w)
            continue
        href, digest = existing
        if not digest:  # page without sha256: hash the server's file
            body = _get(href, creds) or b""
            digest = hashlib.sha256(body).hexdigest()
        if digest != w.sha256:
            raise PublishError(
                f"{w.filename}: already on {simple} with different bytes "
                f"(server sha256 {digest}, new sha256 {w.sha256})",
                hint="files are immutable; bump the version or local label",
            )
        unchanged.append(w.filename)
    result = UploadResult(tuple(w.filename for w in todo), tuple(unchanged))
    if dry_run or not todo:
        return result
    _twine_upload([str(w.path) for w in todo], clean_url, creds, verbose)
    return result


def _twine_upload(dists: list[str], url: str, creds: Credentials, verbose: bool) -> None:
    try:
        from twine.commands import upload as twine_upload
        from twine.settings import Settings
    except ImportError as exc:  # pragma: no cover - twine is a dependency
        raise PublishError("twine is not installed", hint="pip install twine") from exc
    # twine logs request details at debug level; keep third-party loggers at WARNING so nothing
    # that could carry an Authorization header reaches a handler.
    for name in ("urllib3", "requests", "keyring"):
        logging.getLogger(name).setLevel(logging.WARNING)
    settings = Settings(
        repository_url=url,
        username=creds.username,
        password=creds.password,
        non_interactive=True,
        disable_progress_bar=True,
        verbose=verbose,
    )
    log.info(f"uploading {len(dists)} wheel(s) to {url}")
    try:
        # twine prints progress to stdout; stdout is reserved for --json data
        with contextlib.redirect_stdout(sys.stderr):
            twine_upload.upload(settings, dists)
    except Exception as exc:  # twine raises requests/twine errors; reduce to one safe line
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if creds.password:
            msg = msg.replace(creds.password, "<hidden>")
        raise PublishError(
            f"upload to {url} failed: {type(exc).__name__}: {msg}",
            hint="check the URL, the credentials (ROCMBUILD_INDEX_USER / ROCMBUILD_INDEX_PASSWORD "
            "or TWINE_USERNAME / TWINE_PASSWORD or keyring) and the server log",
        ) from None
