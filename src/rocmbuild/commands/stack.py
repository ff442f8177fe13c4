"""``rocmbuild stack plan|build <stack>``: a set of recipes built against one torch, validated
together, published in one transaction with its lock files (docs/stacks.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rocmbuild.commands import common

if TYPE_CHECKING:
    from rocmbuild.host.detect import Host
    from rocmbuild.pipeline.stack import StackPlan


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "stack", help="plan or build a stack: recipes built against one torch, locked together",
        description="A stack file (stacks/<name>.toml or a path) names recipes built against the "
        "same torch. `stack plan` prints each member's plan; `stack build` builds each one, "
        "refuses a member built against another torch, validates the set in one venv, "
        "publishes it in one transaction and writes pylock.toml and constraints.txt per arch "
        "view (docs/stacks.md).")
    acts = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, what in (("plan", "print every member's plan; runs nothing"),
                       ("build", "build, check, validate, publish and lock the set")):
        a = acts.add_parser(name, help=what, description=what)
        a.add_argument("stack", help="stack name (stacks/<name>.toml) or path to a .toml file")
        for setting in ("arch", "jobs", "rocm_version", "rocm_path", "hip_compiler"):
            common.add_setting(a, setting, "stack")
        common.add_json(a)
        a.set_defaults(handler=run)
        if name == "plan":
            a.add_argument("--host", default=None, metavar="FILE",
                           help="plan for a saved host (`rocmbuild doctor --json > host.json` "
                           "there) instead of this machine")
        if name == "build":
            common.add_setting(a, "index", "stack")
            a.add_argument("--stage", default="stable", help="its stage [default stable]")
            a.add_argument("--index-url", default=None, metavar="URL",
                           help="where the index directory is served (the lock files name "
                           "<URL>/<stage>/files/<wheel>) [default: its file:// URL]")
            common.add_setting(a, "wheel_dir", "stack")
            a.add_argument("--force", action="store_true",
                           help="rebuild every member even when the cache holds it")
            a.add_argument("--no-kernels", action="store_true",
                           help="skip the GPU kernel gate of the validation")


def _plan(args: argparse.Namespace) -> tuple[StackPlan, Host]:
    from rocmbuild.core import config, options
    from rocmbuild.pipeline import stack as pipeline
    from rocmbuild.plan import planning
    from rocmbuild.recipe import stack as stackfile

    st = stackfile.load_stack(stackfile.find(args.stack))
    arch = options.resolve("arch", args.arch, "native")
    host = planning.host_for(pipeline.members(st, arch),
                             common.host_source(args, getattr(args, "host", None)))
    ws = config.workspace(args.workdir, args.cache_dir)
    return pipeline.plan_stack(st, arch, host, ws.cache, common.jobs(args),
                               options.resolve("rocm_version", args.rocm_version)), host


def run(args: argparse.Namespace) -> int:
    from rocmbuild.core import log

    splan, host = _plan(args)
    if args.action == "plan":
        if args.json:
            common.print_json(splan.to_json())
            return 0
        log.out.print(f"stack    {splan.stack.name} ({splan.stack.path})", markup=False)
        log.out.print(f"archs    {', '.join(splan.archs)}", markup=False)
        log.out.print(f"torch    {splan.torch or 'none'} (from {splan.stack.torch_from})",
                      markup=False)
        for m in splan.members:
            p = m.plan
            log.out.print(f"{m.member.key:<11} {p.recipe} variant {p.variant}"
                          + (f" line {p.release}" if p.release else "")
                          + f"  {'+' + p.local_version if p.local_version else 'no label'}"
                          + f"  MAX_JOBS {p.jobs}  key {p.short_key}",
                          markup=False)
        return 0
    return _build(args, splan, host)


def _build(args: argparse.Namespace, splan: StackPlan, host: Host) -> int:
    import time

    from rocmbuild.artifacts.results import Status
    from rocmbuild.commands.publish import index_and_broken, source_of
    from rocmbuild.core import config, log, options
    from rocmbuild.pipeline import build
    from rocmbuild.pipeline import stack as pipeline
    from rocmbuild.stages.context import Context

    t0 = time.monotonic()
    ws = config.workspace(args.workdir, args.cache_dir)
    wheel_dir = options.resolve("wheel_dir", args.wheel_dir)
    out = Path(wheel_dir).absolute() if wheel_dir else ws.wheels
    index, _, _ = index_and_broken(args)

    def build_one(mp: pipeline.MemberPlan, i: int, n: int) -> tuple[Path, bool]:
        ctx = Context(ws=ws, log_dir=ws.logs / mp.plan.recipe / mp.plan.short_key,
                      wheel_dir=out, host=host, force=args.force)
        res = build.build(mp.plan, ctx)
        return res.wheel, res.status is Status.CACHED

    result = pipeline.build_stack(
        splan, ws, build_one,
        pipeline.Publishing(index, args.stage, args.index_url or "",
                            source_of("index", args.index)),
        validate_kernels=not args.no_kernels)
    if args.json:
        common.print_json(result.to_json())
        return 0
    for b in result.built:
        log.plain(f"{b.member.key:<11} {b.wheel.filename} "
                  f"({'cached' if b.cached else 'built'})")
    for rel in result.locks:
        log.plain(f"lock        {Path(result.index) / result.stage / rel}")
    log.plain(f"stack {splan.stack.name}: {len(result.built)} wheels built, validated together "
              f"and published ({len(result.published)} new) in {time.monotonic() - t0:.1f}s")
    return 0
