"""Fetch: put a fresh copy of the pinned source at ``<workdir>/src/<recipe>/<key>/``, and the
plan's [[downloads]] beside it in the cache. The mechanics are rocmbuild.sources':

- sdist: ``sources.download`` (once into ``<cache>/downloads/<sha256>/``, verified before it is
  used), extracted by ``sources.archive`` (safely, dated by its newest member).
- git: ``sources.git`` (a mirror per URL in ``<cache>/git/``, checked out at the pinned commit,
  then the selected submodules; dated by the commit).
- path: a copy of a local tree.
Network steps are retried by ``sources.retry`` while the failure is transient.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.core.config import SOURCE_TREE_IGNORE
from rocmbuild.core.log import redact
from rocmbuild.plan.model import Plan
from rocmbuild.sources import archive, download, git
from rocmbuild.stages.context import Context


def _discard(dest: Path) -> None:
    """Move an old tree (and leftovers of earlier runs) aside and delete them in the background:
    a built flash-attn tree has ~7,600 files, and deleting them in line cost seconds."""
    old = [p for p in dest.parent.glob(f"{dest.name}.old-*")]
    if dest.exists():
        aside = dest.with_name(f"{dest.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(dest, aside)
        old.append(aside)
    if old:

        def remove() -> None:
            for p in old:
                shutil.rmtree(p, ignore_errors=True)

        threading.Thread(target=remove, daemon=True).start()


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    src = plan.source
    dest = ctx.ws.src / plan.recipe / plan.short_key
    dest.parent.mkdir(parents=True, exist_ok=True)
    _discard(dest)
    log_path = ctx.log_dir / "fetch.log"
    if src.kind == "sdist":
        cached = (ctx.ws.cache / "downloads" / src.sha256).is_dir()
        sdist = download.download(src.url, src.sha256, ctx.ws.cache)
        epoch = archive.extract_dated(sdist, dest)[1]
        reason = f"sdist {sdist.name}" + (" (cached download)" if cached else "")
    elif src.kind == "git":
        git.git_checkout(src.url, src.commit, src.submodules, ctx.ws.cache, dest, log_path)
        epoch = git.git_epoch(git.mirror_path(src.url, ctx.ws.cache), src.commit, log_path)
        reason = f"git {redact(src.url)} @ {src.commit[:12]}"
    else:
        # a local tree's file times say when it was checked out or edited, not what it holds
        # (its content is in the cache key): its builds use 1980-01-01 (docs/reproducible.md)
        epoch = None
        origin = Path(src.path)  # absolute: render resolved it against the recipe file
        shutil.copytree(
            origin,
            dest,
            ignore=shutil.ignore_patterns(*SOURCE_TREE_IGNORE),
        )
        reason = f"path {origin}"
    got = download.fetch_downloads(plan.downloads, ctx.ws.cache) if plan.downloads else None
    if got:
        reason += f"; {len(plan.downloads)} download(s)"
    return StageResult(Status.SUCCESS, time.monotonic() - start, reason, log_path,
                       Artifacts(tree=dest, downloads=got, source_date_epoch=epoch))
