"""Stacks (docs/stacks.md): every member of a stack file planned through the one plan path
(``planning.plan_for``), built against the same torch, checked for a mix, validated together in
one venv, published in one index transaction with a ``pylock.toml`` and a constraints file per
arch view.

- **One torch.** Every member's build env sees the host's torch through the same view
  (``buildtools.buildenv``: the torch this rocmbuild runs with), so ``plan`` records one torch.
  A recipe that installs its own torch into its build env (``torch`` in its build requirements)
  would compile against another one: the **mix check** reads each built wheel's local label
  (``torch<X.Y>.cxx11abi<flag>``) and ``rocmbuild.json``'s torch and refuses the set, one line
  naming the member and both torches. ``[torch] from = "recipe"``: the torch wheel is built first
  and is a member of the set; the stack's torch is then that wheel's version, and the host's
  (which the members compile against) must be it.
- **Validated together**: ``validate.runner.run`` over all the wheels in one fresh venv (install,
  the torch guard, every import, the audit, the kernel gate where a member has one, each
  member's own upstream tests where its recipe names them).
- **Published together**: one ``publish.api.publish`` call, one transaction, with the lock files
  (``publish.lockfile``) in it, so a reader of the index sees the whole new set or the old one.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.wheel import WheelInfo, unpublishable
from rocmbuild.core import gfx, log
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import (
    BuildError,
    PublishError,
    RecipeError,
    ToolchainError,
    UsageError,
)
from rocmbuild.core.log import escape
from rocmbuild.core.pep508 import major_minor
from rocmbuild.host.detect import Host
from rocmbuild.plan import planning, render, requirements
from rocmbuild.plan.model import Plan
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.stack import Member, Stack

_LABEL_TORCH = re.compile(r"(?:^|\.)torch(\d+\.\d+)\.cxx11abi(true|false)(?:\.|$)")


@dataclass(frozen=True)
class MemberPlan:
    member: Member
    plan: Plan

    def to_json(self) -> dict[str, Any]:
        p = self.plan
        return {"key": self.member.key, "recipe": p.recipe, "variant": p.variant,
                "release": p.release, "source": self.member.source,
                "options": dict(self.member.options), "cache_key": p.cache_key,
                "label": p.label(), "jobs": p.jobs, "release_why": p.release_why,
                "depends": [d.recipe for d in p.depends]}


@dataclass(frozen=True)
class StackPlan:
    stack: Stack
    archs: tuple[str, ...]
    torch: str
    """The torch the members compile against (the host's; "" when it has none)."""
    members: tuple[MemberPlan, ...]

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack.name, "file": str(self.stack.path),
                "archs": list(self.archs), "torch": self.torch,
                "torch_from": self.stack.torch_from, "members": [m.to_json() for m in self.members]}


def target(member: Member, arch: str, jobs: int | None = None,
           rocm_version: str | None = None) -> render.Target:
    """What ``rocmbuild build`` would get for this member with ``--arch arch``."""
    return render.Target(arch=arch, variant=member.variant, source=member.source, jobs=jobs,
                         rocm_version=rocm_version, options=member.options,
                         release=member.release)


def members(stack: Stack, arch: str) -> list[tuple[Recipe, render.Target]]:
    """Every member's recipe and target: what ``planning.host_for`` detects a host for."""
    return [(m.recipe, target(m, arch)) for m in stack.all_members]


def plan_stack(stack: Stack, arch: str, host: Host, cache: Path, jobs: int | None = None,
               rocm_version: str | None = None) -> StackPlan:
    """Every member's plan (``planning.plan_for``, as ``rocmbuild plan`` would make it) for the
    same archs, ROCm version and host; the host's torch checked against ``[torch] requires``."""
    torch = host.torch.version
    if stack.torch_requires:
        if not torch:
            raise ToolchainError(f"{stack.path.name}: torch.requires: {stack.torch_requires}, "
                                 "but this Python has no torch",
                                 hint="install the torch the stack is built against here")
        from packaging.version import InvalidVersion, Version

        try:
            Version(torch)
        except InvalidVersion:
            raise ToolchainError(f"the host's torch version {torch[:60]!r} is not a version",
                                 hint="check the torch installed here (or the --host file)"
                                 ) from None
        if not requirements.within(torch, stack.torch_requires):
            raise ToolchainError(f"{stack.path.name}: torch.requires: the host's torch {torch} "
                                 f"is not {stack.torch_requires}",
                                 hint="build the stack with a torch in that range")
    plans = tuple(MemberPlan(m, _plan_member(stack, m, arch, host, cache, jobs, rocm_version))
                  for m in stack.all_members)
    # the stack's archs: a member's that has any (an arch-independent one has none)
    archs = next((p.plan.archs for p in plans if p.plan.archs), ())
    if not archs:  # the lock files are per arch view: none could be written
        raise RecipeError([f"{stack.path.name}: members: no member has device code (each is "
                           "rocm_runtime = \"none\" or arch-independent), so the stack has no "
                           "arch view to lock"],
                          hint="a stack locks its wheels per arch view (pylock.toml per view); "
                          "add a member built for the archs, or install these wheels without a "
                          "stack")
    return StackPlan(stack, archs, torch, plans)


_MEMBER_FLAGS = {"--variant": "variant", "--opt": "options", "--release": "release",
                 "--source": "source"}
"""The build flags a member's keys stand for: the plan path names the flag, the stack names the
key the user wrote (``finetune.toml: members[1].variant``)."""


def _plan_member(stack: Stack, m: Member, arch: str, host: Host, cache: Path,
                 jobs: int | None, rocm_version: str | None) -> Plan:
    try:
        return planning.plan_for(m.recipe, target(m, arch, jobs, rocm_version), host,
                                 cache).plan
    except UsageError as exc:
        flag, sep, rest = exc.message.partition(": ")
        key = _MEMBER_FLAGS.get(flag)
        if not sep or key is None:
            raise
        opt, sep, why = rest.partition(": ")
        if key == "options" and sep and opt.startswith(f"{m.name}."):  # name.opt: its problem
            key, rest = f"options.{opt[len(m.name) + 1:]}", why
        raise UsageError(f"{stack.path.name}: {m.key}.{key}: {rest}",
                         hint=exc.hint, detail=exc.detail) from None


# ----------------------------------------------------------------------------- the mix check


@dataclass(frozen=True)
class Built:
    """One member's wheel, as the stack checks, validates and publishes it."""

    member: Member
    wheel: WheelInfo
    cached: bool


def _torch_of(w: WheelInfo) -> tuple[str | None, bool | None, str | None, bool | None]:
    """What ``w`` says of the torch it was built against: rocmbuild.json's version and C++ ABI
    flag, and its local label's ``X.Y`` and flag (``torch2.13.cxx11abitrue``)."""
    prov = (w.provenance or {}).get("torch")
    version = prov.get("version") if isinstance(prov, dict) else None
    abi = prov.get("cxx11_abi") if isinstance(prov, dict) else None
    m = _LABEL_TORCH.search(w.version.local or "")
    return (version if isinstance(version, str) and version else None,
            abi if isinstance(abi, bool) else None,
            m[1] if m else None, (m[2] == "true") if m else None)


def _abi(flag: bool | None) -> str:
    return "" if flag is None else f", cxx11abi {'true' if flag else 'false'}"


def mix_problems(stack: str, torch: str, torch_where: str, built: Sequence[Built]) -> list[str]:
    """One line per member built against another torch (or C++ ABI) than the stack's
    ``torch``: the member, its torch, the stack's. The stack's ABI flag is the first member's
    that was built against ``torch`` and recorded one."""
    ref_abi: bool | None = None
    for b in built:
        version, abi, _, label_abi = _torch_of(b.wheel)
        if version == torch and (abi if abi is not None else label_abi) is not None:
            ref_abi = abi if abi is not None else label_abi
            break
    out = []
    for b in built:
        version, abi, label_mm, label_abi = _torch_of(b.wheel)
        abi = abi if abi is not None else label_abi
        other = None
        if version is not None and version != torch:
            other = f"torch {version}{_abi(abi)}"
        elif label_mm is not None and label_mm != major_minor(torch):
            other = f"torch {label_mm} (its label {b.wheel.version.local}){_abi(abi)}"
        elif abi is not None and ref_abi is not None and abi != ref_abi:
            other = f"torch {version or label_mm}{_abi(abi)}"
        if other is not None:
            out.append(f"stack {stack}: {b.member.key} ({b.member.name}): "
                       f"{b.wheel.filename} was built against {other}; the stack's torch is "
                       f"{torch}{_abi(ref_abi)} ({torch_where})")
    return out


# ----------------------------------------------------------------------------- building


@dataclass(frozen=True)
class StackResult:
    plan: StackPlan
    built: tuple[Built, ...]
    report: Path
    locks: tuple[str, ...]
    """The lock files' paths, relative to the stage."""
    index: str
    stage: str
    published: tuple[str, ...]
    """Wheels the transaction added (the others were in the stage already)."""
    duration: float

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.plan.stack.name, "archs": list(self.plan.archs),
                "torch": self.plan.torch, "index": self.index, "stage": self.stage,
                "members": [{"key": b.member.key, "recipe": b.member.name,
                             "wheel": b.wheel.filename, "sha256": b.wheel.sha256,
                             "cached": b.cached} for b in self.built],
                "validation": str(self.report), "published": list(self.published),
                "locks": list(self.locks), "duration_s": round(self.duration, 3)}


@dataclass(frozen=True)
class Publishing:
    index: str
    """A directory index."""
    stage: str
    url: str
    """Where the index directory is served (its stages are ``<url><stage>/``); "" : a
    ``file://`` URL of the directory."""
    index_from: str = "--index"


BuildOne = Callable[[MemberPlan, int, int], tuple[Path, bool]]
"""Builds one member (its plan, its number, how many): (wheel, from the cache)."""


def build_stack(splan: StackPlan, ws: Workspace, build_one: BuildOne, publishing: Publishing,
                validate_kernels: bool = True) -> StackResult:
    """Build every member (``build_one``: the command's ``pipeline.build`` with its context),
    refuse a mix, validate the set together, publish it with its lock files."""
    from rocmbuild.publish.checks import read_wheel_for_publish

    t0 = time.monotonic()
    stage_url(publishing)  # a bad index, stage or URL is refused before anything is built
    name, n = splan.stack.name, len(splan.members)
    built: list[Built] = []
    for i, mp in enumerate(splan.members, 1):
        log.info(f"[bold]stack {escape(name)} [{i}/{n}] {escape(mp.member.name)}[/bold] "
                 f"({escape(mp.member.key)}: variant {escape(mp.plan.variant)}, "
                 f"{mp.plan.short_key})")
        wheel, cached = build_one(mp, i, n)
        built.append(Built(mp.member, read_wheel_for_publish(wheel), cached))
        log.info(f"stack {escape(name)} [{i}/{n}] {escape(mp.member.name)}: "
                 f"{'cached' if cached else 'built'} {escape(wheel.name)}")
    same = _same_project(name, built)
    if same:
        raise BuildError(same, hint="a stack installs one wheel of each project: drop one of "
                         "the members (nothing was validated or published)")
    torch, where = _stack_torch(splan, built)
    problems = mix_problems(name, torch, where, built)
    if problems:
        raise BuildError(problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1
                                        else ""),
                         hint="build every member against one torch: a recipe that installs "
                         "its own torch into its build env (build_requires) compiles against "
                         "that one; drop it, or build the stack on a host with that torch")
    never = [(b, why) for b in built if (why := unpublishable(b.wheel))]
    if never:
        _scratch(splan, ws, built, torch, never)
    report = _validate(splan, ws, built, validate_kernels)
    locks, published = _publish(splan, built, torch, publishing)
    return StackResult(splan, tuple(built), report, locks, publishing.index, publishing.stage,
                       published, time.monotonic() - t0)


def _same_project(stack: str, built: Sequence[Built]) -> str | None:
    """The line naming two members whose wheels are of one project (a lock cannot hold both);
    None when each project is built once. ``load_stack`` refuses the recipes that say so; the
    wheels are checked too, since a wheel's name is what its build made."""
    from packaging.utils import canonicalize_name

    seen: dict[str, Built] = {}
    for b in built:
        first = seen.setdefault(canonicalize_name(str(b.wheel.name)), b)
        if first is not b:
            return (f"stack {stack}: {b.member.key} ({b.member.name}) built "
                    f"{b.wheel.filename}, a wheel of the project {first.member.key} "
                    f"({first.member.name}) built as {first.wheel.filename}")
    return None


def _stack_torch(splan: StackPlan, built: Sequence[Built]) -> tuple[str, str]:
    """The stack's torch and where it came from: the torch wheel the stack built, or the
    host's."""
    if splan.stack.torch is not None:
        w = next(b.wheel for b in built if b.member is splan.stack.torch)
        return str(w.version), f"built by {w.filename}"
    if not splan.torch:
        raise ToolchainError(f"stack {splan.stack.name}: torch from the host, but this Python "
                             "has no torch", hint="install the torch to build the stack against")
    return splan.torch, "the host's, which every member's build env sees"


def _validate(splan: StackPlan, ws: Workspace, built: Sequence[Built], kernels: bool) -> Path:
    from rocmbuild.validate import runner
    from rocmbuild.validate.model import ValidateOptions

    stem = ws.root / "reports" / f"stack-{splan.stack.name}-{'-'.join(gfx.names(splan.archs))}"
    opts = ValidateOptions(workdir=str(ws.root), kernels=kernels, json_out=stem.with_suffix(
        ".json"), md_out=stem.with_suffix(".md"), model=kernels, stack_step=kernels)
    log.info(f"[bold]stack {escape(splan.stack.name)}: validating {len(built)} wheels together"
             "[/bold]")
    rep = runner.run([b.wheel.path for b in built], splan.archs, opts)
    runner.raise_if_failed(rep, opts, shown=False)
    return stem.with_suffix(".md")


def stage_url(pub: Publishing) -> tuple[Path, str]:
    """(the index directory, the URL its stage is served at, ending in ``/``): PublishError for
    an index that is no directory, UsageError for a bad stage or ``--index-url`` (one with a
    user or password is refused: the lock files are public)."""
    from urllib.parse import urlsplit

    from rocmbuild.publish.static_index import check_stage_name
    from rocmbuild.publish.target import parse_index

    target = parse_index(pub.index, pub.index_from)
    if target.path is None:
        raise PublishError(f"{pub.index_from}: a stack is published to a directory index (its "
                           "lock files are written in the same transaction)",
                           hint="give a directory, served by any web server")
    check_stage_name(pub.stage)
    if not pub.url:
        return target.path, f"{target.path.absolute().as_uri()}/{pub.stage}/"
    try:
        parts = urlsplit(pub.url)
        bad = (parts.scheme not in ("http", "https", "file") or parts.username is not None
               or parts.password is not None or bool(parts.query) or bool(parts.fragment)
               or (parts.scheme != "file" and not parts.hostname) or any(
                   c.isspace() or c in "\"'<>" for c in pub.url))
    except ValueError:
        bad = True
    if bad:
        raise UsageError("--index-url: not an http(s) or file URL without a user, password, "
                         "query or fragment (it is written into the public lock files)",
                         hint="e.g. --index-url https://wheels.example.org/ (the index "
                         "directory's URL; credentials belong in pip.conf / netrc)")
    return target.path, f"{pub.url.rstrip('/')}/{pub.stage}/"


BUILD_ONLY_INDEX = "build-only-index"
"""Under the workspace: the scratch index of a stack whose members can never be published."""


def _scratch(splan: StackPlan, ws: Workspace, built: Sequence[Built], torch: str,
             never: Sequence[tuple[Built, list[str]]]) -> None:
    """A stack with a member that is never published (a build-only ROCm torch, a partial
    build): built and mix-checked, it is neither validated (nothing built against a build-only
    torch can be imported) nor published; its wheels and lock files go to a scratch index in
    the workspace, marked BUILD-ONLY, and the command stops (exit 6: it did not deliver)."""
    scratch = ws.root / BUILD_ONLY_INDEX / splan.stack.name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (scratch / "BUILD-ONLY").write_text(
        "Never publish or install from this index: its wheels are\n"
        + "".join(f"- {b.wheel.filename}: {why[0]}\n" for b, why in never))
    locks, _ = _publish(splan, built, torch, Publishing(str(scratch), "build-only", ""),
                        build_only_scratch=True)
    b, why = never[0]
    raise BuildError(
        f"stack {splan.stack.name}: built and mix-checked, not validated or published: "
        f"{b.wheel.filename}: {why[0]}" + (f" (+{len(never) - 1} more)" if len(never) > 1
                                          else ""),
        hint=f"its wheels and {len(locks)} lock files are in {scratch} (marked BUILD-ONLY); "
        "build the stack on a ROCm host with a real ROCm torch to publish it")


def _publish(splan: StackPlan, built: Sequence[Built], torch: str, pub: Publishing,
             build_only_scratch: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from rocmbuild.publish import api, lockfile, views

    index_dir, stage = stage_url(pub)
    locks = []
    for view in gfx.names(splan.archs):
        missing = [b.wheel.filename for b in built if view not in views.views_of(b.wheel)]
        if missing:
            raise PublishError(f"stack {splan.stack.name}: {missing[0]} is not in the {view} "
                               "view (its device code does not cover it)",
                               hint="the audit of the validation says which archs it has")
        locks.append(lockfile.StackLock(
            splan.stack.name, view, stage,
            tuple(lockfile.Locked(str(b.wheel.name), str(b.wheel.version), b.wheel.filename,
                                  b.wheel.size, b.wheel.sha256, b.wheel.requires_python)
                  for b in built), torch, splan.stack.torch_from))
    extra = lockfile.files(locks)
    log.info(f"[bold]stack {escape(splan.stack.name)}: publishing {len(built)} wheels and "
             f"{len(extra)} lock files to {escape(str(index_dir))} ({pub.stage})[/bold]")
    res = api.publish([b.wheel.path for b in built],
                      api.PublishOptions(index=pub.index, stage=pub.stage,
                                         index_from=pub.index_from,
                                         build_only_scratch=build_only_scratch), extra)
    assert res.change is not None
    return tuple(sorted(extra)), tuple(a.file for a in res.change.added)
