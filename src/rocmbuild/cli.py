"""Command line. The only place that turns errors into exit codes.

    rocmbuild <recipe> [--arch ...]          same as `rocmbuild build <recipe> ...`
    rocmbuild build|plan|recipes|doctor|audit|validate|publish|promote ...

Every flag that has an environment variable says so in its help.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from rich.markup import escape

from rocmbuild import __version__, log
from rocmbuild.errors import RocmbuildError, UsageError

Handler = Callable[[argparse.Namespace], int]

# Global options that take a value (needed to find the first positional for the shorthand).
_GLOBAL_VALUE_OPTS = {"--workdir", "--cache-dir"}


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def _add_target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="recipe name (see `rocmbuild recipes`) or path to a .toml file")
    p.add_argument(
        "--arch",
        default=_env("ROCMBUILD_ARCH", "native"),
        help="comma-separated gfx targets, e.g. gfx90a,gfx942; 'native' reads the local GPUs "
        "from /sys/class/kfd [env ROCMBUILD_ARCH, default native]",
    )
    p.add_argument(
        "--variant",
        default=_env("ROCMBUILD_VARIANT"),
        help="recipe variant, e.g. ck or triton [env ROCMBUILD_VARIANT, default: the recipe's]",
    )
    p.add_argument(
        "--source",
        default=_env("ROCMBUILD_SOURCE", "default"),
        help="which source to fetch: 'default' or an alternative named in the recipe, e.g. pypi "
        "[env ROCMBUILD_SOURCE]",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=int(os.environ["ROCMBUILD_JOBS"]) if os.environ.get("ROCMBUILD_JOBS") else None,
        help="parallel compile jobs (MAX_JOBS); default: min(cpus, usable memory / memory per "
        "job) [env ROCMBUILD_JOBS]",
    )
    p.add_argument(
        "--rocm-version",
        default=_env("ROCMBUILD_ROCM_VERSION"),
        help="ROCm version for the wheel's local label, e.g. 6.2; default: the ROCm torch's HIP, "
        "then the ROCm root's, then the recipe's target [env ROCMBUILD_ROCM_VERSION]",
    )
    p.add_argument(
        "--rocm-path",
        default=_env("ROCM_PATH"),
        help="ROCm root, e.g. /opt/rocm [env ROCM_PATH; default: HIP_PATH, then /opt/rocm]",
    )


def _add_global_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output (-v streams "
                   "build output to the console)")
    p.add_argument("-q", "--quiet", action="count", default=0, help="less output")
    p.add_argument("--workdir", default=None,
                   help="workspace for sources, logs, wheels [env ROCMBUILD_WORKDIR, default ./build]")
    p.add_argument("--cache-dir", default=None,
                   help="download and wheel cache [env ROCMBUILD_CACHE_DIR, default <workdir>/cache]")


def _cmd_build(args: argparse.Namespace) -> int:
    from rocmbuild import pipeline

    return pipeline.cli_build(args)


def _cmd_plan(args: argparse.Namespace) -> int:
    from rocmbuild import pipeline

    return pipeline.cli_plan(args)


def _cmd_recipes(args: argparse.Namespace) -> int:
    from rocmbuild.recipe import load

    return load.cli_list(args)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rocmbuild import doctor

    return doctor.cli_doctor(args)


def _cmd_audit(args: argparse.Namespace) -> int:
    from rocmbuild import audit

    return audit.cli_audit(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocmbuild",
        description="Build, check, publish and nightly-rebuild ROCm wheels for AMD Instinct GPUs. "
        "`rocmbuild <recipe> ...` is short for `rocmbuild build <recipe> ...`.",
    )
    parser.add_argument("--version", action="version", version=f"rocmbuild {__version__}")
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("build", help="fetch, patch, build, tag and audit a wheel",
                       description="Fetch, patch, hipify, build, tag and audit a wheel. A wheel "
                       "already built from the same inputs is returned from the cache.")
    _add_target_options(p)
    p.add_argument("-w", "--wheel-dir", default=_env("ROCMBUILD_WHEEL_DIR"),
                   help="where to put the wheel [env ROCMBUILD_WHEEL_DIR, default <workdir>/wheels]")
    p.add_argument("--force", action="store_true",
                   help="rebuild even when the cache holds a wheel for these inputs")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(handler=_cmd_build)

    p = sub.add_parser("plan", help="print the resolved build plan; runs nothing",
                       description="Render the recipe for a target and print the plan: sources, "
                       "patches, environment, MAX_JOBS and why, commands and cache key.")
    _add_target_options(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(handler=_cmd_plan)

    p = sub.add_parser("recipes", help="list recipes, variants and supported archs")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=_cmd_recipes)

    # -- commands added by later capabilities register below, one block each --
    p = sub.add_parser("doctor", help="check this host for a ROCm build: compiler, archs, GPUs, "
                       "groups, torch, disk, memory",
                       description="One line per check (ok / warn / fail) with the exact fix. Exit "
                       "0 only when the requested build can run here; 10 otherwise.")
    p.add_argument("--arch", default=_env("ROCMBUILD_ARCH"),
                   help="gfx targets to test-compile, e.g. gfx942 or gfx90a,gfx942 [env "
                   "ROCMBUILD_ARCH; default: the GPUs found, else gfx90a,gfx942 as a warning]")
    p.add_argument("--recipe", default=None,
                   help="recipe whose disk, memory-per-job and host_requires (rocm-torch) to "
                   "check against")
    p.add_argument("--hip-compiler", default=None,
                   help="HIP compiler to check [env ROCMBUILD_HIP_COMPILER; default: detected]")
    p.add_argument("--root", default="/",
                   help="file system root for sysfs, /dev, /etc/group, /opt/rocm (fixture trees)")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_doctor)

    p = sub.add_parser("audit", help="list the gfx targets in the device code of wheels / .so",
                       description="For every ELF shared object in each wheel (or each .so/.o "
                       "given), list the gfx targets in its HIP offload bundles (.hip_fatbin, "
                       "CCOB-compressed, -fgpu-rdc). Exit 7 when a requested arch is missing or a "
                       ".so has HIP host code but no device code.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="wheel, .so, .o or .hipfb files")
    p.add_argument("--arch", default=None,
                   help="gfx targets every HIP .so must carry, e.g. gfx90a,gfx942 (gfx90a also "
                   "matches gfx90a:xnack+)")
    p.add_argument("--json", action="store_true", help="print the audit as JSON on stdout")
    p.set_defaults(handler=_cmd_audit)

    # [validate]
    # [publish]
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
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    args_list = _insert_build(list(sys.argv[1:] if argv is None else argv), set(sub.choices))
    try:
        args = parser.parse_args(args_list)
        log.set_level(max(0, 1 + args.verbose - args.quiet))
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


def _report(exc: RocmbuildError) -> None:
    if exc.detail:
        log.console.print(exc.detail, markup=False, highlight=False)
    for line in exc.message.splitlines() or [""]:
        log.console.print(f"[bold red]{exc.kind}:[/bold red] {escape(line)}", highlight=False)
    if exc.hint:
        log.console.print(f"[cyan]hint:[/cyan] {escape(exc.hint)}", highlight=False)
