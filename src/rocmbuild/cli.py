"""Command line: the parser and the one place that turns errors into exit codes.

    rocmbuild <recipe> [--arch ...]          same as `rocmbuild build <recipe> ...`
    rocmbuild build|plan|recipes|doctor|audit|validate|publish|promote ...

Each command is one module in ``rocmbuild.commands``: the route from here into the house is the
COMMANDS tuple below.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from rocmbuild import __version__, config, log, options
from rocmbuild.commands import (
    audit,
    build,
    common,
    doctor,
    plan,
    promote,
    publish,
    recipes,
    validate,
)
from rocmbuild.errors import INTERNAL_ERROR_EXIT, RocmbuildError, UsageError

COMMANDS = (build, plan, recipes, doctor, audit, validate, publish, promote)

# Global options that take a value (needed to find the first positional for the shorthand).
_GLOBAL_VALUE_OPTS = {"--workdir", "--cache-dir"}


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocmbuild",
        description="Build, check, publish and nightly-rebuild ROCm wheels for AMD Instinct GPUs. "
        "`rocmbuild <recipe> ...` is short for `rocmbuild build <recipe> ...`. Settings: flag > "
        "environment variable > [tool.rocmbuild] in ./pyproject.toml > default.",
    )
    parser.add_argument("--version", action="version", version=f"rocmbuild {__version__}")
    common.add_global_options(parser, top=True)
    shared = _Parser(add_help=False)
    common.add_global_options(shared, top=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub_add = sub.add_parser

    def add_parser(name: str, **kw: object) -> argparse.ArgumentParser:
        return sub_add(name, parents=[shared], **kw)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign,assignment]
    for command in COMMANDS:
        command.register(sub)
    return parser


def _insert_build(argv: list[str], commands: set[str]) -> list[str]:
    """`rocmbuild flash-attn ...` -> `rocmbuild build flash-attn ...`."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _GLOBAL_VALUE_OPTS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        if a not in commands:
            return argv[:i] + ["build"] + argv[i:]
        return argv
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        args_list = _insert_build(raw, set(sub.choices))
        args = parser.parse_args(args_list)
        base = options.env_int("ROCMBUILD_VERBOSITY", minimum=0)
        log.set_level(max(0, (1 if base is None else base) + args.verbose - args.quiet))
        options.check_env()
        if not getattr(args, "handler", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.handler(args))
    except RocmbuildError as exc:
        _report(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        log.console.print("[red]interrupted[/red]")
        return 130
    except Exception:  # the last-resort guard: a bug, never a user's mistake
        return _internal_error(raw)


INTERNAL_ERROR_LINE = "internal error, please report"
"""The guard's line; the corpus test asserts no bad input reaches it."""


def _internal_error(argv: list[str]) -> int:
    """One line and the path of the saved traceback (under the workdir's logs/, else a temp
    dir), never the traceback itself."""
    import re
    import tempfile
    import time
    import traceback

    # Credentials in URLs (user:password@host) never reach the saved file.
    text = re.sub(r"(?<=://)[^/@\s]*@", "***@", traceback.format_exc())
    name = f"internal-error-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
    saved: Path | None = None
    dirs: list[Path] = []
    try:
        dirs.append(config.workspace(_workdir_arg(argv)).logs)
    except Exception:  # noqa: BLE001 - a bad workdir setting must not hide the original error
        pass
    dirs.append(Path(tempfile.gettempdir()))
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text, encoding="utf-8")
            saved = d / name
            break
        except OSError:
            continue
    log.console.print(f"[bold red]internal error:[/bold red] {INTERNAL_ERROR_LINE}"
                      + (f"; traceback saved to {escape(str(saved))}" if saved else ""),
                      highlight=False)
    log.console.print("[cyan]hint:[/cyan] file an issue with that file and the command line",
                      highlight=False)
    return INTERNAL_ERROR_EXIT


def _workdir_arg(argv: list[str]) -> str | None:
    """--workdir from the command line, read without the parser (which may be what failed)."""
    for i, a in enumerate(argv):
        if a == "--workdir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--workdir="):
            return a.split("=", 1)[1]
    return None


def _report(exc: RocmbuildError) -> None:
    if exc.detail:
        log.console.print(exc.detail, markup=False, highlight=False)
    for line in exc.message.splitlines() or [""]:
        log.console.print(f"[bold red]{exc.kind}:[/bold red] {escape(line)}", highlight=False)
    if exc.hint:
        log.console.print(f"[cyan]hint:[/cyan] {escape(exc.hint)}", highlight=False)
