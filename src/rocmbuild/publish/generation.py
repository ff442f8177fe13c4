"""Writing a new generation of a static index stage (not yet live: nothing here is seen before
the transaction's symlink swap): hard links to the live generation's files, and the pages of a
``simple/`` tree merged with new file entries, each page a new inode (temp file + rename), JSON
before HTML, project pages before the root. ``static_index`` runs the transaction around it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.wheel import WheelFormatError
from rocmbuild.core import fsutil, untrusted
from rocmbuild.core.errors import PublishError
from rocmbuild.publish import pages, views
from rocmbuild.publish.pages import FileEntry


def write(path: Path, data: bytes) -> None:
    # the directories of a new generation are fsynced once, in StaticIndex._commit
    fsutil.write_atomic(path, data, sync_dir=False)


def link_or_copy(src: Path, dst: Path) -> None:
    """Into a new (not yet live) generation: a hard link, or a copy where links fail."""
    try:
        os.link(src, dst)
    except OSError:
        fsutil.copy_atomic(src, dst, sync_dir=False)


def link_tree(src: Path, dst: Path) -> None:
    """Mirror ``src`` into ``dst`` with hard links (falls back to copies)."""
    for dirpath, _dirs, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for fn in filenames:
            link_or_copy(Path(dirpath) / fn, dst / rel / fn)


PAGE_MAX = 256 << 20
"""The largest index.json read back (bytes)."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def read_json(path: Path) -> dict[str, Any] | None:
    """A page's JSON (the index's own, written under its lock, but a file on disk: checked as
    untrusted, every field the pages are rendered from); None when there is none. PublishError
    naming the file and key for one that is not a page of ours."""
    try:
        data = untrusted.obj(untrusted.read_json(path, PAGE_MAX), "(top level)")
        if "projects" in data:
            _check_root(data)
        else:
            _check_project(data)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PublishError(f"{path}: cannot read: {exc.strerror or exc}", hint=_PAGE_HINT) from None
    except untrusted.BadJson as exc:
        raise PublishError(f"{path}: {exc}", hint=_PAGE_HINT) from None
    return data


_PAGE_HINT = ("the index's page is not one rocmbuild wrote (edited or damaged): restore it, or "
              "move the stage away and publish its wheels again")


def _check_root(data: dict[str, Any]) -> None:
    projects = data["projects"]
    if not isinstance(projects, list):
        raise untrusted.BadJson("projects: expected a list")
    for i, p in enumerate(projects):
        p = untrusted.obj(p, f"projects[{i}]")
        untrusted.text(p.get("name"), f"projects[{i}].name", 200)
        untrusted.text(p.get("_latest"), f"projects[{i}]._latest", 200)
        untrusted.integer(p.get("_files"), f"projects[{i}]._files", 0, 1 << 31)


def _check_project(data: dict[str, Any]) -> None:
    files = data.get("files")
    if not isinstance(files, list):
        raise untrusted.BadJson("files: expected a list")
    for i, f in enumerate(files):
        at = f"files[{i}]"
        f = untrusted.obj(f, at)
        name = untrusted.text(f.get("filename"), f"{at}.filename", 400)
        try:
            pages.version_of(name)
        except WheelFormatError:
            raise untrusted.BadJson(f"{at}.filename: not a wheel's file name") from None
        untrusted.text(f.get("url"), f"{at}.url")
        sha = untrusted.obj(f.get("hashes"), f"{at}.hashes").get("sha256")
        if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise untrusted.BadJson(f"{at}.hashes.sha256: expected 64 hex digits")
        untrusted.integer(f.get("size"), f"{at}.size", 0, 1 << 50)
        untrusted.text(f.get("upload-time"), f"{at}.upload-time", 40)
        if f.get("requires-python") is not None:
            untrusted.text(f["requires-python"], f"{at}.requires-python", 400)
        meta = f.get("core-metadata")
        if meta and not _HEX64.fullmatch(str(untrusted.obj(meta, f"{at}.core-metadata")
                                             .get("sha256"))):
            raise untrusted.BadJson(f"{at}.core-metadata.sha256: expected 64 hex digits")


def write_pages(gen: Path, stage: str, new_files: dict[str, list[FileEntry]],
                view_files: dict[str, dict[str, list[FileEntry]]],
                step: Callable[[str], None]) -> None:
    """Merge ``new_files`` (per project) into the project pages of ``gen`` and the root, and
    ``view_files`` (per view, per project) into each view's pages. ``step`` is called with
    "project-pages-written" and "root-written" as the stage's own pages reach them."""
    for view, files in sorted(view_files.items()):
        (gen / view / "simple").mkdir(parents=True, exist_ok=True)
        write_simple(gen / view / "simple", f"{stage} / {view}", files,
                     path=f"{stage}/{view}/simple/")
    live_views = sorted(p.name for p in gen.iterdir()
                        if p.is_dir() and views.is_view_name(p.name))
    write_simple(gen / "simple", stage, new_files, live_views, step=step,
                 path=f"{stage}/simple/")


def write_simple(simple: Path, stage: str, new_files: dict[str, list[FileEntry]],
                 view_names: list[str] | None = None,
                 step: Callable[[str], None] | None = None, path: str | None = None) -> None:
    """Merge ``new_files`` into the project pages and the root page under ``simple``."""
    root_data = read_json(simple / "index.json") or pages.root_json([])
    root_by_name = {p["name"]: p for p in root_data["projects"]}
    for project, entries in sorted(new_files.items()):
        pdir = simple / project
        pdir.mkdir(exist_ok=True)
        old = read_json(pdir / "index.json")
        files = list(old["files"]) if old else []
        files.extend(entries)
        files.sort(key=lambda f: (pages.version_of(f["filename"]), f["filename"]))
        files = pages.preferred(files)  # a view: the builds made for it win (stage: no-op)
        pj = pages.project_json(project, files)
        # JSON first, HTML second; both are new inodes (temp + rename), never edited in place
        write(pdir / "index.json", pages.dump(pj))
        write(pdir / "index.html", pages.render_project_html(project, stage, files))
        root_by_name[project] = {
            "name": project,
            "_latest": pj["versions"][-1],
            "_files": len(files),
        }
    if step is not None:
        step("project-pages-written")
    projects = [root_by_name[n] for n in sorted(root_by_name)]
    write(simple / "index.json", pages.dump(pages.root_json(projects)))
    write(simple / "index.html", pages.render_root_html(stage, projects, view_names or [],
                                                        path=path))
    if step is not None:
        step("root-written")
