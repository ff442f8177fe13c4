"""The pages of a static index: PEP 691 JSON and PEP 503 HTML, rendered from file entries.

A file entry is the PEP 691 JSON object of one file (``filename``, ``url``, ``hashes``,
``requires-python``, ``core-metadata`` (PEP 714) and its older name ``dist-info-metadata``
(PEP 658), ``yanked``, and PEP 700's ``size`` and ``upload-time``). The entries are kept in that
wire format because the project's ``index.json`` on disk is the index's source of truth: they are
read back from it on the next transaction. The HTML pages carry the same data as attributes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import html
import json
from typing import Any
from urllib.parse import quote

from packaging.version import Version

from rocmbuild.artifacts.wheel import WheelInfo, parse_wheel_name

API_VERSION = "1.1"

FileEntry = dict[str, Any]  # one PEP 691 file object, as stored in a project's index.json


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def file_entry(w: WheelInfo, upload_time: str) -> FileEntry:
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


def view_entry(entry: FileEntry, fallback: bool = False) -> FileEntry:
    """``entry`` as a view's project page links it: one directory further from ``files/``
    (``<stage>/<view>/simple/<project>/``). ``fallback``: the wheel is in this view only
    because it runs everywhere (``views.fallback_views``); the private key ``_fallback``
    (PEP 691 leaves ``_`` keys to the index) keeps that for the next transaction's merge."""
    return {**entry, "url": f"../{entry['url']}", **({FALLBACK: True} if fallback else {})}


FALLBACK = "_fallback"


def preferred(files: list[FileEntry]) -> list[FileEntry]:
    """A view's files less the fallback builds of each release (same public version) that has
    a build made for the view: pip, which takes the highest local label of a release, then
    gets one of those."""
    made = {version_of(f["filename"]).public for f in files if not f.get(FALLBACK)}
    return [f for f in files
            if not f.get(FALLBACK) or version_of(f["filename"]).public not in made]


def version_of(filename: str) -> Version:
    """The version in a wheel's file name; WheelFormatError when it is none."""
    return parse_wheel_name(filename).version


def project_json(name: str, files: list[FileEntry]) -> dict[str, Any]:
    versions = sorted({version_of(f["filename"]) for f in files})
    return {
        "meta": {"api-version": API_VERSION},
        "name": name,
        "versions": [str(v) for v in versions],
        "files": files,
    }


def root_json(projects: list[dict[str, Any]]) -> dict[str, Any]:
    """``projects``: ``{"name", "_latest", "_files"}`` each (PEP 691 reserves ``_`` keys for
    private use); the root keeps them so adding a wheel rewrites only its project's pages."""
    return {"meta": {"api-version": API_VERSION}, "projects": projects}


def dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode()


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


def render_project_html(name: str, stage: str, files: list[FileEntry]) -> bytes:
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
            f"<td>{html.escape(str(version_of(f['filename'])))}</td>"
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


def install_snippets(path: str, project: str, view: str) -> tuple[str, str]:
    """(pip, uv) lines that install ``project`` from the index directory ``path`` (relative to
    the index root, e.g. ``stable/gfx90a/simple/``). pip gets it as an *extra* index so torch
    and the rest still come from their own indexes; uv pins only ``project`` to it (an explicit
    index is used for the packages that name it in ``[tool.uv.sources]`` and nothing else).
    ``INDEX_URL`` stands for where the index is served; the page's script fills it in."""
    url = f"INDEX_URL/{path}"
    name = f"rocmbuild-{view}"
    pip = f"pip install --extra-index-url {url} {project}"
    uv = (f'[[tool.uv.index]]\nname = "{name}"\nurl = "{url}"\nexplicit = true\n\n'
          f'[tool.uv.sources]\n{project} = {{ index = "{name}" }}')
    return pip, uv


# Replaces INDEX_URL/<path> in the snippets with the absolute URL of <path>, which the page
# knows from its own address (it lives at <index>/<path>/index.html or is served as <path>/).
_SNIPPET_JS = (
    "<script>for(const e of document.querySelectorAll('[data-index-path]')){"
    "const own=e.dataset.ownPath,u=new URL(location.href);u.search='';u.hash='';"
    "u.pathname=u.pathname.replace(/index\\.html$/,'');"
    "if(!u.pathname.endsWith('/'+own))continue;"
    "const base=u.href.slice(0,u.href.length-own.length-1);"
    "e.textContent=e.textContent.split('INDEX_URL').join(base)}</script>\n"
)


def _snippet_block(path: str, own: str, project: str, view: str) -> str:
    pip, uv = install_snippets(path, project, view)
    attrs = f'data-index-path="{html.escape(path)}" data-own-path="{html.escape(own)}"'
    return (f'<pre class="pip" {attrs}><code>{html.escape(pip)}</code></pre>\n'
            f'<p>uv (<code>pyproject.toml</code>):</p>\n'
            f'<pre class="uv" {attrs}><code>{html.escape(uv)}</code></pre>\n')


def _view_kind(view: str) -> str:
    if view.startswith("gfx"):
        return f"wheels whose device code runs on {view} (multi-arch wheels included; of a " \
               f"pure-Python ROCm release, the build made for {view} when there is one, else " \
               "every build)"
    if view.startswith("rocm"):
        return f"wheels built for ROCm {view[4:]}"
    return "a subset of the wheels"


def render_root_html(stage: str, projects: list[dict[str, Any]],
                     views: list[str] | None = None, *, path: str | None = None) -> bytes:
    """The root page; ``views`` (of the all-wheels view) are listed above the table, each with
    its pip snippet. ``path``: this page's directory relative to the index root (e.g.
    ``stable/gfx90a/simple/``); when given, the page shows its own pip and uv snippets."""
    project = projects[0]["name"] if projects else "NAME"
    install = ""
    if path is not None:
        view = path.split("/")[1] if path.count("/") > 2 else "all"
        install = ("<h2>Install</h2>\n<p>pip (an extra index, so that torch still comes from "
                   "its own index):</p>\n" + _snippet_block(path, path, project, view))
    view_rows = ""
    if views and path is not None:
        stage_dir = path.split("/")[0]
        rows = "".join(
            f'<tr><td><a href="../{quote(v)}/simple/">{html.escape(v)}</a></td>'
            f"<td>{html.escape(_view_kind(v))}</td>"
            f'<td><code data-index-path="{stage_dir}/{quote(v)}/simple/" '
            f'data-own-path="{html.escape(path)}">'
            f"{html.escape(install_snippets(f'{stage_dir}/{v}/simple/', project, v)[0])}"
            "</code></td></tr>\n" for v in views)
        view_rows = ("<h2>Views</h2>\n<p>Each view is an index of its own for a subset of "
                     "these wheels; a host on an MI200 (gfx90a) uses the gfx90a view and gets "
                     "a wheel with code for its GPU.</p>\n<table>\n<tr><th>View</th><th>Holds"
                     "</th><th>pip</th></tr>\n" + rows + "</table>\n")
    elif views:
        links = ", ".join(f'<a href="../{quote(v)}/simple/">{html.escape(v)}</a>' for v in views)
        view_rows = f"<p>Views, each an index of its own for a subset of the wheels: {links}</p>\n"
    rows = "".join(
        f'<tr><td><a href="{quote(p["name"])}/">{html.escape(p["name"])}</a></td>'
        f"<td>{html.escape(p.get('_latest', ''))}</td><td>{p.get('_files', 0)}</td></tr>\n"
        for p in projects
    )
    body = (
        f"<p>Stage <b>{html.escape(stage)}</b> &middot; {len(projects)} project(s).</p>\n"
        + install + view_rows
        + "<h2>Projects</h2>\n<table>\n<tr><th>Project</th><th>Latest</th><th>Files</th></tr>\n"
        + rows + "</table>\n" + (_SNIPPET_JS if path is not None else "")
    )
    return _page(f"Simple index ({stage})", f"Simple index: {stage}", body)
