"""Change detection: what upstream has now (a pin per cell), the plan and cache key with that pin,
and the decision, BUILD or SKIP, with the reasons.

A cell is SKIPPED when the cache holds a wheel for its key whose validation passed with its kernel
gate run, or with nothing for it to check (``Validation.fully_passed``: a ``build --validate`` on a
GPU-less host, whose gate had kernels and no GPU, does not count) and the staging stage has that
wheel. The reasons compare with the previous run's ``manifest.json``: a new
upstream commit or version, the recipe, a patch, the toolchain, or never built.

Everything read from the network is untrusted: a size cap, shapes checked, hex checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocmbuild.artifacts.wheel import parse_wheel_name
from rocmbuild.cache import store as cache
from rocmbuild.core import log, untrusted
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import CommandFailed, FetchError
from rocmbuild.core.log import redact
from rocmbuild.host.detect import Host
from rocmbuild.nightly.model import RUN_ID, Cell, CellPlan, Decision, Pin
from rocmbuild.plan import planning, render
from rocmbuild.plan.model import Plan
from rocmbuild.publish.static_index import StaticIndex
from rocmbuild.publish.target import parse_index
from rocmbuild.recipe import load, readers, search
from rocmbuild.recipe.model import Recipe
from rocmbuild.sources import upstream
from rocmbuild.sources.upstream import ACCEPT as ACCEPT  # the queries live there now
from rocmbuild.sources.upstream import Fetch as Fetch
from rocmbuild.sources.upstream import http_get as http_get
from rocmbuild.sources.upstream import ls_remote, sdist_project


@dataclass(frozen=True)
class Facts:
    """What a cell's build depended on, kept per cell in the manifest for the next run's
    reasons."""

    recipe_sha256: str
    patches: tuple[tuple[str, str], ...]
    toolchain: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        return {"recipe_sha256": self.recipe_sha256, "patches": dict(self.patches),
                "toolchain": dict(self.toolchain)}


@dataclass(frozen=True)
class Decided:
    """One cell's decision (build, skip, ...) with its plan and facts (what the manifest
    keeps)."""

    cell_plan: CellPlan
    plan: Plan | None
    facts: Facts | None
    build_tag: str | None = None
    """The wheel's PEP 427 build tag (``next_build_tag``)."""
    error: str = ""
    """Set when the cell's upstream could not be resolved (``git ls-remote`` or the index
    failed): the cell fails, the others go on."""


def newest_sdist(project: str, index: str, get: Fetch = http_get) -> Pin:
    """The newest non-prerelease, non-yanked sdist of ``project`` on ``index`` (PEP 691 JSON)."""
    r = upstream.newest_sdist(project, index, get)
    return Pin("sdist", r.version, url=redact(r.url, strict=True), sha256=r.sha256)


def resolve(cell: Cell, recipe: Recipe, pypi: str, get: Fetch = http_get) -> Pin:
    """The cell's pin: the recipe's own unless ``follow``; else what upstream has now."""
    source = (recipe.source if cell.source == "default"
              else recipe.alternatives.get(cell.source, recipe.source))
    if source.kind == "git":
        if not cell.follow:
            return Pin("recipe", source.commit, url=redact(source.url, strict=True))
        local = readers.local_git_path(source.url, recipe.path.parent)
        url = str(local) if local is not None else source.url
        try:
            commit = ls_remote(url, source.ref or "HEAD")
        except CommandFailed as exc:
            raise FetchError(f"{cell.id}: {exc.message}", hint=exc.hint) from exc
        return Pin("git", commit, url=redact(source.url, strict=True))
    if source.kind == "sdist":
        if not cell.follow:
            return Pin("recipe", source.sha256, url=redact(source.url, strict=True),
                       sha256=source.sha256)
        return newest_sdist(sdist_project(source.url), pypi, get)
    return Pin("recipe", source.kind)  # a path source: its tree's digest is in the key


def facts(plan: Plan) -> Facts:
    rocm = plan.rocm
    tool = {
        "rocm": rocm.version,
        "compiler": f"{rocm.compiler.path} {rocm.compiler.version}" if rocm.compiler else "",
        "python": plan.host.python_tag,
        "torch": plan.host.torch or "",
        "torch_hip": plan.host.torch_hip or "",
    }
    return Facts(plan.recipe_sha256,
                 tuple(sorted((p.file.name, p.sha256) for p in plan.patches)),
                 tuple(sorted(tool.items())))


def cell_target(cell: Cell, pin: Pin | None = None, build_tag: str | None = None
                ) -> render.Target:
    """The cell's Target: its arch, variant, source and options, with upstream's ``pin`` (a
    recipe pin: none) and ``build_tag``."""
    return render.Target(arch=cell.arch, variant=cell.variant, source=cell.source,
                         pin=pin if pin is not None and pin.kind != "recipe" else None,
                         build_tag=build_tag, options=cell.options)


def render_cell(cell: Cell, pin: Pin, host: planning.HostSource, cache: Path,
                build_tag: str | None = None) -> planning.Planned:
    """The cell's plan on ``host`` (``planning.plan_for``: MAX_JOBS from the units ``cache``
    learned, as `rocmbuild plan` has it)."""
    recipe = load.load(search.find_recipe(cell.recipe))
    return planning.plan_for(recipe, cell_target(cell, pin, build_tag), host, cache)


def _tag(before: Mapping[str, Any] | None) -> str | None:
    tag = before.get("build_tag") if before else None
    return tag if isinstance(tag, str) and re.fullmatch(r"[1-9]\d{0,8}", tag) else None


def next_build_tag(cell: Cell, pin: Pin, host: Host, before: Mapping[str, Any] | None,
                   cache: Path) -> tuple[Plan, str | None]:
    """The plan and its build tag. Upstream's version often stays the same across commits (and
    a changed patch or recipe gives new bytes under the same version), but an index is
    immutable by name, version and build tag: so when a cell's inputs differ from the previous
    run's (its key changed), the wheel gets the next build tag (1, 2, ...; pip prefers the
    highest among equal versions). Unchanged inputs keep the tag, and so the key."""
    tag = _tag(before)
    plan = render_cell(cell, pin, host, cache, tag).plan
    old_key = before.get("cache_key") if before else None
    if isinstance(old_key, str) and old_key != plan.cache_key:
        tag = str(int(tag or 0) + 1)
        plan = render_cell(cell, pin, host, cache, tag).plan
    return plan, tag


def _short(text: str) -> str:
    return text[:12]


def reasons(cell: Cell, pin: Pin, f: Facts, before: Mapping[str, Any] | None) -> list[str]:
    """Why a cell builds, compared with its entry in the previous run's manifest."""
    if not before:
        return ["never built"]
    out: list[str] = []
    old_pin = before.get("pin") if isinstance(before.get("pin"), dict) else {}
    assert isinstance(old_pin, dict)
    old_value = str(old_pin.get("value", ""))
    if pin.kind == "git" and old_value != pin.value:
        out.append(f"new upstream commit {_short(pin.value)}"
                   + (f" (was {_short(old_value)})" if old_value else ""))
    elif pin.kind == "sdist" and old_value != pin.value:
        out.append(f"new version {pin.value}" + (f" (was {old_value})" if old_value else ""))
    elif pin.kind == "recipe" and old_pin.get("kind") not in (None, "recipe"):
        out.append("follow turned off: the recipe's pin")
    old = before.get("facts") if isinstance(before.get("facts"), dict) else {}
    assert isinstance(old, dict)
    if old.get("recipe_sha256") != f.recipe_sha256:
        out.append("recipe changed")
    old_patches = old.get("patches") if isinstance(old.get("patches"), dict) else {}
    assert isinstance(old_patches, dict)
    changed = sorted(n for n, s in f.patches if old_patches.get(n) != s)
    changed += sorted(n for n in old_patches if n not in dict(f.patches))
    if changed:
        out.append("patch changed: " + ", ".join(str(n) for n in changed))
    old_tool = old.get("toolchain") if isinstance(old.get("toolchain"), dict) else {}
    assert isinstance(old_tool, dict)
    tool_changed = [k for k, v in f.toolchain if old_tool.get(k) != v]
    if tool_changed:
        out.append("toolchain changed: " + ", ".join(tool_changed))
    return out


def in_stage(index: str, stage: str, project: str, wheel: str) -> bool:
    """Whether the directory index's ``stage`` serves ``wheel`` (a server index: not checked
    here, the cache decides)."""
    target = parse_index(index, "publish.index")
    if target.path is None:
        return True
    idx = StaticIndex(target.path)
    if stage not in idx.stages():
        return False
    return any(f.get("filename") == wheel for f in idx.project_files(stage, project))


def wheel_project(name: str) -> tuple[str, str]:
    """(normalized project, version as spelled) from a wheel file name, through the one parser of
    wheel names: a name that is none is a WheelFormatError naming it."""
    parts = parse_wheel_name(name)
    return str(parts.name), parts.raw_version


def decide_cell(cell: Cell, pin: Pin, plan: Plan, f: Facts, ws: Workspace, index: str, stage: str,
           before: Mapping[str, Any] | None) -> CellPlan:
    why = reasons(cell, pin, f, before)
    entry = cache.lookup(ws.cache, plan.cache_key)
    short = plan.cache_key[:12]
    if entry is not None and entry.validation.fully_passed:
        project, _ = wheel_project(entry.wheel.name)
        if in_stage(index, stage, project, entry.wheel.name):
            return CellPlan(cell, pin, plan.cache_key, Decision.SKIP,
                            (f"validated wheel for key {short} in stage {stage}",))
        why.append(f"validated wheel for key {short} not in stage {stage}")
    elif entry is not None and entry.validation.status == "passed":  # the gate had no GPU
        why.append(f"the cached wheel for key {short} passed, but its kernel gate did not run "
                   "(no GPU where it was validated)")
    elif entry is not None:
        why.append(f"the cached wheel for key {short} is {entry.validation.status}")
    elif not why:  # same inputs as last night, but no wheel: that build failed, or a prune
        why.append(f"no wheel for key {short} in the cache")
    return CellPlan(cell, pin, plan.cache_key, Decision.BUILD, tuple(why))


def plan_cells(cells: Sequence[Cell], host: Host, ws: Workspace, index: str, stage: str,
               pypi: str, previous: Mapping[str, Mapping[str, Any]],
               get: Fetch = http_get) -> list[Decided]:
    """Resolve, render and decide every cell. ``previous``: cell id -> its entry in the last
    run's manifest."""
    out: list[Decided] = []
    for cell in cells:
        try:
            recipe = load.load(search.find_recipe(cell.recipe))
            pin = resolve(cell, recipe, pypi, get)
            before = previous.get(cell.id)
            plan, tag = next_build_tag(cell, pin, host, before, ws.cache)
            f = facts(plan)
            out.append(Decided(decide_cell(cell, pin, plan, f, ws, index, stage, before), plan, f,
                               tag))
        except FetchError as exc:  # upstream unreachable: this cell fails, the others go on
            # (a bad recipe or flag is the config's fault: it stops the run before any cell)
            msg = redact(f"{exc.kind}: {exc.message}".splitlines()[0], strict=True)[:500]
            log.warn(escape(f"{cell.id}: cannot be planned: {msg}"))
            out.append(Decided(CellPlan(cell, Pin("recipe", ""), "", Decision.BUILD,
                                        (f"cannot be planned: {msg}",)), None, None,
                               error=msg))
    return out


MAX_RUNS_READ = 400
MANIFEST_MAX = 64 << 20
"""The largest manifest.json read back (bytes)."""


def last_manifest(reports: Path, exclude: str = "") -> dict[str, dict[str, Any]]:
    """Each cell's entry in the newest earlier manifest that has it (a run with ``--only`` has
    only some cells); {} when there is none: then every cell reads ``never built``. Unreadable
    manifests are passed over."""
    if not reports.is_dir():
        return {}
    runs = sorted((p for p in reports.iterdir()
                   if RUN_ID.fullmatch(p.name) and p.name != exclude),
                  reverse=True)
    found: dict[str, dict[str, Any]] = {}
    for r in runs[:MAX_RUNS_READ]:
        try:
            data = untrusted.read_json(r / "manifest.json", MANIFEST_MAX)
        except (OSError, untrusted.BadJson):
            continue  # a run that died early, or a file that is not one: passed over
        cells = data.get("cells") if isinstance(data, dict) else None
        for c in cells if isinstance(cells, list) else ():
            if isinstance(c, dict) and isinstance(c.get("cell"), dict) \
                    and isinstance(c["cell"].get("id"), str):
                found.setdefault(c["cell"]["id"], c)
    return found
