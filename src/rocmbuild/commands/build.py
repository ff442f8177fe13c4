"""``rocmbuild build <recipe>`` (and the shorthand ``rocmbuild <recipe>``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rocmbuild.commands import common, noop_memo
from rocmbuild.core import options

if TYPE_CHECKING:
    from rocmbuild.buildtools.compilecache import CompileCache
    from rocmbuild.core.config import Workspace


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "build", help="fetch, patch, build, tag and audit a wheel",
        description="Fetch, patch, hipify, build, bundle (rocm_runtime = bundle), tag and audit a "
        "wheel. A wheel already built "
        "from the same inputs is returned from the cache.")
    common.add_target_options(p)
    common.add_setting(p, "wheel_dir")
    p.add_argument("--force", action="store_true",
                   help="rebuild even when the cache holds a wheel for these inputs")
    common.add_json(p)
    for name in ("compile_cache", "compile_cache_dir", "validate"):
        common.add_setting(p, name)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild.artifacts.results import Status
    from rocmbuild.core import config, log
    from rocmbuild.pipeline import build as pipeline
    from rocmbuild.stages.context import Context

    t0 = time.monotonic()
    rendered = common.rendered_from_args(args)
    plan, host = rendered.plan, rendered.host
    ws = config.workspace(args.workdir, args.cache_dir)
    wheel_dir = options.resolve("wheel_dir", args.wheel_dir)
    kind = options.resolve("compile_cache", args.compile_cache, "auto")
    cache_dir = options.resolve("compile_cache_dir", args.compile_cache_dir)

    def compile_cache() -> CompileCache | None:
        from rocmbuild.buildtools import compilecache

        return compilecache.choose(kind, cache_dir, ws.cache,
                                   options.origin("compile_cache", args.compile_cache))

    ctx = Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key,
                  wheel_dir=Path(wheel_dir).absolute() if wheel_dir else ws.wheels,
                  host=host, force=args.force, choose_compile_cache=compile_cache)
    validate = bool(options.resolve("validate", args.validate))
    result = pipeline.build(plan, ctx, validate=validate)
    if not (args.force or validate or args.json):
        _remember(args, rendered, ws, ctx.wheel_dir)
    if args.json:
        common.print_json(result.to_json())
        return 0
    how = "cached" if result.status is Status.CACHED else "built"
    log.plain(noop_memo.result_line(result.wheel, result.sha256, time.monotonic() - t0, how))
    return 0


def _remember(args: argparse.Namespace, rendered: common.Rendered, ws: Workspace,
              wheel_dir: Path) -> None:
    """The memo that lets the same command line be served by ``commands.noop_memo`` next time."""
    from rocmbuild.recipe import load, search

    files = load.files_read(rendered.recipe, depends_on_others=bool(rendered.plan.depends))
    if files is None or rendered.wants is None:  # (build always detects its host)
        return
    absent, dirs = search.search_inputs(args.recipe, rendered.recipe.path)
    noop_memo.remember(
        getattr(args, "quick_inputs", None), cache_key=rendered.plan.cache_key, ws=ws,
        wheel_dir=wheel_dir, files=files, absent=absent, dirs=dirs, host=rendered.host,
        want_compiler=rendered.wants.compiler, want_components=rendered.wants.components,
        dists=rendered.wants.dists)
