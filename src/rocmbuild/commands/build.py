"""``rocmbuild build <recipe>`` (and the shorthand ``rocmbuild <recipe>``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rocmbuild import options
from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "build", help="fetch, patch, build, tag and audit a wheel",
        description="Fetch, patch, hipify, build, bundle (rocm_runtime = bundle), tag and audit a "
        "wheel. A wheel already built "
        "from the same inputs is returned from the cache.")
    common.add_target_options(p)
    p.add_argument("-w", "--wheel-dir", default=None, help="where to put the wheel "
                   + common.env_help("wheel_dir", "<workdir>/wheels"))
    p.add_argument("--force", action="store_true",
                   help="rebuild even when the cache holds a wheel for these inputs")
    common.add_json(p)
    p.add_argument("--compile-cache", choices=("auto", "ccache", "sccache", "none"),
                   default=None, help="compiler cache in front of the build's compilers "
                   "(docs/compile-cache.md): auto takes ccache, else sccache, else none "
                   + common.env_help("compile_cache", "auto"))
    p.add_argument("--compile-cache-dir", default=None, metavar="DIR",
                   help="the compile cache's directory; share it between workspaces and "
                   "nodes " + common.env_help("compile_cache_dir", "<cache-dir>/compile/<tool>"))
    p.add_argument("--validate", action="store_true", default=None,
                   help="validate the wheel after the build (isolated install, import, torch "
                   "guard, audit, GPU kernel gate; reports in <workdir>/reports/) "
                   + common.env_help("validate", "off; the variable takes 1/true/yes/on"))
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild import compilecache, config, log, pipeline
    from rocmbuild.results import Status
    from rocmbuild.stages import Context

    t0 = time.monotonic()
    plan, host = common.plan_from_args(args)
    ws = config.workspace(args.workdir, args.cache_dir)
    wheel_dir = options.resolve("wheel_dir", args.wheel_dir)
    kind = options.resolve("compile_cache", args.compile_cache, "auto")
    compile_cache = compilecache.choose(
        kind, options.resolve("compile_cache_dir", args.compile_cache_dir), ws.cache,
        options.origin("compile_cache", args.compile_cache))
    ctx = Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key,
                  wheel_dir=Path(wheel_dir).absolute() if wheel_dir else ws.wheels,
                  host=host, force=args.force, compile_cache=compile_cache)
    result = pipeline.build(plan, ctx, validate=bool(options.resolve("validate", args.validate)))
    if args.json:
        common.print_json(result.to_json())
        return 0
    how = "cached" if result.status is Status.CACHED else "built"
    log.plain(
        f"{common.rel(result.wheel)}  sha256={result.sha256}  {time.monotonic() - t0:.2f}s  {how}")
    return 0
