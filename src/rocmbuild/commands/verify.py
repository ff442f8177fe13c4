"""``rocmbuild verify <wheel>``: rebuild a wheel from its own provenance and compare."""

from __future__ import annotations

import argparse
from pathlib import Path

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "verify", help="rebuild a wheel from its provenance and compare the bytes",
        description="Read the wheel's provenance (*.dist-info/rocmbuild.json: recipe and its "
        "hash, source pin, patches, variant, archs, toolchain), find the recipe, rebuild with "
        "--force in a temporary workspace and compare: 'reproduced' (exit 0) or the first "
        "differing members (exit 13; diffoscope's report when it is installed). Refuses when "
        "the provenance was edited after the build (exit 13), or the recipe's hash or pins "
        "(exit 3) or this host's toolchain (exit 10) differ from the wheel's.")
    p.add_argument("wheel", help="a wheel built by rocmbuild")
    p.add_argument("--recipe", default=None, help="the recipe file or name to rebuild from "
                   "[default: the recipe named in the wheel, on the recipe search path]")
    common.add_setting(p, "hip_compiler", "verify")
    common.add_setting(p, "rocm_path")
    common.add_json(p, "the comparison")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from rocmbuild.core import config, log
    from rocmbuild.pipeline import verify

    ws = config.workspace(args.workdir, args.cache_dir)
    result = verify.verify(Path(args.wheel), ws.cache, args.recipe, args.rocm_path,
                           args.hip_compiler)
    if args.json:
        common.print_json(result.to_json())
    elif result.reproduced:
        log.console.print(f"reproduced  {escape(result.wheel.name)}  sha256={result.sha256}",
                          highlight=False)
    else:
        log.console.print(f"[red]differs[/red]  {escape(result.wheel.name)}  sha256="
                          f"{result.sha256}, rebuilt {result.rebuilt_sha256}", highlight=False)
        for note in result.notes:
            log.console.print(f"  {escape(note)}", highlight=False)
        for d in result.differences:
            log.console.print(
                f"  {escape(d.name)}: {escape(d.what)}  size {d.size} vs {d.rebuilt_size}  "
                f"sha256 {(d.sha256 or '-')[:12]} vs {(d.rebuilt_sha256 or '-')[:12]}",
                highlight=False)
        if result.more:
            log.console.print(f"  ... and {result.more} more", highlight=False)
        if result.diffoscope:
            log.console.print(escape(result.diffoscope), highlight=False)
    verify.require_reproduced(result)
    return 0
