"""``rocmbuild plan <recipe>``: the resolved plan; runs nothing."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "plan", help="print the resolved build plan; runs nothing",
        description="Render the recipe for a target and print the plan: sources, patches, "
        "environment, MAX_JOBS and why, commands and cache key. With --host, render it for the "
        "machine that wrote that file (`rocmbuild doctor --json > host.json` there).")
    common.add_target_options(p)
    p.add_argument("--host", default=None, metavar="FILE",
                   help="render for a saved host (the JSON `rocmbuild doctor --json` prints) "
                   "instead of this machine; --rocm-path and --hip-compiler then do not apply")
    common.add_json(p, "the plan")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild import host as hostmod
    from rocmbuild import log

    plan, host = common.plan_from_args(args, args.host)
    if args.json:
        common.print_json(plan.to_json())
    else:
        _print(plan)
    where = "this host" if host.origin == "detected" else f"the host in {host.origin}"
    for m in hostmod.missing(plan, host):
        log.warn(f"{where} lacks {m}; `rocmbuild build` would stop before fetching")
    return 0


def _print(plan: object) -> None:
    from rocmbuild import log
    from rocmbuild.recipe.plan import Plan, display

    assert isinstance(plan, Plan)
    p = log.out.print
    src = plan.source
    p(f"[bold]{plan.recipe}[/bold] variant={plan.variant} archs={','.join(plan.archs)} "
      f"-> +{plan.local_version}")
    pin = src.commit or src.sha256 or str(display(Path(src.path)))
    p(f"source   {plan.source_name}: {src.kind} {src.url} @ {pin}"
      + (f"  submodules={','.join(src.submodules)}" if src.submodules else ""), markup=False)
    for pt in plan.patches:
        p(f"patch    {display(pt.file)} ({pt.sha256[:12]}): {pt.reason}", markup=False)
    for d in plan.downloads:
        p(f"download {d.name} ({d.sha256[:12]}{', extracted' if d.extract else ''}) -> "
          f"${d.env}: {d.url}", markup=False)
    p(f"MAX_JOBS {plan.jobs}: {plan.jobs_reason}", markup=False)
    p(f"ROCm     {plan.rocm.version} (from {plan.rocm.version_from})", markup=False)
    for k, v in plan.env.items():
        p(f"env      {k}={shlex.quote(v)}", markup=False)
    if plan.hipify:
        p(f"hipify   {shlex.join(plan.hipify)}", markup=False)
    for c in plan.commands:
        p(f"run      {shlex.join(c)}", markup=False)
    p("network  " + ("none: the build runs offline (a network namespace)" if plan.offline
                     else "the build may use the network (build.offline = false)"),
      markup=False)
    p(f"cache    {plan.cache_key}")
