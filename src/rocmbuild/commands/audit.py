"""``rocmbuild audit``: the gfx targets in the device code of wheels and shared objects."""

from __future__ import annotations

import argparse
from pathlib import Path

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "audit", help="list the gfx targets in the device code of wheels / .so",
        description="For every ELF shared object in each wheel (or each .so/.o given), list the "
        "gfx targets in its HIP offload bundles (.hip_fatbin, CCOB-compressed, -fgpu-rdc). Exit 7 "
        "when a requested arch is missing, a .so has HIP host code but no device code, or a file "
        "named .so (or a wheel member) is not a shared object (a relocatable object, a core "
        "dump).")
    p.add_argument("paths", nargs="+", metavar="PATH", help="wheel, .so, .o or .hipfb files")
    common.add_setting(p, "arch", "audit")
    common.add_json(p, "the audit")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from rocmbuild.artifacts import audit
    from rocmbuild.core import log, options
    from rocmbuild.core.gfx import parse_archs

    spec = options.resolve("arch", args.arch)
    archs = list(parse_archs(spec)) if spec else []
    audits = [audit.audit_file(Path(p), archs) for p in args.paths]
    if args.json:
        common.print_json([a.to_json() for a in audits])
    else:
        for a in audits:
            mark = "[green]ok[/green]" if a.ok else "[red]FAIL[/red]"
            log.console.print(f"{mark} {escape(a.path)}"
                              + (f"  (wanted: {', '.join(archs)})" if archs else ""))
            if not a.objects:
                log.console.print("    no ELF shared objects (pure-Python wheel)")
            for o in a.objects:
                kinds = ",".join(o.bundle_kinds) or "-"
                what = ", ".join(o.archs) if o.archs else (
                    "NO DEVICE CODE" if o.hip_host else "host-only")
                if o.kind != "shared object":
                    what += f" ({o.kind})"
                log.console.print(f"    {escape(o.name)}: {escape(what)}  [dim]bundles: "
                                  f"{len(o.bundles)} ({kinds})[/dim]")
    for a in audits:
        for w in a.warnings:
            log.warn(w)
    audit.require_all(audits, archs)
    return 0
