"""The build environment: one venv per recipe and requirements, under the workspace
(``<workdir>/envs/<recipe>-<digest>``), that holds the recipe's build requirements and sees the
host's torch and nothing else from the host (docs/build-env.md).

- Made with this Python (``-m venv --without-pip``: no interpreter-bundled pip or setuptools).
- The host's torch comes in through ``host-view/``, a directory of symlinks to exactly torch's
  own top-level packages and dist-info and those of what torch requires (recursively), at the
  host's installed versions, named in a ``.pth`` file of the venv. A requirement the recipe
  names itself (e.g. ``setuptools<80``) is left out of the view and installed instead, together
  with torch's own specifier for it, so the venv's copy is the one that is imported.
- The requirements (recipe ``build_requires``, the source tree's requirements file, torch's
  specifiers for what the view leaves out, and ``pip`` at this interpreter's version unless the
  recipe names pip) are installed by this interpreter's pip (``pip --python``) from the
  configured index: pip's own config and ``PIP_*`` variables apply.
- The wheels of the recipe's dependencies (``build.depends``, built first by the pipeline) are
  installed in the same pip call from their files (no index for them), checked against their
  sha256 first.
- The env's digest hashes the interpreter, the requirements as written, the dependency wheels
  (names, sha256) and the view (names, versions, paths): same inputs, same env, reused. A build
  env is complete only once ``rocmbuild-env.json`` is written (last); one without it (an
  interrupted creation) is removed and made again. A venv cannot be renamed into place (its
  scripts name their own path), so completeness is that marker, under a lock.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from rich.markup import escape

from rocmbuild.artifacts.buildfacts import BuildEnv, host_environ
from rocmbuild.artifacts.results import DependencyWheel
from rocmbuild.core import fsutil, lock, log, untrusted
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import BuildError, CommandFailed, ToolchainError
from rocmbuild.core.log import redact
from rocmbuild.core.run import run
from rocmbuild.plan.model import BuildEnvSpec

FORMAT = 1
MARKER = "rocmbuild-env.json"
MARKER_MAX = 4 << 20
VIEW = "host-view"
PTH = "_rocmbuild_host_view.pth"
@dataclass(frozen=True)
class Requested:
    text: str
    """The requirement as written."""
    origin: str
    """Where it is written, for messages: ``flash-attn.toml: build.build_requires``."""

    @property
    def name(self) -> str:
        return canonicalize_name(Requirement(self.text).name)


@dataclass(frozen=True)
class HostDist:
    """A host distribution the build env sees through the view."""

    name: str
    version: str
    entries: tuple[Path, ...]
    """Its top-level packages/modules and its dist-info, as absolute paths."""


# ----------------------------------------------------------------------------- requirements


_COMMENT = re.compile(r"(^|\s)#.*$")


def requested(spec: BuildEnvSpec, tree: Path, recipe_file: str) -> list[Requested]:
    """The recipe's requirements, then those of the requirements file in ``tree``."""
    out = [Requested(r, f"{recipe_file}: {spec.requires_key}") for r in spec.requires]
    if not spec.requirements_file:
        return out
    where = f"{recipe_file}: {spec.requirements_file_key}"
    path = (tree / spec.requirements_file).resolve()
    if not path.is_relative_to(tree.resolve()):
        raise BuildError(f"{where}: {spec.requirements_file!r} leaves the source tree",
                         hint="name a file inside the fetched tree")
    if not path.is_file():
        raise BuildError(f"{where}: no file {spec.requirements_file} in the source tree",
                         hint="check the path against the pinned source")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"{where}: cannot read {spec.requirements_file}: {exc}",
                         hint="it must be a UTF-8 requirements file") from exc
    for n, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        at = f"{spec.requirements_file}:{n}"
        if line.startswith("-"):
            raise BuildError(f"{where}: {at}: pip options are not read here ({line!r})",
                             hint="list requirements only; indexes come from pip's config")
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise BuildError(f"{where}: {at}: {line!r} is not a requirement "
                             f"({str(exc).splitlines()[0]})",
                             hint="one PEP 508 requirement per line") from exc
        if req.url:
            raise BuildError(f"{where}: {at}: {line!r} is a URL requirement",
                             hint="name a version from the index instead")
        out.append(Requested(line, f"{where} ({at})"))
    return out


# ----------------------------------------------------------------------------- the host view


def _entries(dist: importlib.metadata.Distribution) -> tuple[Path, ...]:
    """A distribution's top-level entries in its site directory (from RECORD; else
    top_level.txt), its dist-info included; not bin/ scripts, .pth files or __pycache__."""
    tops: list[str] = []
    record = dist.read_text("RECORD")
    # RECORD's first column, read as CSV without a PackagePath per file (torch lists ~20,000:
    # dist.files took ~0.3 s of every cold build); other metadata formats through dist.files
    paths = ([row[0] for row in csv.reader(record.splitlines()) if row] if record is not None
             else [str(f) for f in dist.files or ()])
    for path in paths:
        path = path.replace("\\", "/")
        while path.startswith("./"):
            path = path[2:]
        top = path.split("/", 1)[0]
        if top in ("", ".", "..", "__pycache__") or top.endswith(".pth"):
            continue
        if top not in tops:
            tops.append(top)
    if not tops:
        tops = [t.strip() for t in (dist.read_text("top_level.txt") or "").splitlines()
                if t.strip()]
        info = getattr(dist, "_path", None)  # the dist-info directory (PathDistribution)
        if isinstance(info, Path):
            tops.append(info.name)
    return tuple(Path(str(dist.locate_file(t))) for t in tops
                 if Path(str(dist.locate_file(t))).exists())


def host_view(exclude: set[str]) -> tuple[list[HostDist], list[Requested]]:
    """torch and what it requires (recursively, extras off), as installed in this Python; a
    requirement named in ``exclude`` (or not installed here) is returned as one to install,
    with torch's (or its dependant's) own specifier."""
    try:
        torch = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return [], []
    seen: dict[str, HostDist] = {}
    install: list[Requested] = []
    todo: list[importlib.metadata.Distribution] = [torch]
    while todo:
        dist = todo.pop(0)
        name = canonicalize_name(dist.metadata["Name"] or "")
        if not name or name in seen:
            continue
        seen[name] = HostDist(name, dist.version, _entries(dist))
        for text in dist.requires or ():
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            if dep in seen:
                continue
            req.marker = None
            origin = f"{name} {dist.version} (host)"
            if dep in exclude:
                install.append(Requested(str(req), origin))
                continue
            try:
                todo.append(importlib.metadata.distribution(dep))
            except importlib.metadata.PackageNotFoundError:
                install.append(Requested(str(req), origin))
    return list(seen.values()), install


def _link_view(view: Path, dists: list[HostDist]) -> None:
    view.mkdir()
    for d in dists:
        for entry in d.entries:
            link = view / entry.name
            if not link.is_symlink():  # a namespace package shared by two dists: the first
                link.symlink_to(entry)


# ----------------------------------------------------------------------------- making it


_FREEZE = r"""
import importlib.metadata as m, json, re, sys
view, seen = sys.argv[1], {}
for d in m.distributions():          # sys.path order: the first of a name is the one imported
    n = re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower()
    if n and n not in seen:
        seen[n] = [n, d.version, str(d.locate_file("")).startswith(view)]
print("@@ROCMBUILD@@" + json.dumps(sorted(seen.values())))
"""


def _digest(reqs: list[Requested], view: list[HostDist],
            wheels: Sequence[DependencyWheel] = ()) -> str:
    material = {
        "format": FORMAT,
        "python": [sys.version, str(Path(sys.base_prefix).resolve())],
        "requirements": [r.text for r in reqs],
        **({"wheels": [[w.wheel.name, w.sha256] for w in wheels]} if wheels else {}),
        "view": [[d.name, d.version, [str(e) for e in d.entries]] for d in view],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _read_marker(root: Path, digest: str) -> BuildEnv | None:
    try:
        data = untrusted.obj(untrusted.read_json(root / MARKER, MARKER_MAX), MARKER)
        if data.get("format") != FORMAT or data.get("digest") != digest:
            return None
        return BuildEnv(root, tuple(untrusted.text(r, "requirements")
                                    for r in data["requirements"]),
                        _pairs(data["packages"]), _pairs(data["host_packages"]), digest)
    except (OSError, ValueError, KeyError, TypeError):  # a marker that is not ours: rebuilt
        return None


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise untrusted.BadJson("expected a list")
    return tuple((untrusted.text(n, "name"), untrusted.text(v, "version"))
                 for n, v in value)


def _clean_env() -> dict[str, str]:
    """pip's environment: all of the user's pip configuration (the allow-list is for builds)."""
    return {**host_environ(os.environ), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _pip_progress(line: str) -> None:
    text = line.strip()
    if text.startswith(("Collecting ", "Processing ", "Downloading ", "Installing collected",
                        "Successfully")):
        log.info(f"      {escape(redact(text)[:150])}")


_NOT_FOUND = re.compile(r"(?:No matching distribution found for|Could not find a version that "
                        r"satisfies the requirement) (\S+)")


def _pip_failed(output: str, reqs: list[Requested], log_path: Path, returncode: int
                ) -> ToolchainError:
    """One line: the recipe key and requirement pip could not install, with pip's reason."""
    errors = [redact(ln.strip()[len("ERROR:"):].strip()) for ln in output.splitlines()
              if ln.strip().startswith("ERROR:")]
    cause = errors[-1] if errors else f"pip exited with {returncode}"
    hint = ("check the pin, and that the configured index / find-links (pip.conf, "
            f"PIP_INDEX_URL, PIP_FIND_LINKS) carries it; pip's output is in {log_path}")
    for err in errors:
        m = _NOT_FOUND.search(err)
        if m is None:
            continue
        try:
            name = canonicalize_name(Requirement(m.group(1)).name)
        except InvalidRequirement:
            continue
        for r in reqs:
            if r.name == name:
                return ToolchainError(f"{r.origin}: cannot install {r.text!r} into the build "
                                      f"environment: {cause}", hint=hint)
    origins = ", ".join(dict.fromkeys(r.origin for r in reqs if "(host)" not in r.origin))
    return ToolchainError(f"{origins}: cannot install the build requirements "
                          f"({', '.join(r.text for r in reqs)}): {cause}", hint=hint)


def _check_wheels(wheels: Sequence[DependencyWheel], recipe_file: str) -> None:
    for w in wheels:
        try:
            ok = w.wheel.is_file() and not w.wheel.is_symlink() and sha256_file(w.wheel) == w.sha256
        except OSError:
            ok = False
        if not ok:
            raise BuildError(f"{recipe_file}: build.depends: {w.wheel} is not the {w.recipe} wheel "
                             f"built for this build (sha256 {w.sha256[:16]}...)",
                             hint="it changed or went away since it was built or delivered: "
                             "build again")


def ensure(spec: BuildEnvSpec, tree: Path, envs_dir: Path, recipe: str, recipe_file: str,
           python_requires: tuple[str, ...], log_path: Path,
           wheels: Sequence[DependencyWheel] = ()) -> BuildEnv:
    """The build env for ``spec`` (requirements file read from ``tree``) with the dependency
    ``wheels`` installed: reused when one with the same digest is complete under ``envs_dir``,
    else made there."""
    _check_wheels(wheels, recipe_file)
    reqs = requested(spec, tree, recipe_file)
    names = {r.name for r in reqs}
    view, more = host_view(names)
    reqs += more
    if "pip" not in names:
        pip = importlib.metadata.version("pip")
        reqs.append(Requested(f"pip=={pip}", "the pip that runs the build (this interpreter's)"))
    digest = _digest(reqs, view, wheels)
    root = envs_dir / f"{recipe}-{digest[:16]}"
    with lock.held(envs_dir / f".{root.name}.lock", f"the build environment {root.name}"):
        env = _read_marker(root, digest)
        if env is None:
            shutil.rmtree(root, ignore_errors=True)
            env = _make(root, digest, reqs, view, log_path, [w.wheel for w in wheels])
            fsutil.write_atomic(root / MARKER, json.dumps(
                {"format": FORMAT, "digest": digest, "requirements": list(env.requirements),
                 "packages": env.packages, "host_packages": env.host_packages}, indent=1))
    have = {n for n, _ in (*env.packages, *env.host_packages)}
    missing = [d for d in python_requires if canonicalize_name(d) not in have]
    if missing:
        raise ToolchainError(
            f"{recipe_file}: build.python_requires: {', '.join(missing)} not in the build "
            "environment", hint="add them to build.build_requires (or the requirements file)")
    return env


def _make(root: Path, digest: str, reqs: list[Requested], view: list[HostDist],
          log_path: Path, wheels: Sequence[Path] = ()) -> BuildEnv:
    log.info(f"      making the build environment {escape(str(root))} "
             f"({len(reqs)} requirements, {len(view)} host distributions seen)")
    env = _clean_env()
    try:
        run([sys.executable, "-m", "venv", "--without-pip", str(root)], env=env,
            log_path=log_path)
    except CommandFailed as exc:
        raise ToolchainError(f"cannot make a venv with {sys.executable}: {exc.message}",
                             hint=f"see {log_path}") from exc
    site = next((root / "lib").glob("python3*/site-packages"))
    _link_view(root / VIEW, view)
    # After the venv's own site-packages on sys.path: what the venv installs wins.
    fsutil.write_atomic(site / PTH, f"{root / VIEW}\n")
    py = root / "bin" / "python"
    res = run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-input",
               *(r.text for r in reqs), *(str(w.absolute()) for w in wheels)], env=env,
              log_path=log_path, on_line=_pip_progress, check=False)
    if res.returncode != 0:
        raise _pip_failed(res.output, reqs, log_path, res.returncode)
    res = run([str(py), "-c", _FREEZE, str(root / VIEW)], env=env, log_path=log_path,
              capture=True, cwd=root)
    line = next(ln for ln in res.output.splitlines() if ln.startswith("@@ROCMBUILD@@"))
    try:  # printed by _FREEZE, but in a venv whose packages are the user's
        found = untrusted.loads(line[len("@@ROCMBUILD@@"):])
        rows = [(untrusted.text(n, "name"), untrusted.text(v or "", "version"),
                 untrusted.flag(h, "host")) for n, v, h in found]
    except (ValueError, TypeError) as exc:
        raise ToolchainError(f"build env {root}: the package list it printed is not one ({exc})",
                             hint=f"see {log_path}") from None
    return BuildEnv(
        root, tuple(r.text for r in reqs),
        tuple((n, v) for n, v, host in rows if not host),
        tuple((n, v) for n, v, host in rows if host), digest, created=True)
