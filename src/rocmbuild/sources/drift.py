"""Upstream drift: per pin (a recipe's source line: its default source, an alternative, a release
line), what upstream has now against what the recipe pins, and a verdict: ``current``,
``behind`` (with how many newer tags or releases, when that can be counted) or ``unknown`` (with
a one-line reason: the network refused, no such ref, a bad index answer).

The queries are sources/upstream.py's (``git ls-remote``, PEP 691 JSON), each with a timeout,
a few at a time, each asked once per report however many pins share it. The result is the same
for the same answers: entries keep the order the pins came in.

What counts as newer:

- a git pin whose ``ref`` is a branch (or no ref: HEAD): the branch's head is not the pinned
  commit. The commits in between are not counted (that needs the history, not ``ls-remote``);
  newer tags are counted when the pinned commit carries a version tag.
- a git pin whose ``ref`` is a tag: tags of the same form (the text before the version, e.g.
  ``v``) with a higher released version; the newest of the same major.minor series and the
  newest of all are shown. A tag that names another commit than the pin is ``behind`` too.
- an sdist pin: released versions of its project on the index above the pinned file's version.
- a git pin of a project that also has an sdist source in its recipe: the index's newest
  release is shown beside it (the verdict stays git's).
"""

from __future__ import annotations

import concurrent.futures
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from packaging.version import InvalidVersion, Version

from rocmbuild.core.errors import RocmbuildError
from rocmbuild.core.log import redact
from rocmbuild.sources import upstream

DEFAULT_TIMEOUT_S = 30
"""Each query's limit (``--upstream-timeout``, ROCMBUILD_UPSTREAM_TIMEOUT)."""
PARALLEL = 8
"""Queries at a time (processes for git, connections for the index)."""
_TAG = re.compile(r"([^0-9]{0,40})([0-9][0-9A-Za-z.+!_-]{0,60})")


@dataclass(frozen=True)
class Pin:
    """What a recipe line pins."""

    kind: str
    """``git`` or ``sdist``."""
    url: str
    """As the recipe says (shown redacted)."""
    commit: str = ""
    """git: the pinned 40-hex commit."""
    ref: str = ""
    """git: the branch or tag the recipe says the commit follows ("" : HEAD)."""
    sha256: str = ""
    """sdist: the pinned archive's sha256."""
    project: str = ""
    """git: the index project to show beside (its recipe also has an sdist source); "" none.
    An sdist pin's project comes from its file name."""
    remote: str = ""
    """git: where ``ls-remote`` asks, when not ``url`` (a local path made absolute)."""


@dataclass(frozen=True)
class LinePin:
    """One line of one recipe and its pin."""

    recipe: str
    line: str
    """``default``, a ``[source.alternatives.<name>]``'s name, or a release line's."""
    pin: Pin


class Verdict(Enum):
    CURRENT = "current"
    BEHIND = "behind"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Drift:
    """One pin against upstream."""

    recipe: str
    line: str
    kind: str
    url: str
    """Redacted."""
    pinned: str
    """git: the commit; sdist: the version in the file name."""
    ref: str
    """git: the recipe's ref; sdist: ""."""
    verdict: Verdict
    newer: int | None
    """How many newer tags or releases; None when not counted (a branch that moved)."""
    reason: str
    """One line: what is newer (behind), why not known (unknown); "" when current."""
    follows: str = ""
    """git: ``branch``, ``tag`` or ``HEAD``."""
    head: str = ""
    """git: the commit the followed branch, tag or HEAD names now."""
    tags: tuple[str, ...] = ()
    """git: newer tags (the newest in the pin's series, then the newest), or with no version
    to compare, the newest version tag."""
    latest: str = ""
    """The index's newest release (an sdist pin's project, or a git pin's ``project``)."""
    notes: tuple[str, ...] = ()
    """What could not be asked beside the verdict (the index for a git pin)."""

    def upstream(self) -> str:
        """What upstream has now, in a few words (the table's column)."""
        parts = []
        if self.head:
            parts.append(f"{self.ref or 'HEAD'} {self.head[:12]}")
        if self.tags:
            parts.append("tags " + ", ".join(self.tags))
        if self.latest:
            parts.append(f"pypi {self.latest}")
        return "; ".join(parts) or "-"

    def status(self) -> str:
        """``current``, ``behind: 3 newer``, ``behind: main moved``, ``unknown: why``."""
        if self.verdict is Verdict.CURRENT:
            return "current"
        if self.verdict is Verdict.BEHIND and self.newer:
            return f"behind: {self.newer} newer"
        return f"{self.verdict.value}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "line": self.line, "kind": self.kind, "url": self.url,
                "pinned": self.pinned, "ref": self.ref, "verdict": self.verdict.value,
                "newer": self.newer, "reason": self.reason, "follows": self.follows,
                "head": self.head, "tags": list(self.tags), "latest": self.latest,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class DriftReport:
    entries: tuple[Drift, ...]
    index: str
    """The index asked (redacted)."""

    def count(self, verdict: Verdict) -> int:
        return sum(1 for e in self.entries if e.verdict is verdict)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, **{v.value: self.count(v) for v in Verdict},
                "pins": [e.to_json() for e in self.entries]}


_EXITED = re.compile(r"git exited with code \d+ after [0-9.]+s: ")


def _one_line(exc: RocmbuildError) -> str:
    lines = exc.message.strip().splitlines()
    line = _EXITED.sub("git ls-remote: ", lines[0], count=1) if lines else exc.kind
    return redact(line)[:300]


@dataclass(frozen=True)
class _Answer:
    value: Any
    error: str = ""


def _ask(fn: Callable[[], Any]) -> _Answer:
    try:
        return _Answer(fn())
    except RocmbuildError as exc:  # the network, git, the index: this pin is unknown
        return _Answer(None, _one_line(exc))


def report(pins: Sequence[LinePin], index: str, timeout: float = DEFAULT_TIMEOUT_S,
           get: upstream.Fetch | None = None) -> DriftReport:
    """Every pin against upstream: ``git ls-remote`` for git pins, ``index`` (a PEP 691
    simple index) for sdist pins and the ``project`` of git pins. ``get``: the index client
    (default ``upstream.http_get`` with ``timeout``)."""
    fetch = get or functools.partial(upstream.http_get, timeout=timeout)
    git_keys = list(dict.fromkeys((p.pin.remote or p.pin.url, p.pin.ref) for p in pins
                                  if p.pin.kind == "git"))
    projects: list[str] = []
    for p in pins:
        project = p.pin.project if p.pin.kind == "git" else _sdist(p.pin.url).value
        if project and project not in projects:
            projects.append(project)
    jobs: dict[tuple[str, str, str], Callable[[], Any]] = {}
    for remote, ref in git_keys:
        jobs[("git", remote, ref)] = functools.partial(upstream.list_refs, remote, ref, timeout)
    for project in projects:
        jobs[("pypi", project, "")] = functools.partial(upstream.sdist_releases, project, index,
                                                        fetch)
    answers: dict[tuple[str, str, str], _Answer] = {}
    if jobs:
        with concurrent.futures.ThreadPoolExecutor(min(PARALLEL, len(jobs))) as pool:
            futures = {k: pool.submit(_ask, fn) for k, fn in jobs.items()}
            answers = {k: f.result() for k, f in futures.items()}
    entries = []
    for p in pins:
        if p.pin.kind == "git":
            refs = answers[("git", p.pin.remote or p.pin.url, p.pin.ref)]
            latest = answers.get(("pypi", p.pin.project, "")) if p.pin.project else None
            entries.append(_git(p, refs, latest))
        else:
            entries.append(_sdist_drift(p, answers))
    return DriftReport(tuple(entries), redact(index))


def _base(p: LinePin) -> Drift:
    pin = p.pin
    return Drift(p.recipe, p.line, pin.kind, redact(pin.url),
                 pin.commit if pin.kind == "git" else "", pin.ref, Verdict.UNKNOWN, None, "")


def _version_tag(name: str) -> tuple[str, Version] | None:
    """(the text before the version, the version) of a released version's tag, else None."""
    m = _TAG.fullmatch(name)
    if not m:
        return None
    try:
        v = Version(m.group(2))
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_devrelease else (m.group(1), v)


def _git(p: LinePin, refs_answer: _Answer, latest: _Answer | None) -> Drift:
    d = _base(p)
    notes: tuple[str, ...] = ()
    if latest is not None:
        if latest.error:
            notes = (f"pypi: {latest.error}",)
        elif latest.value:
            d = replace(d, latest=latest.value[-1].version)
        else:
            notes = (f"pypi: no released sdist of {p.pin.project}",)
    d = replace(d, notes=notes)
    if refs_answer.error:
        return replace(d, reason=refs_answer.error)
    refs: upstream.Refs = refs_answer.value
    ref, commit = p.pin.ref, p.pin.commit
    tags = dict(refs.tags)
    if ref and ref in tags:
        follows, head = "tag", tags[ref]
    elif ref and refs.branch:
        follows, head = "branch", refs.branch
    elif ref:
        return replace(d, reason=f"no branch or tag {ref[:100]!r} upstream")
    elif refs.head:
        follows, head = "HEAD", refs.head
    else:
        return replace(d, reason="the repository has no HEAD")
    d = replace(d, follows=follows, head=head)
    versions = {n: v for n, v in ((n, _version_tag(n)) for n in tags) if v is not None}
    base = versions.get(ref) if follows == "tag" else None
    if base is None:  # the newest version tag on the pinned commit, if any
        on_pin = sorted((v[1], n) for n, v in versions.items() if tags[n] == commit)
        base = versions[on_pin[-1][1]] if on_pin else None
    if base is None:
        newest = max(((v[1], n) for n, v in versions.items()), default=None)
        d = replace(d, tags=(newest[1][:100],) if newest else ())
        newer: list[tuple[Version, str]] = []
    else:
        newer = sorted((v[1], n) for n, v in versions.items()
                       if v[0] == base[0] and v[1] > base[1])
        series = [n for v, n in newer if v.release[:2] == base[1].release[:2]]
        shown = dict.fromkeys([*series[-1:], *(n for _, n in newer[-1:])])
        d = replace(d, tags=tuple(n[:100] for n in shown))
    count = len(newer) if base is not None else None
    if head != commit:
        what = (f"tag {ref} now names {head[:12]}, not the pin" if follows == "tag"
                else f"{ref or 'HEAD'} moved to {head[:12]}")
        more = f"; {len(newer)} newer tag(s)" if newer else ""
        return replace(d, verdict=Verdict.BEHIND, newer=count or None, reason=what + more)
    if follows == "tag" and newer:
        return replace(d, verdict=Verdict.BEHIND, newer=len(newer),
                     reason=f"{len(newer)} newer tag(s), newest {newer[-1][1][:100]}")
    return replace(d, verdict=Verdict.CURRENT, newer=0 if count is not None else None)


def _sdist(url: str) -> _Answer:
    return _ask(lambda: upstream.sdist_name(url)[0])


def _sdist_drift(p: LinePin, answers: dict[tuple[str, str, str], _Answer]) -> Drift:
    d = _base(p)
    named = _ask(lambda: upstream.sdist_name(p.pin.url))
    if named.error:
        return replace(d, reason=named.error)
    project, pinned = named.value
    d = replace(d, pinned=pinned)
    try:
        have = Version(pinned)
    except InvalidVersion:
        return replace(d, reason=f"{pinned[:60]!r} in the sdist's file name is not a version")
    got = answers[("pypi", project, "")]
    if got.error:
        return replace(d, reason=got.error)
    releases: tuple[upstream.Release, ...] = got.value
    if not releases:
        return replace(d, reason=f"no released sdist of {project} on the index")
    newer = [r for r in releases if Version(r.version) > have]
    d = replace(d, latest=releases[-1].version)
    if newer:
        return replace(d, verdict=Verdict.BEHIND, newer=len(newer),
                     reason=f"{len(newer)} newer release(s), newest {newer[-1].version}")
    return replace(d, verdict=Verdict.CURRENT, newer=0)
