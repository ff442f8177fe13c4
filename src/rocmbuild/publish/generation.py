"""Writing a new generation of a static index stage (not yet live: nothing here is seen before
the transaction's symlink swap): hard links to the live generation's files, and the pages of a
``simple/`` tree merged with new file entries, each page a new inode (temp file + rename), JSON
before HTML, project pages before the root. ``static_index`` runs the transaction around it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil
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


def read_json(path: Path) -> dict[str, Any] | None:
    """A page's JSON (the index's own, written under its lock); None when there is none."""
    try:
        data: dict[str, Any] = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    return data


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
