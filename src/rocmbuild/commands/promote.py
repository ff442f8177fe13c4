"""``rocmbuild promote NAME==VERSION``: copy a release between stages of a directory index."""

from __future__ import annotations

import argparse

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "promote", help="copy a release from one stage to another, atomically",
        description="Copy every file of NAME==VERSION from one stage of a directory index to "
        "another in one atomic step.")
    p.add_argument("spec", metavar="NAME==VERSION", help="release to promote")
    p.add_argument("--from", dest="from_stage", default="staging",
                   help="source stage [default staging]")
    p.add_argument("--to", dest="to_stage", default="stable", help="target stage [default stable]")
    common.add_setting(p, "index", "promote")
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    common.add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild.commands.publish import PAUSE_VARS, env_of, index_and_broken, print_result
    from rocmbuild.publish import api as pub

    name, version = pub.parse_pin(args.spec)
    index, index_from, broken = index_and_broken(args)
    opts = pub.PromoteOptions(index=index, project=name, version=version,
                              from_stage=args.from_stage, to_stage=args.to_stage,
                              dry_run=args.dry_run, broken_dir=broken,
                              on_step=pub.pause_hook(env_of(PAUSE_VARS)),
                              index_from=index_from)
    print_result(pub.promote(opts), args.json)
    return 0
