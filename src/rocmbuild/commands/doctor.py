"""``rocmbuild doctor``: can this host do the requested build? One line per check."""

from __future__ import annotations

import argparse
from pathlib import Path

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this host for a ROCm build: compiler, archs, GPUs, groups, torch, disk, memory",
        description="One line per check (ok / warn / fail) with the exact fix. Exit 0 only when "
        "the requested build can run here; 10 otherwise. --json prints the checks and this "
        "host's facts (the file `rocmbuild plan --host` reads).")
    for name in ("arch", "variant", "release"):
        common.add_setting(p, name, "doctor")
    p.add_argument("--recipe", default=None, help="recipe whose disk, memory-per-job, "
                   "host_requires (ROCm SDK and torch ranges) and rocm_components to check "
                   "against")
    common.add_setting(p, "hip_compiler", "doctor")
    p.add_argument("--root", default="/", help="file system root for sysfs, /dev, /etc/group, "
                   "/opt/rocm (fixture trees)")
    common.add_setting(p, "index", "doctor")
    common.add_json(p, "the report and this host")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from rocmbuild.core import config, log, options
    from rocmbuild.core import gfx as arch
    from rocmbuild.core.errors import ToolchainError
    from rocmbuild.pipeline import doctor

    if args.recipe:  # a recipe that does not exist is a usage error, before any check runs
        from rocmbuild.recipe import search

        search.find_recipe(args.recipe)
    spec = options.resolve("arch", args.arch)
    archs: list[str] | None = None
    if spec:
        archs = ["native"] if spec.strip() == "native" else list(arch.parse_archs(spec))
    report = doctor.diagnose(root=Path(args.root), archs=archs, recipe=args.recipe,
                             variant=options.resolve("variant", args.variant),
                             release=options.resolve("release", args.release),
                             hip_compiler=options.resolve("hip_compiler", args.hip_compiler),
                             index=options.resolve("index", args.index),
                             cache=config.workspace(args.workdir, args.cache_dir).cache)
    if args.json:
        common.print_json(report.to_json())
    else:
        colors = {"ok": "green", "warn": "yellow", "fail": "red"}
        for c in report.checks:
            log.console.print(f"[{colors[c.status]}]{c.status:<4}[/] {c.name:<14} "
                              f"{escape(c.message)}")
            if c.fix and c.status != "ok":
                log.console.print(f"{'':<20}[cyan]fix:[/cyan] {escape(c.fix)}")
    fails = report.failures()
    if fails:
        raise ToolchainError(
            f"doctor: {len(fails)} check(s) failed: {', '.join(c.name for c in fails)}",
            hint=fails[0].fix)
    return 0
