"""``rocmbuild cache prune``: keep the workspace's disk use bounded (docs/cache.md)."""

from __future__ import annotations

import argparse

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser("cache", help="manage the cache (prune)",
                       description="Manage the workspace's cache.")
    p.set_defaults(handler=run, cache_command=None)
    group = p.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", parser_class=type(p))
    q = group.add_parser(
        "prune", help="remove what was not used lately: old or least recently used builds, "
        "downloads and git mirrors",
        description="Remove cache entries with their source trees and logs, downloads and git "
        "mirrors: those unused for more than --keep-days days, then the least recently used "
        "until at most --max-size remains. A build that is running keeps what it uses. The "
        "static index, delivered wheels and reports are not touched.")
    common.add_global_options(q, top=False)
    q.add_argument("--max-size", default=None, metavar="SIZE",
                   help="keep at most this much, e.g. 200G, 500M, 1.5T (binary units)")
    q.add_argument("--keep-days", default=None, metavar="DAYS",
                   help="remove what was last used more than DAYS days ago, e.g. 14")
    q.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    common.add_json(q)
    q.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild.cache import prune
    from rocmbuild.core import config, log, quantity
    from rocmbuild.core.errors import UsageError

    if args.cache_command is None:
        raise UsageError("cache: give a subcommand", hint="run `rocmbuild cache prune --help`")
    if args.max_size is None and args.keep_days is None:
        raise UsageError("cache prune: give --max-size or --keep-days (or both)",
                         hint="e.g. `rocmbuild cache prune --max-size 200G --keep-days 14`")
    max_size = None if args.max_size is None else common.quantity_flag(
        "--max-size", args.max_size, quantity.size, quantity.SIZE_HINT)
    days = None if args.keep_days is None else common.quantity_flag(
        "--keep-days", args.keep_days, quantity.days, quantity.DAYS_HINT)
    ws = config.workspace(args.workdir, args.cache_dir)
    result = prune.prune(ws, max_size, days, args.dry_run)
    if args.json:
        common.print_json(result.to_json())
        return 0
    verb = "would remove" if result.dry_run else "removed"
    for r in result.removed:
        log.out.print(f"{verb} {r.kind} {r.key[:16]}  {prune.human(r.size)}  ({r.reason})",
                      markup=False, highlight=False)
    for r in result.kept_in_use:
        log.out.print(f"kept {r.kind} {r.key[:16]}  {prune.human(r.size)}  ({r.reason})",
                      markup=False, highlight=False)
    log.out.print(f"{'would free' if result.dry_run else 'freed'} "
                  f"{prune.human(result.freed_bytes)}; {prune.human(result.total_after)} left "
                  f"(of {prune.human(result.total_before)})", markup=False, highlight=False)
    return 0
