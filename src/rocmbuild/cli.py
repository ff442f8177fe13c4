"""Command line. The only place that turns errors into exit codes.

    rocmbuild <recipe> [--arch ...]          same as `rocmbuild build <recipe> ...`
    rocmbuild build|plan|recipes|doctor|audit|validate|publish|promote ...

Every flag that has an environment variable says so in its help.
"""

from __future__ import annotations

import argparse
import importlib
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
        "--hip-compiler",
        default=_env("ROCMBUILD_HIP_COMPILER"),
        help="HIP compiler for recipes that compile HIP (cmake backend, the probe): a path or a "
        "name on PATH [env ROCMBUILD_HIP_COMPILER; default: a ROCm install, then "
        "scripts/install-hip-toolchain.sh's]",
    )
    p.add_argument(
        "--gpu-vendor",
        choices=("amd", "nvidia"),
        default=_env("ROCMBUILD_GPU_VENDOR", "amd"),
        help="GPU vendor the wheel will run on; nvidia only to check HIP-portable (Triton) code "
        "on NVIDIA GPUs, selecting patches with when.gpu_vendor [env ROCMBUILD_GPU_VENDOR, "
        "default amd]",
    )
    p.add_argument(
        "--rocm-path",
        default=_env("ROCM_PATH"),
        help="ROCm root, e.g. /opt/rocm [env ROCM_PATH; default: HIP_PATH, then /opt/rocm]",
    )


def _add_global_options(p: argparse.ArgumentParser, top: bool) -> None:
    """Global options work before and after the command; only the top level sets defaults."""

    def d(value: object) -> object:
        return value if top else argparse.SUPPRESS

    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=d(0),
        help="more output (-v streams build output to the console)",
    )
    p.add_argument("-q", "--quiet", action="count", default=d(0), help="less output")
    p.add_argument(
        "--workdir",
        default=d(None),
        help="workspace for sources, logs, wheels [env ROCMBUILD_WORKDIR, default ./build]",
    )
    p.add_argument(
        "--cache-dir",
        default=d(None),
        help="download and wheel cache [env ROCMBUILD_CACHE_DIR, default <workdir>/cache]",
    )


def _lazy(module: str, func: str) -> Handler:
    """A handler that imports its module only when the command runs (keeps start-up fast)."""

    def handler(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(module), func)(args))

    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocmbuild",
        description="Build, check, publish and nightly-rebuild ROCm wheels for AMD Instinct GPUs. "
        "`rocmbuild <recipe> ...` is short for `rocmbuild build <recipe> ...`.",
    )
    parser.add_argument("--version", action="version", version=f"rocmbuild {__version__}")
    _add_global_options(parser, top=True)
    common = _Parser(add_help=False)
    _add_global_options(common, top=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub_add = sub.add_parser

    def add_parser(name: str, **kw: object) -> argparse.ArgumentParser:
        return sub_add(name, parents=[common], **kw)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign,assignment]

    p = sub.add_parser(
        "build",
        help="fetch, patch, build, tag and audit a wheel",
        description="Fetch, patch, hipify, build, tag and audit a wheel. A wheel "
        "already built from the same inputs is returned from the cache.",
    )
    _add_target_options(p)
    p.add_argument(
        "-w",
        "--wheel-dir",
        default=_env("ROCMBUILD_WHEEL_DIR"),
        help="where to put the wheel [env ROCMBUILD_WHEEL_DIR, default <workdir>/wheels]",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild even when the cache holds a wheel for these inputs",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument(
        "--validate",
        action="store_true",
        default=os.environ.get("ROCMBUILD_VALIDATE") == "1",
        help="validate the wheel after the build (isolated install, import, torch "
        "guard, audit, GPU kernel gate; reports in <workdir>/reports/) "
        "[env ROCMBUILD_VALIDATE=1]",
    )
    p.set_defaults(handler=_lazy("rocmbuild.pipeline", "cli_build"))

    p = sub.add_parser(
        "plan",
        help="print the resolved build plan; runs nothing",
        description="Render the recipe for a target and print the plan: sources, "
        "patches, environment, MAX_JOBS and why, commands and cache key.",
    )
    _add_target_options(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(handler=_lazy("rocmbuild.pipeline", "cli_plan"))

    p = sub.add_parser("recipes", help="list recipes, variants and supported archs")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=_lazy("rocmbuild.recipe.load", "cli_list"))

    # -- commands added by later capabilities register below, one block each --
    p = sub.add_parser(
        "doctor",
        help="check this host for a ROCm build: compiler, archs, GPUs, groups, torch, disk, memory",
        description="One line per check (ok / warn / fail) with the exact fix. Exit "
        "0 only when the requested build can run here; 10 otherwise.",
    )
    p.add_argument(
        "--arch",
        default=_env("ROCMBUILD_ARCH"),
        help="gfx targets to test-compile, e.g. gfx942 or gfx90a,gfx942 [env "
        "ROCMBUILD_ARCH; default: the GPUs found, else gfx90a,gfx942 as a warning]",
    )
    p.add_argument(
        "--variant",
        default=_env("ROCMBUILD_VARIANT"),
        help="with --recipe: the variant to check [env ROCMBUILD_VARIANT, default: the recipe's]",
    )
    p.add_argument(
        "--recipe",
        default=None,
        help="recipe whose disk, memory-per-job and host_requires (rocm-torch) to check against",
    )
    p.add_argument(
        "--hip-compiler",
        default=None,
        help="HIP compiler to check [env ROCMBUILD_HIP_COMPILER; default: detected]",
    )
    p.add_argument(
        "--root",
        default="/",
        help="file system root for sysfs, /dev, /etc/group, /opt/rocm (fixture trees)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.set_defaults(handler=_lazy("rocmbuild.doctor", "cli_doctor"))

    p = sub.add_parser(
        "audit",
        help="list the gfx targets in the device code of wheels / .so",
        description="For every ELF shared object in each wheel (or each .so/.o "
        "given), list the gfx targets in its HIP offload bundles (.hip_fatbin, "
        "CCOB-compressed, -fgpu-rdc). Exit 7 when a requested arch is missing or a "
        ".so has HIP host code but no device code.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="wheel, .so, .o or .hipfb files")
    p.add_argument(
        "--arch",
        default=None,
        help="gfx targets every HIP .so must carry, e.g. gfx90a,gfx942 (gfx90a also "
        "matches gfx90a:xnack+)",
    )
    p.add_argument("--json", action="store_true", help="print the audit as JSON on stdout")
    p.set_defaults(handler=_lazy("rocmbuild.audit", "cli_audit"))

    # [validate]
    # [publish]
    p = sub.add_parser(
        "validate",
        help="install wheels in a fresh venv, import, check torch "
        "compatibility, audit, and gate the attention kernels on a GPU",
        description="Validate wheels: isolated install and import, torch "
        "compatibility guard, code-object audit, and (on a GPU) attention "
        "correctness and throughput. Failing wheels move to <workdir>/broken/.",
    )
    p.add_argument("wheels", nargs="*", help="wheel files to validate together")
    p.add_argument(
        "--arch",
        default=_env("ROCMBUILD_ARCH"),
        help="gfx targets the audit requires [env ROCMBUILD_ARCH; default: the "
        "wheel's rocmbuild.json archs]",
    )
    p.add_argument(
        "--torch-from",
        default=_env("ROCMBUILD_TORCH_FROM"),
        help="site-packages dir holding the torch to validate against [env "
        "ROCMBUILD_TORCH_FROM; default: the torch this Python imports]",
    )
    p.add_argument(
        "--kernels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the GPU kernel gate (SKIPPED without a GPU) [default on]",
    )
    p.add_argument(
        "--kernel",
        default="auto",
        choices=["auto", "flash-attn", "sdpa", "hipattn"],
        help="kernel under test; auto: flash-attn when a wheel provides it, plus the "
        "hipattn probe on AMD hosts; sdpa checks the harness itself",
    )
    p.add_argument("--quick", action="store_true", help="small correctness/throughput subset")
    p.add_argument(
        "--inject-fault",
        choices=["scale", "no-causal", "nan"],
        default=None,
        help="self-test: wrap the kernel with a deliberate error; the gate must fail",
    )
    p.add_argument(
        "--cross-check",
        action="store_true",
        help="also time every call with triton.testing.do_bench",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="JSON report of the last good run on this host/arch; fail on a "
        "throughput drop beyond max(10%%, 3x run-to-run spread)",
    )
    p.add_argument("--json", default=None, help="write the JSON report here")
    p.add_argument("--md", default=None, help="write the Markdown report here")
    p.add_argument("--html", default=None, help="write the HTML report here")
    p.add_argument(
        "--keep-broken",
        action="store_true",
        help="leave failing wheels in place instead of moving them to broken/",
    )
    p.add_argument("--keep-venv", action="store_true", help="keep the validation venv")
    p.set_defaults(handler=_lazy("rocmbuild.validate", "cli_validate"))
    p = sub.add_parser(
        "publish",
        help="add wheels to an index (static directory or server)",
        description="Add wheels to a static PEP 503/691 index directory (atomic, "
        "immutable: an existing filename with other bytes is refused, identical "
        "bytes are a no-op) or upload them to an index server with twine.",
    )
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files to publish")
    p.add_argument(
        "--index",
        default=None,
        help="index directory, or http(s) upload URL of a server "
        "[env ROCMBUILD_INDEX, default <workdir>/index]",
    )
    p.add_argument(
        "--stage",
        default=None,
        help="stage of a directory index, e.g. staging "
        "(served at <index>/<stage>/simple/) [default stable]",
    )
    p.add_argument(
        "--simple-url",
        default=_env("ROCMBUILD_INDEX_SIMPLE_URL"),
        help="server only: its simple API root, used to check existing files "
        "[env ROCMBUILD_INDEX_SIMPLE_URL, default <index URL>/simple/]",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(handler=_lazy("rocmbuild.publish", "cli_publish"))

    p = sub.add_parser(
        "promote",
        help="copy a release from one stage to another, atomically",
        description="Copy every file of NAME==VERSION from one stage of a "
        "directory index to another in one atomic step.",
    )
    p.add_argument("spec", metavar="NAME==VERSION", help="release to promote")
    p.add_argument(
        "--from", dest="from_stage", default="staging", help="source stage [default staging]"
    )
    p.add_argument("--to", dest="to_stage", default="stable", help="target stage [default stable]")
    p.add_argument(
        "--index",
        default=None,
        help="index directory [env ROCMBUILD_INDEX, default <workdir>/index]",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(handler=_lazy("rocmbuild.publish", "cli_promote"))
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
