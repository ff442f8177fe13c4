"""``rocmbuild publish``: add wheels to a static index directory or upload them to a server."""

from __future__ import annotations

import argparse

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "publish", help="add wheels to an index (static directory or server)",
        description="Add wheels to a static PEP 503/691 index directory (atomic, immutable: an "
        "existing filename with other bytes is refused, identical bytes are a no-op) or upload "
        "them to an index server with twine.")
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files to publish")
    p.add_argument("--index", default=None, help="index directory, or http(s) upload URL of a "
                   "server " + common.env_help("index", "<workdir>/index"))
    p.add_argument("--stage", default=None, help="stage of a directory index, e.g. staging "
                   "(served at <index>/<stage>/simple/) [default stable]")
    p.add_argument("--simple-url", default=None, help="server only: its simple API root, used to "
                   "check existing files " + common.env_help("simple_url", "<index URL>/simple/"))
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    common.add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild import publish

    return publish.cli_publish(args)
