"""A recipe's pins for the drift report (sources/drift.py): one per source line, the default
``[source]`` and each ``[source.alternatives.<name>]``, on each release line
(``[releases.<name>]``) when the recipe has them. A ``path`` source has no upstream and no pin."""

from __future__ import annotations

from pathlib import Path

from rocmbuild.core.errors import FetchError
from rocmbuild.recipe import readers
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.tables import Source
from rocmbuild.sources import upstream
from rocmbuild.sources.drift import LinePin, Pin


def shown_name(name: str) -> str:
    """A recipe as the report names it: ``flash-attn``, or a path's file stem (as a nightly
    cell id does)."""
    return Path(name).stem if name.endswith(".toml") else name


def lines(recipe: Recipe) -> list[tuple[str, Source]]:
    """(line name, source): ``default`` first, then the alternatives in the recipe's order; with
    release lines, each line's (``<line>``, ``<line>/<alternative>``), newest line first."""
    if not recipe.releases:
        return [("default", recipe.source), *recipe.alternatives.items()]
    out: list[tuple[str, Source]] = []
    for name in recipe.releases:
        on = recipe.on_line(name)
        out += [(name, on.source), *((f"{name}/{a}", s) for a, s in on.alternatives.items())]
    return out


def for_source(recipe: Recipe, source: str) -> tuple[str, ...]:
    """The pin names a build from ``source`` (``default`` or an alternative's name) may use: the
    source itself, or with release lines, that source on every line (the host picks the line
    when it builds: ``main``, ``2.8.3``, ... for ``default``; ``2.8.3/pypi``, ``2.8-fork/pypi``
    for ``pypi``)."""
    if not recipe.releases:
        return (source,)
    return tuple(line if source == "default" else f"{line}/{source}" for line in recipe.releases)


def pins(recipe: Recipe, name: str, only: tuple[str, ...] = ()) -> list[LinePin]:
    """The pins of ``recipe`` (shown as ``name``), of the lines in ``only`` when given. A git
    line of a recipe that also has an sdist source gets that sdist's project, so the report
    shows the index's newest release beside it."""
    project = ""
    for _, s in lines(recipe):
        if s.kind == "sdist":
            try:
                project = upstream.sdist_project(s.url)
            except FetchError:
                continue
            break
    out = []
    for line, s in lines(recipe):
        if only and line not in only:
            continue
        if s.kind == "git":
            local = readers.local_git_path(s.url, recipe.path.parent)
            out.append(LinePin(name, line, Pin("git", s.url, commit=s.commit, ref=s.ref,
                                               project=project,
                                               remote=str(local) if local else "")))
        elif s.kind == "sdist":
            out.append(LinePin(name, line, Pin("sdist", s.url, sha256=s.sha256)))
    return out
