"""The command line's parser: the top level and the parser of each command (``COMMANDS``), whose
module registers its own flags. Imported only when a command line is parsed: a cache hit served by
``rocmbuild.commands.noop_memo`` parses nothing."""

from __future__ import annotations

import argparse
import importlib

from rocmbuild import __version__
from rocmbuild.commands import common
from rocmbuild.commands.registry import COMMANDS
from rocmbuild.core.errors import UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


class _WholeHelp(argparse.Action):
    """The top level's -h/--help when the parser holds one command only: the help of the whole
    parser, which lists every command."""

    def __init__(self, option_strings: list[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show this help message and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        build_parser().print_help()
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``only`` the top level and that one command's parser
    (a run parses one command; importing and building all twelve was about 5 % of a cache hit's
    instructions). The top level's --help and completion list every command either way."""
    parser = _Parser(
        prog="rocmbuild",
        description="Build, check, publish and nightly-rebuild ROCm wheels for AMD Instinct GPUs. "
        "`rocmbuild <recipe> ...` is short for `rocmbuild build <recipe> ...`. Settings: flag > "
        "environment variable > [tool.rocmbuild] in ./pyproject.toml > default.",
        add_help=only is None,
    )
    if only is not None:
        parser.add_argument("-h", "--help", action=_WholeHelp)
    parser.add_argument("--version", action="version", version=f"rocmbuild {__version__}")
    common.add_global_options(parser, top=True)
    shared = _Parser(add_help=False)
    common.add_global_options(shared, top=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub_add = sub.add_parser

    def add_parser(name: str, **kw: object) -> argparse.ArgumentParser:
        return sub_add(name, parents=[shared], **kw)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign,assignment]
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"rocmbuild.commands.{name}").register(sub)
    return parser
