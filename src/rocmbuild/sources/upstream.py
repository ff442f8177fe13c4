"""What upstream has now: a git repository's refs (``git ls-remote``) and a package index's
released sdists (PEP 691 JSON). The nightly's change detection (nightly/changes.py) and the drift
report (sources/drift.py) ask through these functions; nothing else queries upstream.

Everything read is untrusted: a size cap, shapes and types checked, hex checked, versions parsed.
"""

from __future__ import annotations

import http.client
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmbuild.core import run, untrusted
from rocmbuild.core.errors import FetchError
from rocmbuild.core.log import redact

MAX_INDEX_BYTES = 16 << 20
"""A project's simple JSON page: flash-attn's is ~100 KB; a larger answer is refused."""
MAX_LS_REMOTE_LINES = 100_000
HTTP_TIMEOUT_S = 60.0
GIT_TIMEOUT_S = 120.0
ACCEPT = "application/vnd.pypi.simple.v1+json"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SDIST = re.compile(r"(.+?)-([^-]+?)(\.tar\.gz|\.zip)")

Fetch = Callable[[str], bytes]
"""GET a URL with the PEP 691 Accept header: the body (the tests pass a server on 127.0.0.1)."""


def http_get(url: str, timeout: float = HTTP_TIMEOUT_S) -> bytes:
    """GET ``url`` asking for PEP 691 JSON; at most ``MAX_INDEX_BYTES``, within ``timeout``
    seconds in all (a server that drips its answer is cut off too)."""
    req = urllib.request.Request(url, headers={"Accept": ACCEPT,
                                               "User-Agent": "rocmbuild-nightly"})
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            while size <= MAX_INDEX_BYTES:
                if time.monotonic() > deadline:
                    raise FetchError(f"pypi: {redact(url)}: no full answer within {timeout:g}s",
                                     hint="check the index URL and the network")
                chunk = resp.read(min(1 << 16, MAX_INDEX_BYTES + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise FetchError(f"pypi: {redact(url)}: {getattr(exc, 'reason', exc)}",
                         hint="check the index URL (pypi = ... in nightly.toml) and the network"
                         ) from exc
    body = b"".join(chunks)
    if len(body) > MAX_INDEX_BYTES:
        raise FetchError(f"pypi: {redact(url)}: the answer is larger than {MAX_INDEX_BYTES} "
                         "bytes", hint="is pypi = ... in nightly.toml a simple index?")
    return body


def sdist_name(url: str) -> tuple[str, str]:
    """(normalized project, version) from an sdist's file name
    (``flash_attn-2.8.3.tar.gz`` -> flash-attn, 2.8.3)."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    m = _SDIST.fullmatch(name)
    if not m:
        raise FetchError(f"{name[:200]!r} is not an sdist file name (NAME-VERSION.tar.gz)",
                         hint="follow = true needs the recipe's sdist url to end in the "
                         "sdist's file name")
    return str(canonicalize_name(m.group(1))), m.group(2)


def sdist_project(url: str) -> str:
    """The project name from an sdist's file name (``flash_attn-2.8.3.tar.gz`` -> flash-attn)."""
    return sdist_name(url)[0]


@dataclass(frozen=True)
class Release:
    """One released (not pre-release, not yanked) sdist on an index."""

    version: str
    url: str
    sha256: str


def sdist_releases(project: str, index: str, get: Fetch = http_get) -> tuple[Release, ...]:
    """Every non-prerelease, non-yanked sdist of ``project`` on ``index`` (PEP 691 JSON) that
    has a sha256, one per version (the first listed), oldest first."""
    page = urllib.parse.urljoin(index, f"{project}/")
    where = f"pypi: {redact(page)}"
    try:
        data = untrusted.loads(get(page))
    except untrusted.BadJson as exc:
        raise FetchError(f"{where}: not PEP 691 JSON ({exc})", hint="the index must answer "
                         f"Accept: {ACCEPT}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"{where}: no 'files' list", hint=f"the index must answer {ACCEPT}")
    found: dict[Version, Release] = {}
    for f in files:
        if not isinstance(f, dict):
            continue
        name, url, hashes = f.get("filename"), f.get("url"), f.get("hashes")
        if not (isinstance(name, str) and isinstance(url, str) and isinstance(hashes, dict)):
            continue
        if f.get("yanked") not in (None, False):
            continue
        m = _SDIST.fullmatch(name)
        sha = hashes.get("sha256")
        if not m or canonicalize_name(m.group(1)) != project or not isinstance(sha, str) \
                or not _HEX64.fullmatch(sha):
            continue
        try:
            version = Version(m.group(2))
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease or version in found:
            continue
        full = urllib.parse.urljoin(page, url)
        if urllib.parse.urlsplit(full).scheme not in ("https", "http"):
            continue
        found[version] = Release(str(version), full, sha)
    return tuple(found[v] for v in sorted(found))


def newest_sdist(project: str, index: str, get: Fetch = http_get) -> Release:
    """The newest non-prerelease, non-yanked sdist of ``project`` on ``index`` (PEP 691 JSON)."""
    releases = sdist_releases(project, index, get)
    if not releases:
        page = urllib.parse.urljoin(index, f"{project}/")
        raise FetchError(f"pypi: {redact(page)}: no released sdist with a sha256",
                         hint="pin the recipe's sdist (follow = false) or check the project name")
    return releases[-1]


def _ls_remote(url: str, patterns: tuple[str, ...], timeout: float) -> dict[str, str]:
    """ref name -> commit for the refs of ``url`` that match ``patterns`` (git's tail match)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private repository fails, never asks
    res = run.run(["git", "ls-remote", "--", url, *patterns], capture=True, timeout=timeout,
                  env=env, hint="check the recipe's git url and ref, and the network")
    found: dict[str, str] = {}
    for line in res.output.splitlines()[:MAX_LS_REMOTE_LINES]:
        sha, _, name = line.partition("\t")
        if _HEX40.fullmatch(sha) and name and len(name) <= 1000:
            found[name] = sha
    return found


def ls_remote(url: str, ref: str, timeout: float = GIT_TIMEOUT_S) -> str:
    """The commit ``ref`` (a branch, a tag, HEAD) names now in the repository at ``url``."""
    found = _ls_remote(url, (ref, f"refs/tags/{ref}^{{}}"), timeout)
    for name in (f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}", f"refs/tags/{ref}", ref):
        if name in found:
            return found[name]
    raise FetchError(f"git ls-remote {redact(url)}: no ref {ref!r}",
                     hint="set the recipe's source ref to a branch or tag that exists")


@dataclass(frozen=True)
class Refs:
    """What a repository has now: HEAD, one branch's head, and every tag (peeled: the commit
    an annotated tag names)."""

    head: str
    """HEAD's commit ("" when the repository has none)."""
    branch: str
    """The asked branch's commit ("" when none was asked or it does not exist)."""
    tags: tuple[tuple[str, str], ...]
    """(tag name, commit), sorted by name."""


def list_refs(url: str, branch: str = "", timeout: float = GIT_TIMEOUT_S) -> Refs:
    """HEAD, ``branch``'s head and the tags of the repository at ``url``, in one
    ``git ls-remote`` (its other branches are not asked: a big project has thousands)."""
    patterns = ("HEAD", *((f"refs/heads/{branch}",) if branch else ()), "refs/tags/*")
    found = _ls_remote(url, patterns, timeout)
    tags: dict[str, str] = {}
    for name, sha in found.items():
        if not name.startswith("refs/tags/"):
            continue
        tag = name[len("refs/tags/"):]
        if tag.endswith("^{}"):
            tags[tag[:-3]] = sha  # the peeled commit wins over the tag object
        else:
            tags.setdefault(tag, sha)
    return Refs(found.get("HEAD", ""), found.get(f"refs/heads/{branch}", "") if branch else "",
                tuple(sorted(tags.items())))
