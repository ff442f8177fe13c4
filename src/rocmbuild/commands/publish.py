"""``rocmbuild publish``: add wheels to a static index directory or upload them to a server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rocmbuild.commands import common

if TYPE_CHECKING:
    from rocmbuild.publish.api import PublishResult


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "publish", help="add wheels to an index (static directory or server)",
        description="Add wheels to a static PEP 503/691 index directory (atomic, immutable: an "
        "existing filename with other bytes is refused, identical bytes are a no-op) or upload "
        "them to an index server with twine.")
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files to publish")
    common.add_setting(p, "index")
    p.add_argument("--stage", default=None, help="stage of a directory index, e.g. staging "
                   "(served at <index>/<stage>/simple/) [default stable]")
    common.add_setting(p, "simple_url")
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    common.add_json(p)
    p.set_defaults(handler=run)


CREDENTIAL_VARS = ("ROCMBUILD_INDEX_USER", "ROCMBUILD_INDEX_PASSWORD", "TWINE_USERNAME",
                   "TWINE_PASSWORD")
PAUSE_VARS = ("ROCMBUILD_PUBLISH_PAUSE_AT", "ROCMBUILD_PUBLISH_PAUSE_MARKER",
              "ROCMBUILD_PUBLISH_PAUSE_SECONDS")


def env_of(names: tuple[str, ...]) -> dict[str, str]:
    from rocmbuild.core import options

    return {n: v for n in names if (v := options.env(n)) is not None}


def source_of(name: str, flag_value: object) -> str:
    """Where setting ``name`` came from, as errors name it: its flag, its variable or
    ``pyproject.toml: tool.rocmbuild.<key>``."""
    from rocmbuild.core import options

    setting = options.SETTINGS[name]
    if flag_value is not None:
        return setting.flag
    if setting.env and (options.env(setting.env) or "").strip():
        return setting.env
    if setting.config and setting.config in options.project_config():
        return f"pyproject.toml: tool.rocmbuild.{setting.config}"
    return setting.flag


def index_and_broken(args: argparse.Namespace) -> tuple[str, str, Path]:
    """--index / ROCMBUILD_INDEX / [tool.rocmbuild] index, else <workdir>/index; where it came
    from; and broken/. The value is not checked here (``publish.target.parse_index`` does)."""
    from rocmbuild.core import config, options

    ws = config.workspace(args.workdir, args.cache_dir)
    index = options.resolve("index", args.index, str(ws.index))
    return index, source_of("index", args.index), ws.broken


def run(args: argparse.Namespace) -> int:
    from rocmbuild.core import options
    from rocmbuild.publish import api as pub
    from rocmbuild.publish import upload

    index, index_from, broken = index_and_broken(args)
    target = pub.parse_index(index, index_from)  # refused here, redacted, before anything else
    opts = pub.PublishOptions(
        index=index,
        stage=args.stage,
        simple_url=options.resolve("simple_url", args.simple_url),
        dry_run=args.dry_run,
        verbose=args.verbose > 0,
        broken_dir=broken,
        credentials=upload.credentials(target, env_of(CREDENTIAL_VARS)) if target.is_server
        else None,
        on_step=pub.pause_hook(env_of(PAUSE_VARS)),
        index_from=index_from,
        simple_url_from=source_of("simple_url", args.simple_url),
    )
    print_result(pub.publish([Path(w) for w in args.wheels], opts), args.json)
    return 0


def print_result(res: PublishResult, as_json: bool) -> None:
    from rocmbuild.core import log

    if as_json:
        common.print_json(res.to_json())
        return
    if res.upload is not None:
        verb = "would upload" if res.dry_run else "uploaded"
        for f in res.upload.uploaded:
            log.info(f"{verb} {f} -> {res.index}")
        for f in res.upload.unchanged:
            log.info(f"unchanged {f} (same sha256 already on {res.index})")
        return
    change = res.change
    assert change is not None
    verb = "would add" if res.dry_run else "added"
    for a in change.added:
        log.info(f"{verb} {a.file} (sha256 {a.sha256[:12]}) -> {res.index}/{change.stage}")
    for u in change.unchanged:
        log.info(f"unchanged {u.file} (identical bytes already in {change.stage})")
    if change.pages:
        log.info(("would rewrite " if res.dry_run else "rewrote ") + ", ".join(change.pages))
    if not change.added:
        log.info("nothing to do")
    elif not res.dry_run:
        simple = Path(res.index) / change.stage / "simple"
        log.info(f"pip install --index-url {simple.as_uri()}/ ...")
