"""A static PEP 503 / 691 index in a directory, written atomically and never overwritten.

Layout (``<index>`` is ``--index DIR``, default ``<workdir>/index``)::

    <index>/.lock                         flock: one publisher at a time
    <index>/.generations/<stage>-<id>/    the real trees; never modified once live
    <index>/<stage> -> .generations/...   relative symlink, one per stage (stable, staging, ...)
    <index>/<stage>/files/<wheel>         wheels
    <index>/<stage>/files/<wheel>.metadata   the wheel's METADATA (PEP 658 / 714)
    <index>/<stage>/simple/index.html     root page (PEP 503) + index.json (PEP 691)
    <index>/<stage>/simple/<name>/index.html + index.json   one per normalized project name

A transaction (publish or promote) builds a new generation next to the live one: unchanged files
and pages are hard links to the live generation (same inode, never rewritten), new wheels and the
touched pages are written to temp files, fsynced and renamed into place, the index pages last.
The commit is one ``rename(2)`` of the stage symlink, so a reader sees the old tree or the new
one, never a mix, and a kill -9 at any step leaves the served tree byte-identical. Leftovers of a
killed transaction (unreferenced generations, temp files) are removed by the next one, under the
lock.

Each project's ``index.json`` is the source of truth for its page; the root ``index.json`` keeps
``_latest`` / ``_files`` per project (PEP 691 reserves ``_`` keys for private use) so adding one
wheel rewrites only that project's two pages and the root's two pages.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import html
import json
import os
import secrets
import shutil
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from rocmbuild import lock, log
from rocmbuild.digest import sha256_file
from rocmbuild.errors import PublishError

API_VERSION = "1.1"
GENERATIONS = ".generations"
LOCK_NAME = ".lock"
TMP_PREFIX = ".tmp-"
DEFAULT_STAGE = "stable"

# Test hook: ROCMBUILD_PUBLISH_PAUSE_AT=<step> writes ROCMBUILD_PUBLISH_PAUSE_MARKER (a path) and
# sleeps at that step, so a test can kill -9 the publisher there. Steps, in order:
STEPS = (
    "locked",  # lock held, leftovers cleaned, nothing written
    "generation-linked",  # new generation created, live files hard-linked into it
    "wheel-written",  # after the first new wheel is in the new generation
    "files-written",  # all wheels + .metadata files written
    "project-pages-written",  # touched project pages written
    "root-written",  # root pages written; next is the symlink swap (the commit)
    "swapped",  # committed; old generation not yet removed
)


def _pause(step: str) -> None:
    if os.environ.get("ROCMBUILD_PUBLISH_PAUSE_AT") != step:
        return
    marker = os.environ.get("ROCMBUILD_PUBLISH_PAUSE_MARKER")
    if marker:
        Path(marker).write_text(step)
    time.sleep(float(os.environ.get("ROCMBUILD_PUBLISH_PAUSE_SECONDS", "60")))


# ---------------------------------------------------------------------------------------------
# wheels


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    filename: str
    project: str  # normalized
    version: Version
    sha256: str
    size: int
    metadata: bytes  # the METADATA file, served as <wheel>.metadata
    requires_python: str | None


def read_wheel(path: Path) -> WheelInfo:
    """Parse the filename, read METADATA from the zip, hash the bytes. Raises PublishError."""
    path = Path(path)
    if not path.is_file():
        raise PublishError(f"{path}: no such wheel file", hint="give the path of a built .whl")
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise PublishError(
            f"{path}: not a wheel filename ({exc})",
            hint="wheel names look like name-1.0-py3-none-any.whl (PEP 427)",
        ) from exc
    try:
        with zipfile.ZipFile(path) as zf:
            metas = [
                n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            if len(metas) != 1:
                raise PublishError(
                    f"{path}: expected one *.dist-info/METADATA, found {len(metas)}",
                    hint="rebuild the wheel; it is not a valid PEP 427 wheel",
                )
            metadata = zf.read(metas[0])
    except zipfile.BadZipFile as exc:
        raise PublishError(f"{path}: not a zip file ({exc})", hint="rebuild the wheel") from exc
    headers = HeaderParser().parsestr(metadata.decode("utf-8", "replace"))
    meta_name = headers.get("Name")
    if not meta_name or canonicalize_name(meta_name) != name:
        raise PublishError(
            f"{path}: METADATA Name {meta_name!r} does not match the filename's {name!r}",
            hint="rebuild the wheel",
        )
    try:
        meta_version = Version(headers.get("Version", ""))
    except InvalidVersion:
        meta_version = None
    if meta_version != version:
        raise PublishError(
            f"{path}: METADATA Version {headers.get('Version')!r} does not match the filename's "
            f"{version}",
            hint="rebuild the wheel",
        )
    return WheelInfo(
        path=path,
        filename=path.name,
        project=name,
        version=version,
        sha256=sha256_file(path),
        size=path.stat().st_size,
        metadata=metadata,
        requires_python=headers.get("Requires-Python"),
    )


# ---------------------------------------------------------------------------------------------
# broken wheels


def check_not_broken(wheels: Sequence[WheelInfo], broken_dir: Path) -> None:
    """Refuse wheels that failed validation.

    Rule: a wheel is broken when its path is inside ``broken_dir``, or when a ``*.whl`` anywhere
    under ``broken_dir`` has the same sha256 (same bytes copied elsewhere).
    """
    broken_dir = broken_dir.resolve()
    for w in wheels:
        if w.path.resolve().is_relative_to(broken_dir):
            raise PublishError(
                f"{w.path}: failed validation (it is in {broken_dir})",
                hint="fix and rebuild it; wheels in the broken dir are never published",
            )
    if not broken_dir.is_dir():
        return
    by_size: dict[int, list[WheelInfo]] = {}
    for w in wheels:
        by_size.setdefault(w.size, []).append(w)
    for bad in broken_dir.rglob("*.whl"):
        try:
            size = bad.stat().st_size
        except OSError:
            continue
        if size not in by_size:  # cheap prefilter: only hash same-size files
            continue
        digest = sha256_file(bad)
        for w in by_size[size]:
            if w.sha256 == digest:
                raise PublishError(
                    f"{w.path}: failed validation (same sha256 {digest} as {bad})",
                    hint="fix and rebuild it; wheels in the broken dir are never published",
                )


# ---------------------------------------------------------------------------------------------
# atomic file helpers


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, rename over ``path``."""
    tmp = path.with_name(f"{TMP_PREFIX}{secrets.token_hex(4)}-{path.name}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def copy_atomic(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f"{TMP_PREFIX}{secrets.token_hex(4)}-{dst.name}")
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        shutil.copyfileobj(fi, fo, 1 << 20)
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, dst)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        copy_atomic(src, dst)


def _link_tree(src: Path, dst: Path) -> None:
    """Mirror ``src`` into ``dst`` with hard links (falls back to copies)."""
    for dirpath, _dirs, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for fn in filenames:
            _link_or_copy(Path(dirpath) / fn, dst / rel / fn)


# ---------------------------------------------------------------------------------------------
# the index


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _file_entry(w: WheelInfo, upload_time: str) -> dict[str, Any]:
    meta_sha = hashlib.sha256(w.metadata).hexdigest()
    return {
        "filename": w.filename,
        "url": f"../../files/{quote(w.filename)}",
        "hashes": {"sha256": w.sha256},
        "requires-python": w.requires_python,
        "core-metadata": {"sha256": meta_sha},
        "dist-info-metadata": {"sha256": meta_sha},
        "yanked": False,
        "size": w.size,
        "upload-time": upload_time,
    }


def _version_of(filename: str) -> Version:
    return parse_wheel_filename(filename)[1]


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "h1{font-size:1.5em}table{border-collapse:collapse}"
    "th,td{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}"
    "th{background:#f0f3f7}code{font-size:.9em}a{color:#0645ad}"
)


def _page(title: str, heading: str, body: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        '<meta charset="utf-8">\n'
        f'<meta name="pypi:repository-version" content="{API_VERSION}">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(heading)}</h1>\n{body}</body>\n</html>\n"
    ).encode()


def render_project_html(name: str, stage: str, files: list[dict[str, Any]]) -> bytes:
    rows = []
    for f in files:
        sha = f["hashes"]["sha256"]
        attrs = [f'href="{html.escape(f["url"])}#sha256={sha}"']
        if f.get("requires-python"):
            attrs.append(f'data-requires-python="{html.escape(f["requires-python"])}"')
        if f.get("core-metadata"):
            m = f["core-metadata"]["sha256"]
            attrs.append(f'data-dist-info-metadata="sha256={m}"')
            attrs.append(f'data-core-metadata="sha256={m}"')
        rows.append(
            f"<tr><td><a {' '.join(attrs)}>{html.escape(f['filename'])}</a></td>"
            f"<td>{html.escape(str(_version_of(f['filename'])))}</td>"
            f'<td>{f["size"]:,}</td><td><code title="{sha}">{sha[:12]}</code></td>'
            f"<td>{html.escape(f['upload-time'][:19].replace('T', ' '))} UTC</td></tr>\n"
        )
    body = (
        f"<p>Stage <b>{html.escape(stage)}</b> &middot; {len(files)} file(s) &middot; "
        '<a href="../">all projects</a></p>\n'
        "<table>\n<tr><th>File</th><th>Version</th><th>Size (bytes)</th><th>sha256</th>"
        "<th>Uploaded</th></tr>\n" + "".join(rows) + "</table>\n"
    )
    return _page(f"Links for {name}", f"Links for {name}", body)


def render_root_html(stage: str, projects: list[dict[str, Any]]) -> bytes:
    rows = "".join(
        f'<tr><td><a href="{quote(p["name"])}/">{html.escape(p["name"])}</a></td>'
        f"<td>{html.escape(p.get('_latest', ''))}</td><td>{p.get('_files', 0)}</td></tr>\n"
        for p in projects
    )
    body = (
        f"<p>Stage <b>{html.escape(stage)}</b> &middot; {len(projects)} project(s). "
        "Install with <code>pip install --index-url &lt;this page's URL&gt; NAME</code>.</p>\n"
        "<table>\n<tr><th>Project</th><th>Latest</th><th>Files</th></tr>\n" + rows + "</table>\n"
    )
    return _page(f"Simple index ({stage})", f"Simple index: {stage}", body)


def _project_json(name: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    versions = sorted({_version_of(f["filename"]) for f in files})
    return {
        "meta": {"api-version": API_VERSION},
        "name": name,
        "versions": [str(v) for v in versions],
        "files": files,
    }


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode()


@dataclass
class Change:
    """What a transaction does; printed by --dry-run and --json."""

    stage: str
    added: list[dict[str, Any]] = field(default_factory=list)  # {file, sha256, project, size}
    unchanged: list[dict[str, Any]] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)  # relative to the stage dir

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "added": self.added,
            "unchanged": self.unchanged,
            "pages": self.pages,
        }


class StaticIndex:
    """A directory holding one or more stages. See the module docstring for the layout."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()

    # -- reading -------------------------------------------------------------------------------

    def stage_path(self, stage: str) -> Path:
        _check_stage_name(stage)
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

    def _read_json(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            return None

    def project_files(self, stage: str, project: str) -> list[dict[str, Any]]:
        gen = self.live(stage)
        if gen is None:
            return []
        data = self._read_json(gen / "simple" / project / "index.json")
        return list(data["files"]) if data else []

    def existing_sha256(self, project: str, filename: str) -> dict[str, str]:
        """{stage: sha256} for every stage listing ``filename`` (read from the project's JSON,
        the source of truth, so large wheels are not re-hashed)."""
        found: dict[str, str] = {}
        for stage in self.stages():
            for f in self.project_files(stage, project):
                if f["filename"] == filename:
                    found[stage] = f["hashes"]["sha256"]
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

    # -- writing -------------------------------------------------------------------------------

    def _begin(self, stage: str) -> tuple[Path | None, Path]:
        live = self.live(stage)
        gens = self.root / GENERATIONS
        gens.mkdir(exist_ok=True)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
        new = gens / f"{stage}-{stamp}-{secrets.token_hex(4)}"
        if live is not None:
            _link_tree(live, new)
        else:
            (new / "files").mkdir(parents=True)
            (new / "simple").mkdir()
        (new / "files").mkdir(exist_ok=True)
        (new / "simple").mkdir(exist_ok=True)
        _pause("generation-linked")
        return live, new

    def _commit(self, stage: str, live: Path | None, new: Path) -> None:
        for d in [
            new,
            new / "files",
            new / "simple",
            *(p for p in (new / "simple").iterdir() if p.is_dir()),
        ]:
            _fsync_dir(d)
        link = self.stage_path(stage)
        tmp = self.root / f"{TMP_PREFIX}{secrets.token_hex(4)}-{stage}"
        os.symlink(os.path.relpath(new, self.root), tmp)
        os.replace(tmp, link)  # the commit: one atomic rename
        _fsync_dir(self.root)
        _pause("swapped")
        if live is not None:
            shutil.rmtree(live)

    def _write_pages(
        self, gen: Path, stage: str, new_files: dict[str, list[dict[str, Any]]]
    ) -> list[str]:
        """Merge ``new_files`` (per project) into the project pages of ``gen`` and the root."""
        pages: list[str] = []
        simple = gen / "simple"
        root_data = self._read_json(simple / "index.json") or {
            "meta": {"api-version": API_VERSION},
            "projects": [],
        }
        root_by_name = {p["name"]: p for p in root_data["projects"]}
        for project, entries in sorted(new_files.items()):
            pdir = simple / project
            pdir.mkdir(exist_ok=True)
            old = self._read_json(pdir / "index.json")
            files = list(old["files"]) if old else []
            files.extend(entries)
            files.sort(key=lambda f: (_version_of(f["filename"]), f["filename"]))
            pj = _project_json(project, files)
            # JSON first, HTML second; both are new inodes (temp + rename), never edited in place
            write_atomic(pdir / "index.json", _dump(pj))
            write_atomic(pdir / "index.html", render_project_html(project, stage, files))
            pages += [f"simple/{project}/index.json", f"simple/{project}/index.html"]
            root_by_name[project] = {
                "name": project,
                "_latest": pj["versions"][-1],
                "_files": len(files),
            }
        _pause("project-pages-written")
        projects = [root_by_name[n] for n in sorted(root_by_name)]
        root_data = {"meta": {"api-version": API_VERSION}, "projects": projects}
        write_atomic(simple / "index.json", _dump(root_data))
        write_atomic(simple / "index.html", render_root_html(stage, projects))
        pages += ["simple/index.json", "simple/index.html"]
        _pause("root-written")
        return pages

    def _plan(self, stage: str, wheels: Sequence[WheelInfo]) -> tuple[Change, list[WheelInfo]]:
        """Check immutability against every stage; split into new and already-present."""
        change = Change(stage=stage)
        todo: list[WheelInfo] = []
        seen: dict[str, WheelInfo] = {}
        for w in wheels:
            if w.filename in seen:
                if seen[w.filename].sha256 != w.sha256:
                    raise PublishError(
                        f"{w.filename}: given twice with different bytes "
                        f"(sha256 {seen[w.filename].sha256} vs {w.sha256})",
                        hint="publish one of them; a filename names exactly one set of bytes",
                    )
                continue
            seen[w.filename] = w
            existing = self.existing_sha256(w.project, w.filename)
            for other_stage, digest in existing.items():
                if digest != w.sha256:
                    where = self.root / other_stage / "files" / w.filename
                    raise PublishError(
                        f"{w.filename}: already published in stage {other_stage!r} with "
                        f"different bytes (index sha256 {digest}, new sha256 {w.sha256})",
                        hint=f"files are immutable; bump the version or local label instead of "
                        f"replacing {where}",
                    )
            entry = {
                "file": w.filename,
                "project": w.project,
                "version": str(w.version),
                "sha256": w.sha256,
                "size": w.size,
            }
            if stage in existing:
                change.unchanged.append(entry)
            else:
                change.added.append(entry)
                todo.append(w)
        projects = sorted({w.project for w in todo})
        if todo:
            change.pages = [
                p for n in projects for p in (f"simple/{n}/index.json", f"simple/{n}/index.html")
            ] + ["simple/index.json", "simple/index.html"]
        return change, todo

    def publish(
        self, wheels: Sequence[WheelInfo], stage: str = DEFAULT_STAGE, dry_run: bool = False
    ) -> Change:
        """Add ``wheels`` to ``stage`` in one atomic transaction."""
        _check_stage_name(stage)
        if dry_run:
            return self._plan(stage, wheels)[0]
        with self.locked():
            self.cleanup()
            _pause("locked")
            change, todo = self._plan(stage, wheels)  # re-checked under the lock
            if not todo:
                return change
            live, new = self._begin(stage)
            now = _now_iso()
            new_files: dict[str, list[dict[str, Any]]] = {}
            for i, w in enumerate(todo):
                copy_atomic(w.path, new / "files" / w.filename)
                write_atomic(new / "files" / f"{w.filename}.metadata", w.metadata)
                if i == 0:
                    _pause("wheel-written")
                new_files.setdefault(w.project, []).append(_file_entry(w, now))
            _pause("files-written")
            self._write_pages(new, stage, new_files)
            self._commit(stage, live, new)
            return change

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
        _check_stage_name(src)
        _check_stage_name(dst)
        if src == dst:
            raise PublishError(
                f"promote: --from and --to are both {src!r}",
                hint="promote from one stage to another, e.g. staging -> stable",
            )
        name = canonicalize_name(project)
        try:
            want = Version(version)
        except InvalidVersion as exc:
            raise PublishError(
                f"promote: {version!r} is not a valid version",
                hint="give NAME==VERSION, e.g. flash-attn==2.8.3+rocm6.2",
            ) from exc
        ctx = contextlib.nullcontext() if dry_run else self.locked()
        with ctx:
            if not dry_run:
                self.cleanup()
            src_gen = self.live(src)
            if src_gen is None:
                raise PublishError(
                    f"promote: stage {src!r} does not exist in {self.root}",
                    hint=f"publish to it first: rocmbuild publish --stage {src}",
                )
            entries = [
                f for f in self.project_files(src, name) if _version_of(f["filename"]) == want
            ]
            if not entries:
                raise PublishError(
                    f"promote: no files for {name}=={want} in stage {src!r} of {self.root}",
                    hint=f"see {self.root / src / 'simple' / name / 'index.html'}",
                )
            infos = [read_wheel(src_gen / "files" / f["filename"]) for f in entries]
            if broken_dir is not None:
                check_not_broken(infos, broken_dir)
            change, todo = self._plan(dst, infos)
            if dry_run or not todo:
                return change
            _pause("locked")
            live, new = self._begin(dst)
            now = _now_iso()
            new_files: dict[str, list[dict[str, Any]]] = {}
            for i, w in enumerate(todo):
                _link_or_copy(src_gen / "files" / w.filename, new / "files" / w.filename)
                _link_or_copy(
                    src_gen / "files" / f"{w.filename}.metadata",
                    new / "files" / f"{w.filename}.metadata",
                )
                if i == 0:
                    _pause("wheel-written")
                new_files.setdefault(w.project, []).append(_file_entry(w, now))
            _pause("files-written")
            self._write_pages(new, dst, new_files)
            self._commit(dst, live, new)
            return change

    def regenerate(self, stage: str) -> float:
        """Rebuild every page of ``stage`` from its files (reads each wheel). Returns seconds.

        Used by the benchmark and for repair; one atomic transaction like publish.
        """
        t0 = time.perf_counter()
        with self.locked():
            self.cleanup()
            live = self.live(stage)
            if live is None:
                raise PublishError(f"stage {stage!r} does not exist in {self.root}")
            old_times: dict[str, str] = {}
            root_data = self._read_json(live / "simple" / "index.json") or {"projects": []}
            for p in root_data["projects"]:
                for f in self.project_files(stage, p["name"]):
                    old_times[f["filename"]] = f["upload-time"]
            gens = self.root / GENERATIONS
            new = gens / f"{stage}-regen-{secrets.token_hex(4)}"
            (new / "simple").mkdir(parents=True)
            (new / "files").mkdir()
            now = _now_iso()
            new_files: dict[str, list[dict[str, Any]]] = {}
            for wf in sorted((live / "files").glob("*.whl")):
                _link_or_copy(wf, new / "files" / wf.name)
                _link_or_copy(
                    wf.with_name(wf.name + ".metadata"), new / "files" / (wf.name + ".metadata")
                )
                w = read_wheel(wf)
                new_files.setdefault(w.project, []).append(
                    _file_entry(w, old_times.get(w.filename, now))
                )
            self._write_pages(new, stage, new_files)
            self._commit(stage, live, new)
        return time.perf_counter() - t0


def _check_stage_name(stage: str) -> None:
    if not stage or stage.startswith(".") or "/" in stage or stage in {"files", "simple"}:
        raise PublishError(
            f"--stage: invalid stage name {stage!r}",
            hint="use a plain name such as stable or staging",
        )
