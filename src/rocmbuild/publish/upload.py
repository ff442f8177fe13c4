"""Upload wheels to a real index server (pypiserver, devpi, Artifactory, ...) through twine.

Immutability does not rely on the server: before uploading, the project's simple page is read
and each wheel's sha256 compared with that of every file pip would take for the same one
(``checks.Identity``: name, version, build tag, overlapping tags; ``#sha256=`` fragment, or the
file itself when the page has no sha256). Identical bytes are a no-op; different bytes are
refused with both hashes. Only then is twine asked to upload the rest. A page cut short or
garbled is retried, then a PublishError naming the (redacted) URL.

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
import http.client
import logging
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core import log, untrusted
from rocmbuild.core.errors import PublishError
from rocmbuild.publish.checks import Identity
from rocmbuild.publish.target import IndexTarget, parse_index

__all__ = ["Credentials", "UploadResult", "credentials", "server_files", "upload"]

ATTEMPTS = 3  # a truncated or garbled reply is retried this many times in all
RETRY_DELAY = 0.5  # seconds, doubled after each attempt


@dataclass(frozen=True)
class Credentials:
    username: str | None
    password: str | None

    def __repr__(self) -> str:  # never show the password, even in a traceback
        return f"Credentials(username={self.username!r}, password=<hidden>)"


def credentials(url: str | IndexTarget, env: Mapping[str, str] | None = None) -> Credentials:
    """The credentials for ``url`` (a checked IndexTarget, or a URL string): from ``env`` (the
    command passes the credential variables), else the URL's ``user:password@``."""
    env = env or {}
    target = url if isinstance(url, IndexTarget) else parse_index(url)
    user = env.get("ROCMBUILD_INDEX_USER") or env.get("TWINE_USERNAME") or target.username
    password = env.get("ROCMBUILD_INDEX_PASSWORD") or env.get("TWINE_PASSWORD") or target.password
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


MAX_PAGE_BYTES = 256 << 20
"""The largest simple page read from the index server (bytes)."""


class _Garbled(Exception):
    """A reply that is cut short or not what was asked for (retried, then a PublishError)."""


def _get_once(url: str, creds: Credentials) -> tuple[bytes, str] | None:
    req = urllib.request.Request(url, headers={"Accept": "text/html"})
    if creds.username and creds.password:
        token = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    opener = urllib.request.build_opener(_SameHostRedirect)
    try:
        with opener.open(req, timeout=60) as resp:
            declared = resp.headers.get("Content-Length")
            if declared is not None and (not declared.isdigit() or len(declared) > 12
                                         or int(declared) > MAX_PAGE_BYTES):
                raise _Garbled(f"a page of {declared[:20]!r} bytes (at most {MAX_PAGE_BYTES})")
            # with a Content-Length: IncompleteRead when cut short of it; chunked: at most
            # one byte over the cap is read
            body: bytes = resp.read() if declared is not None else resp.read(MAX_PAGE_BYTES + 1)
            if len(body) > MAX_PAGE_BYTES:
                raise _Garbled(f"a page larger than {MAX_PAGE_BYTES} bytes")
            return body, resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 404:
            return None
        if exc.code >= 500:
            raise _Garbled(f"HTTP {exc.code} {exc.reason}") from None
        raise PublishError(
            f"{log.redact(url, strict=True)}: HTTP {exc.code} {exc.reason}",
            hint="check --simple-url and the credentials (ROCMBUILD_INDEX_USER/PASSWORD)",
        ) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (ConnectionResetError, TimeoutError)):
            raise _Garbled(f"connection lost ({type(exc.reason).__name__})") from None
        raise PublishError(
            f"{log.redact(url, strict=True)}: cannot connect "
            f"({log.redact(str(exc.reason), strict=True)})",
            hint="is the index server running? check --index",
        ) from None
    except http.client.IncompleteRead as exc:
        raise _Garbled(f"reply cut short after {len(exc.partial)} bytes") from None
    except (http.client.HTTPException, ConnectionError, TimeoutError) as exc:
        raise _Garbled(f"bad reply ({type(exc).__name__})") from None


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _same_host(url: str, other: str) -> bool:
    return urlsplit(url).netloc.rsplit("@", 1)[-1] == urlsplit(other).netloc.rsplit("@", 1)[-1]


def _get(
    url: str, creds: Credentials, check: Callable[[bytes, str], None] | None = None
) -> bytes | None:
    """GET ``url`` (shown and requested without credentials; they go in a header); None on 404
    (or an off-host redirect). A reply cut short, a 5xx or one ``check`` rejects is retried
    ATTEMPTS times in all, then a PublishError naming the URL."""
    clean = _without_userinfo(url)
    delay = RETRY_DELAY
    why = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            got = _get_once(clean, creds)
            if got is None:
                return None
            if check is not None:
                check(*got)
            return got[0]
        except _Garbled as exc:
            why = str(exc)
            if attempt < ATTEMPTS:
                log.warn(f"{log.redact(clean, strict=True)}: {why}; retrying "
                         f"({attempt}/{ATTEMPTS - 1})")
                time.sleep(delay)
                delay *= 2
    raise PublishError(
        f"{log.redact(clean, strict=True)}: truncated or garbled reply from the index server "
        f"after {ATTEMPTS} attempts ({why})",
        hint="check the server (and any proxy in front of it) and its log; then publish again",
    )


def _parse_page(body: bytes, content_type: str, page_url: str) -> list[tuple[str, str, str]]:
    """(filename, url, sha256 or "") of each file on a simple page (PEP 503 HTML or PEP 691
    JSON). Raises _Garbled for a page that is cut short or not a simple page."""
    ctype = content_type.split(";")[0].strip().lower()
    if "json" in ctype:
        try:
            files = untrusted.obj(untrusted.loads(body), "(top level)")["files"]
            if not isinstance(files, list):
                raise untrusted.BadJson("files: expected a list")
            out = []
            for i, f in enumerate(files):
                f = untrusted.obj(f, f"files[{i}]")
                digest = untrusted.obj(f.get("hashes", {}), f"files[{i}].hashes").get(
                    "sha256", "")
                out.append((untrusted.text(f.get("filename"), f"files[{i}].filename", 400),
                            urljoin(page_url, untrusted.text(f.get("url"), f"files[{i}].url")),
                            untrusted.text(digest, f"files[{i}].hashes.sha256", 128)))
            return out
        except KeyError:
            raise _Garbled("not a PEP 691 JSON page (no files)") from None
        except untrusted.BadJson as exc:
            raise _Garbled(f"not a PEP 691 JSON page ({exc})") from None
    if ctype and ctype not in ("text/html", "application/xhtml+xml"):
        raise _Garbled(f"unexpected content type {ctype!r}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _Garbled("the page is not UTF-8 text") from None
    low = text.lower()
    if "<html" in low and "</html>" not in low:
        raise _Garbled("the HTML page is cut short (no </html>)")
    parser = _Links()
    parser.feed(text)
    out = []
    for href in parser.hrefs:
        path, _, frag = href.partition("#")
        name = unquote(path.rsplit("/", 1)[-1])
        digest = frag[len("sha256=") :] if frag.startswith("sha256=") else ""
        out.append((name, urljoin(page_url, path), digest))
    return out


def server_files(simple_url: str, project: str, creds: Credentials) -> dict[str, tuple[str, str]]:
    """{filename: (href, sha256 or "")} from the server's simple page of ``project``."""
    page_url = urljoin(simple_url.rstrip("/") + "/", f"{project}/")
    parsed: list[tuple[str, str, str]] = []

    def check(body: bytes, ctype: str) -> None:
        parsed[:] = _parse_page(body, ctype, page_url)

    if _get(page_url, creds, check) is None:
        return {}
    return {name: (href, digest) for name, href, digest in parsed}


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
    clean_url = log.redact(url, strict=True)
    simple = (log.redact(simple_url, strict=True) if simple_url
              else urljoin(clean_url.rstrip("/") + "/", "simple/"))
    unchanged: list[str] = []
    todo: list[WheelInfo] = []
    cache: dict[str, dict[str, tuple[str, str]]] = {}
    for w in wheels:
        if w.name not in cache:
            cache[w.name] = server_files(simple, w.name, creds)
        ident = Identity.of(w)
        same = False
        for fname, (href, digest) in sorted(cache[w.name].items()):
            other = Identity.of_filename(fname)
            if other is None or not ident.clashes(other):
                continue
            if not digest:  # page without sha256: hash the server's file (credentials only
                # go to the index's own host, whatever the page links to)
                auth = creds if _same_host(href, simple) else Credentials(None, None)
                digest = hashlib.sha256(_get(href, auth) or b"").hexdigest()
            if digest != w.sha256:
                also = "" if fname == w.filename else f" as {fname} (same release for pip)"
                raise PublishError(
                    f"{w.filename}: already on {simple}{also} with different bytes "
                    f"(server sha256 {digest}, new sha256 {w.sha256})",
                    hint="files are immutable; bump the version or local label",
                )
            same = True
        if same:
            unchanged.append(w.filename)
            continue
        twin = next((t for t in todo if ident.clashes(Identity.of(t))), None)
        if twin is None:
            todo.append(w)
        elif twin.sha256 != w.sha256:
            raise PublishError(
                f"{w.filename}: given together with {twin.filename}, the same release for pip, "
                f"with different bytes (sha256 {twin.sha256} vs {w.sha256})",
                hint="publish one of them; one release names exactly one set of bytes",
            )
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
