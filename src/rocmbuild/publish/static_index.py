"""A static PEP 503 / 691 index in a directory, written atomically and never overwritten.

Layout (``<index>`` is ``--index DIR``, default ``<workdir>/index``)::

    <index>/.lock                         flock: one publisher at a time
    <index>/.generations/<stage>-<id>/    the real trees; never modified once live
    <index>/<stage> -> .generations/...   relative symlink, one per stage (stable, staging, ...)
    <index>/<stage>/files/<wheel>         wheels
    <index>/<stage>/files/<wheel>.metadata   the wheel's METADATA (PEP 658 / 714)
    <index>/<stage>/simple/index.html     root page (PEP 503) + index.json (PEP 691)
    <index>/<stage>/simple/<name>/index.html + index.json   one per normalized project name
    <index>/<stage>/<view>/simple/...     the same pages for a subset of the wheels, e.g. rocm6.2/
                                          (views.py: which wheels each view holds)

A transaction (publish or promote) builds a new generation next to the live one: unchanged files
and pages are hard links to the live generation (same inode, never rewritten), new wheels and the
touched pages are written to temp files, fsynced and renamed into place, the index pages last.
The commit is one ``rename(2)`` of the stage symlink, so a reader sees the old tree or the new
one, never a mix, and a kill -9 at any step leaves the served tree byte-identical. Leftovers of a
killed transaction (unreferenced generations, temp files) are removed by the next one, under the
lock. Writing into the new generation (the links, the page merge) is ``generation``'s.

Each project's ``index.json`` is the source of truth for its page; the root ``index.json`` keeps
``_latest`` / ``_files`` per project (PEP 691 reserves ``_`` keys for private use) so adding one
wheel rewrites only that project's two pages and the root's two pages.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core import fsutil, lock, log
from rocmbuild.core.errors import PublishError, UsageError
from rocmbuild.publish import pages, views
from rocmbuild.publish.checks import (
    Identity,
    check_not_broken,
    check_project_name,
    check_publishable,
    read_wheel_for_publish,
)
from rocmbuild.publish.generation import link_or_copy, link_tree, read_json, write, write_pages
from rocmbuild.publish.pages import FileEntry

GENERATIONS = ".generations"
LOCK_NAME = ".lock"
TMP_PREFIX = fsutil.TMP_PREFIX
DEFAULT_STAGE = "stable"

# The steps of a transaction, in order. StaticIndex(on_step=...) is called at each one; the CLI
# turns ROCMBUILD_PUBLISH_PAUSE_AT into a hook that pauses there, so a test can kill -9 the
# publisher at that step.
STEPS = (
    "locked",  # lock held, leftovers cleaned, nothing written
    "generation-linked",  # new generation created, live files hard-linked into it
    "wheel-written",  # after the first new wheel is in the new generation
    "files-written",  # all wheels + .metadata files written
    "project-pages-written",  # touched project pages written
    "root-written",  # root pages written; next is the symlink swap (the commit)
    "swapped",  # committed; old generation not yet removed
)


# ---------------------------------------------------------------------------------------------
# what a transaction does


@dataclass(frozen=True)
class ChangeEntry:
    file: str
    project: str
    version: str
    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "project": self.project,
            "version": self.version,
            "sha256": self.sha256,
            "size": self.size,
        }


@dataclass(frozen=True)
class Change:
    """What a transaction does (or would do, with dry_run); printed by --dry-run and --json."""

    stage: str
    added: tuple[ChangeEntry, ...] = ()
    unchanged: tuple[ChangeEntry, ...] = ()
    pages: tuple[str, ...] = ()  # relative to the stage dir

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "added": [a.to_json() for a in self.added],
            "unchanged": [u.to_json() for u in self.unchanged],
            "pages": list(self.pages),
        }


# How a transaction puts one wheel (and its .metadata) into the new generation's files/ dir.
PutFiles = Callable[[WheelInfo, Path], None]


# ---------------------------------------------------------------------------------------------
# the index


class StaticIndex:
    """A directory holding one or more stages. See the module docstring for the layout.

    ``on_step`` is called with each name in STEPS as a transaction reaches it (a test hook)."""

    def __init__(self, root: Path, on_step: Callable[[str], None] | None = None) -> None:
        self.root = Path(root).absolute()
        self._on_step = on_step

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    # -- reading -------------------------------------------------------------------------------

    def stage_path(self, stage: str, flag: str = "--stage") -> Path:
        check_stage_name(stage, flag)
        return self.root / stage

    def live(self, stage: str) -> Path | None:
        """The live generation directory of ``stage``, or None."""
        p = self.stage_path(stage)
        if p.is_symlink():
            return p.resolve()
        if p.exists():
            raise PublishError(
                f"{p}: exists but is not a stage symlink made by rocmbuild",
                hint=f"move it away; a stage is a symlink into {self.root / GENERATIONS}",
            )
        return None

    def stages(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name for p in self.root.iterdir() if p.is_symlink() and not p.name.startswith(".")
        )

    def project_files(self, stage: str, project: str) -> list[FileEntry]:
        gen = self.live(stage)
        if gen is None:
            return []
        data = read_json(gen / "simple" / project / "index.json")
        return list(data["files"]) if data else []

    def same_release(self, w: WheelInfo) -> list[tuple[str, str, str]]:
        """(stage, filename, sha256) of every published file pip would take for the same file as
        ``w`` (see ``checks.Identity``), read from the project's JSON (the source of truth, so
        large wheels are not re-hashed)."""
        ident = Identity.of(w)
        found: list[tuple[str, str, str]] = []
        for stage in self.stages():
            for f in self.project_files(stage, w.name):
                other = Identity.of_filename(f["filename"])
                if other is not None and ident.clashes(other):
                    found.append((stage, f["filename"], f["hashes"]["sha256"]))
        return found

    # -- locking and cleanup -------------------------------------------------------------------

    def locked(self) -> contextlib.AbstractContextManager[None]:
        return lock.held(self.root / LOCK_NAME, "the index lock")

    def cleanup(self) -> list[Path]:
        """Remove leftovers of killed transactions. Call with the lock held."""
        removed: list[Path] = []
        gens = self.root / GENERATIONS
        live = {self.live(s) for s in self.stages()}
        for p in self.root.iterdir():
            if p.name.startswith(TMP_PREFIX):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                removed.append(p)
        if gens.is_dir():
            for g in gens.iterdir():
                if g.resolve() not in live:
                    shutil.rmtree(g)
                    removed.append(g)
        for r in removed:
            log.debug(f"removed leftover {r}")
        return removed

    # -- the transaction -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked_clean(self) -> Iterator[None]:
        with self.locked():
            self.cleanup()
            self._step("locked")
            yield

    def _transact(
        self,
        stage: str,
        todo: Sequence[WheelInfo],
        put: PutFiles,
        *,
        fresh: bool = False,
        upload_time: Callable[[WheelInfo], str] | None = None,
        extra: Mapping[str, bytes] | None = None,
    ) -> None:
        """The one write path (call with the lock held): begin a new generation of ``stage``
        (hard links to the live one, or empty when ``fresh``), ``put`` each wheel's files into
        it, write the ``extra`` files (stage-relative path -> bytes: a stack's lock files), merge
        the wheels' entries into the pages, and commit with the symlink swap."""
        live = self.live(stage)
        new = self._begin(stage, None if fresh else live)
        now = pages.now_iso()
        new_files: dict[str, list[FileEntry]] = {}
        view_files: dict[str, dict[str, list[FileEntry]]] = {}
        for i, w in enumerate(todo):
            put(w, new / "files")
            if i == 0:
                self._step("wheel-written")
            when = upload_time(w) if upload_time else now
            entry = pages.file_entry(w, when)
            new_files.setdefault(w.name, []).append(entry)
            fallback = views.fallback_views(w)
            for view in views.views_of(w):
                view_files.setdefault(view, {}).setdefault(w.name, []).append(
                    pages.view_entry(entry, view in fallback))
        for rel, data in sorted((extra or {}).items()):
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            write(new / rel, data)
        self._step("files-written")
        write_pages(new, stage, new_files, view_files, self._step)
        self._commit(stage, live, new)

    def _begin(self, stage: str, base: Path | None) -> Path:
        gens = self.root / GENERATIONS
        gens.mkdir(exist_ok=True)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
        new = gens / f"{stage}-{stamp}-{secrets.token_hex(4)}"
        if base is not None:
            link_tree(base, new)
        (new / "files").mkdir(parents=True, exist_ok=True)
        (new / "simple").mkdir(exist_ok=True)
        self._step("generation-linked")
        return new

    def _commit(self, stage: str, live: Path | None, new: Path) -> None:
        # The pages and files were written without a directory fsync each; make them all
        # durable here, once, before the swap makes them visible.
        for d in [new, *(p for p in new.rglob("*") if p.is_dir() and not p.is_symlink())]:
            fsutil.fsync_dir(d)
        link = self.stage_path(stage)
        tmp = self.root / f"{TMP_PREFIX}{secrets.token_hex(4)}-{stage}"
        os.symlink(os.path.relpath(new, self.root), tmp)
        os.replace(tmp, link)  # the commit: one atomic rename
        fsutil.fsync_dir(self.root)
        self._step("swapped")
        if live is not None:
            shutil.rmtree(live)

    def _plan(self, stage: str, wheels: Sequence[WheelInfo]) -> tuple[Change, list[WheelInfo]]:
        """Check immutability against every stage; split into new and already-present."""
        added: list[ChangeEntry] = []
        unchanged: list[ChangeEntry] = []
        todo: list[WheelInfo] = []
        seen: list[WheelInfo] = []
        for w in wheels:
            twin = next((s for s in seen if Identity.of(s).clashes(Identity.of(w))), None)
            if twin is not None:
                if twin.sha256 != w.sha256:
                    raise PublishError(
                        f"{w.filename}: given together with {twin.filename}, the same release "
                        f"for pip, with different bytes (sha256 {twin.sha256} vs {w.sha256})",
                        hint="publish one of them; one release names exactly one set of bytes",
                    )
                continue
            seen.append(w)
            in_stage = False
            for other_stage, other_file, digest in self.same_release(w):
                if digest != w.sha256:
                    where = self.root / other_stage / "files" / other_file
                    same = "" if other_file == w.filename else f" as {other_file} (same release)"
                    raise PublishError(
                        f"{w.filename}: already published in stage {other_stage!r}{same} with "
                        f"different bytes (index sha256 {digest}, new sha256 {w.sha256})",
                        hint=f"files are immutable; bump the version or local label instead of "
                        f"replacing {where}",
                    )
                in_stage = in_stage or other_stage == stage
            entry = ChangeEntry(w.filename, w.name, str(w.version), w.sha256, w.size)
            if in_stage:
                unchanged.append(entry)
            else:
                added.append(entry)
                todo.append(w)
        touched: list[str] = []
        for view in sorted({v for w in todo for v in views.views_of(w)}):
            names = sorted({w.name for w in todo if view in views.views_of(w)})
            touched += [f"{view}/simple/{n}/index.{x}" for n in names for x in ("json", "html")]
            touched += [f"{view}/simple/index.json", f"{view}/simple/index.html"]
        if todo:
            touched += [f"simple/{n}/index.{x}" for n in sorted({w.name for w in todo})
                        for x in ("json", "html")] + ["simple/index.json", "simple/index.html"]
        return Change(stage, tuple(added), tuple(unchanged), tuple(touched)), todo

    # -- the operations ------------------------------------------------------------------------

    def publish(
        self, wheels: Sequence[WheelInfo], stage: str = DEFAULT_STAGE, dry_run: bool = False,
        extra: Mapping[str, bytes] | None = None,
    ) -> Change:
        """Add ``wheels`` to ``stage`` in one atomic transaction, with the ``extra`` files
        (stage-relative path under a view directory -> bytes; a stack's lock files, replaced
        when their bytes change)."""
        check_stage_name(stage)
        extra = dict(extra or {})
        for rel in extra:
            parts = rel.split("/")
            if len(parts) < 2 or not views.is_view_name(parts[0]) or any(
                    p in ("", ".", "..") for p in parts):
                raise UsageError(f"publish: {rel!r} is not a path under a view directory",
                                 hint="internal error, please report it")
        if dry_run:
            change = self._plan(stage, wheels)[0]
            return replace(change, pages=(*change.pages, *sorted(extra)))

        def put(w: WheelInfo, files: Path) -> None:
            fsutil.copy_atomic(w.path, files / w.filename, sync_dir=False)
            write(files / f"{w.filename}.metadata", w.metadata)

        with self._locked_clean():
            change, todo = self._plan(stage, wheels)  # re-checked under the lock
            live = self.live(stage)
            changed = {rel: data for rel, data in extra.items()
                       if live is None or not _same(live / rel, data)}
            if todo or changed:
                self._transact(stage, todo, put, extra=changed)
            return replace(change, pages=(*change.pages, *sorted(changed)))

    def promote(
        self,
        project: str,
        version: str,
        src: str,
        dst: str,
        dry_run: bool = False,
        broken_dir: Path | None = None,
    ) -> Change:
        """Copy every file of ``project==version`` from stage ``src`` to ``dst`` atomically."""
        check_stage_name(src, "--from")
        check_stage_name(dst, "--to")
        check_project_name(project, "promote NAME==VERSION")
        if src == dst:  # the command line's mistake: a usage error, before anything is read
            raise UsageError(
                f"promote: --from and --to are both {src!r}",
                hint="promote from one stage to another, e.g. staging -> stable",
            )
        name = canonicalize_name(project)
        try:
            want = Version(version)
        except InvalidVersion as exc:
            raise UsageError(
                f"promote: {version!r} is not a valid version",
                hint="give NAME==VERSION, e.g. flash-attn==2.8.3+rocm6.2",
            ) from exc

        def prepare() -> tuple[Change, list[WheelInfo], Path]:
            src_gen = self.live(src)
            if src_gen is None:
                raise PublishError(
                    f"promote: stage {src!r} does not exist in {self.root}",
                    hint=f"publish to it first: rocmbuild publish --stage {src}",
                )
            entries = [
                f for f in self.project_files(src, name) if pages.version_of(f["filename"]) == want
            ]
            if not entries:
                raise PublishError(
                    f"promote: no files for {name}=={want} in stage {src!r} of {self.root}",
                    hint=f"see {self.root / src / 'simple' / name / 'index.html'}",
                )
            infos = [read_wheel_for_publish(src_gen / "files" / f["filename"]) for f in entries]
            check_publishable(infos)
            if broken_dir is not None:
                check_not_broken(infos, broken_dir)
            change, todo = self._plan(dst, infos)
            return change, todo, src_gen

        if dry_run:
            return prepare()[0]
        with self._locked_clean():
            change, todo, src_gen = prepare()  # checked under the lock
            if todo:

                def put(w: WheelInfo, files: Path) -> None:
                    for fn in (w.filename, f"{w.filename}.metadata"):
                        link_or_copy(src_gen / "files" / fn, files / fn)

                self._transact(dst, todo, put)
            return change

    def regenerate(self, stage: str) -> float:
        """Rebuild every page of ``stage`` from its files (reads each wheel). Returns seconds.

        Used by the benchmark and for repair; one atomic transaction like publish.
        """
        t0 = time.perf_counter()
        with self._locked_clean():
            live = self.live(stage)
            if live is None:
                raise PublishError(f"stage {stage!r} does not exist in {self.root}")
            old_times: dict[str, str] = {}
            root_data = read_json(live / "simple" / "index.json") or {"projects": []}
            for p in root_data["projects"]:
                for f in self.project_files(stage, p["name"]):
                    old_times[f["filename"]] = f["upload-time"]
            wheels = [read_wheel_for_publish(wf) for wf in sorted((live / "files").glob("*.whl"))]
            now = pages.now_iso()

            def put(w: WheelInfo, files: Path) -> None:
                for fn in (w.filename, f"{w.filename}.metadata"):
                    link_or_copy(live / "files" / fn, files / fn)

            self._transact(
                stage,
                wheels,
                put,
                fresh=True,
                upload_time=lambda w: old_times.get(w.filename, now),
            )
        return time.perf_counter() - t0


def _same(path: Path, data: bytes) -> bool:
    """Whether the live file ``path`` (the index's own) holds ``data``."""
    try:
        return path.is_file() and not path.is_symlink() and path.read_bytes() == data
    except OSError:
        return False


_STAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_stage_name(stage: str, flag: str = "--stage") -> None:
    """The one check of a stage's name (``flag`` names where it came from: ``--stage``, or
    nightly.toml's ``publish.stage``): UsageError for a name that is not a plain stage name,
    ``''`` too, which never means the default stage."""
    if not _STAGE.match(stage) or stage in {"files", "simple"}:
        raise UsageError(
            f"{flag}: invalid stage name {stage!r}",
            hint="use a plain name such as stable or staging (letters, digits, '.', '_', '-'; "
            "not files or simple)",
        )
