"""Publishing: ``rocmbuild publish`` and ``rocmbuild promote``.

``--index`` is a directory (a static PEP 503/691 index, see ``static_index``) or an http(s) URL
of an index server (twine upload, see ``upload``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from rocmbuild import config, log
from rocmbuild.errors import PublishError, UsageError
from rocmbuild.publish.static_index import (
    DEFAULT_STAGE,
    Change,
    StaticIndex,
    check_not_broken,
    read_wheel,
)


def _is_url(index: str) -> bool:
    return re.match(r"^https?://", index) is not None


def _index_arg(args: argparse.Namespace) -> str:
    index = args.index or os.environ.get("ROCMBUILD_INDEX")
    if index:
        return index
    return str(config.workspace(args.workdir, args.cache_dir).index)


def _broken_dir(args: argparse.Namespace) -> Path:
    return config.workspace(args.workdir, args.cache_dir).broken


def cli_publish(args: argparse.Namespace) -> int:
    index = _index_arg(args)
    wheels = [read_wheel(Path(w)) for w in args.wheels]
    check_not_broken(wheels, _broken_dir(args))
    if _is_url(index):
        from rocmbuild.publish import upload

        if args.stage:
            raise UsageError(
                "--stage: applies to a directory index only",
                hint="for a server, give the stage's own upload URL as --index",
            )
        res = upload.upload(
            wheels,
            index,
            simple_url=args.simple_url,
            dry_run=args.dry_run,
            verbose=args.verbose > 0,
        )
        target = upload.redact(index)
        data = {"index": target, "dry_run": args.dry_run, **res.as_dict()}
        if args.json:
            log.out.print_json(json.dumps(data))
            return 0
        verb = "would upload" if args.dry_run else "uploaded"
        for f in res.uploaded:
            log.info(f"{verb} {f} -> {target}")
        for f in res.unchanged:
            log.info(f"unchanged {f} (same sha256 already on {target})")
        return 0
    if args.simple_url:
        raise UsageError(
            "--simple-url: applies to a server URL index only", hint="drop it for a directory index"
        )
    stage = args.stage or DEFAULT_STAGE
    idx = StaticIndex(Path(index))
    change = idx.publish(wheels, stage=stage, dry_run=args.dry_run)
    _print_change(idx, change, args.dry_run, args.json)
    return 0


def _print_change(idx: StaticIndex, change: Change, dry_run: bool, as_json: bool) -> None:
    data = {"index": str(idx.root), "dry_run": dry_run, **change.as_dict()}
    if as_json:
        log.out.print_json(json.dumps(data))
        return
    verb = "would add" if dry_run else "added"
    for a in change.added:
        log.info(f"{verb} {a['file']} (sha256 {a['sha256'][:12]}) -> {idx.root}/{change.stage}")
    for u in change.unchanged:
        log.info(f"unchanged {u['file']} (identical bytes already in {change.stage})")
    if change.pages:
        log.info(("would rewrite " if dry_run else "rewrote ") + ", ".join(change.pages))
    if not change.added:
        log.info("nothing to do")
    elif not dry_run:
        log.info(f"pip install --index-url {(idx.root / change.stage / 'simple').as_uri()}/ ...")


def cli_promote(args: argparse.Namespace) -> int:
    spec = args.spec
    if "==" not in spec:
        raise UsageError(
            f"promote: {spec!r} is not NAME==VERSION",
            hint="e.g. rocmbuild promote flash-attn==2.8.3+rocm6.2 --from staging",
        )
    name, _, version = spec.partition("==")
    index = _index_arg(args)
    if _is_url(index):
        raise UsageError(
            "--index: promote works on a directory index only",
            hint="promote on a server with its own tool (e.g. devpi push)",
        )
    idx = StaticIndex(Path(index))
    change = idx.promote(
        name.strip(),
        version.strip(),
        args.from_stage,
        args.to_stage,
        dry_run=args.dry_run,
        broken_dir=_broken_dir(args),
    )
    if not change.added and not change.unchanged:
        raise PublishError(f"promote: nothing found for {spec}")
    _print_change(idx, change, args.dry_run, args.json)
    return 0
