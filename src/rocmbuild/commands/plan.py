"""``rocmbuild plan <recipe>``: the resolved plan; runs nothing."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import Any

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
    p.add_argument("--units", action="store_true",
                   help="fetch the source (into a temporary tree; downloads and mirrors are "
                   "cached) and count the compile units the build will have, for recipes that "
                   "say how (build.unit_count; the cmake backend: configure, then count "
                   "ninja's object files): `compile units: 697 (OPT_DIM=128)`")
    common.add_json(p, "the plan")
    p.set_defaults(handler=run)


def host_env(plan: object, here: bool) -> dict[str, Any]:
    """What the build sees of the host's environment: the allow-list and, when planning for
    this machine, the NAMES of the variables set here that pass it (values may be secrets:
    a proxy or index URL with a password)."""
    from rocmbuild.core import hostenv
    from rocmbuild.plan.model import Plan

    assert isinstance(plan, Plan)
    return {"allow": [*hostenv.PASS_ENV, *plan.pass_env],
            "passed": sorted(hostenv.passed(os.environ, plan.pass_env)) if here else None}


def run(args: argparse.Namespace) -> int:
    from rocmbuild.core import log
    from rocmbuild.plan import requirements

    plan, host = common.plan_from_args(args, args.host)
    seen = host_env(plan, host.origin == "detected")
    counted = None
    if args.units:
        from rocmbuild.core import config
        from rocmbuild.pipeline import units

        counted = units.fetch_and_count(plan, config.workspace(args.workdir, args.cache_dir),
                                        host)
    root = host.rocm_root
    if args.json:  # rocm_root: the host's, as found (its where and targets); not in the cache key
        common.print_json({**plan.to_json(), "host_env": seen,
                           "rocm_root": None if root is None else host.to_json()["rocm_root"],
                           **({"units": counted.to_json()} if counted else {})})
    else:
        _print(plan, seen)
        if root is not None:
            log.out.print(f"root     {root.path} ({root.where}"
                          + ("" if root.targets is None else
                             f", targets {';'.join(root.targets) or 'none'}") + ")", markup=False)
        if counted:
            log.out.print(f"units    {counted.line()}"
                          + (f": {counted.how}" if counted.count is not None else ""),
                          markup=False)
    where = "this host" if host.origin == "detected" else f"the host in {host.origin}"
    for m in requirements.missing(plan, host):
        log.warn(f"{where} lacks {m}; `rocmbuild build` would stop before fetching")
    return 0


def _print(plan: object, seen: dict[str, Any]) -> None:
    from rocmbuild.core import log
    from rocmbuild.core.log import redact
    from rocmbuild.plan.model import Plan, display

    assert isinstance(plan, Plan)
    p = log.out.print
    src = plan.source
    p(f"[bold]{plan.recipe}[/bold] variant={plan.variant} "
      f"archs={','.join(plan.archs) or 'none (arch-independent)'} "
      f"-> {'+' + plan.local_version if plan.local_version else 'no local label'}")
    if plan.release:
        p(f"release  {plan.release}: {plan.release_why}", markup=False)
    pin = src.commit or src.sha256 or str(display(Path(src.path)))
    p(f"source   {plan.source_name}: {src.kind} {redact(src.url)} @ {pin}"
      + (f"  submodules={','.join(src.submodules)}" if src.submodules else ""), markup=False)
    for pt in plan.patches:
        p(f"patch    {display(pt.file)} ({pt.sha256[:12]}): {pt.reason}", markup=False)
    for d in plan.downloads:
        p(f"download {d.name} ({d.sha256[:12]}{', extracted' if d.extract else ''}) -> "
          f"${d.env}: {redact(d.url)}", markup=False)
    p(f"MAX_JOBS {plan.jobs}: {plan.jobs_reason}", markup=False)
    p(f"ROCm     {plan.rocm.version} (from {plan.rocm.version_from})", markup=False)
    rt = plan.runtime
    if rt.mode == "bundle":
        p(f"runtime  bundle: {len(rt.libs)} library pattern(s) "
          f"({', '.join(rt.libs[:3])}{', ...' if len(rt.libs) > 3 else ''}), "
          f"{len(rt.data)} data glob(s) from the ROCm root; RPATH $ORIGIN/...", markup=False)
    elif rt.mode == "none":
        p("runtime  none: no device code; the wheel needs no ROCm, is the same for every "
          "--arch and carries no Requires-External", markup=False)
    else:
        p(f"runtime  host: native wheels need ROCm {plan.rocm.version} on the host "
          "(METADATA Requires-External)", markup=False)
    if plan.host_requires or plan.rocm_components:
        p(f"host     {', '.join(plan.host_requires) or '-'}; ROCm components: "
          f"{', '.join(plan.rocm_components) or '-'}", markup=False)
    for k, v in plan.env.items():
        p(f"env      {k}={shlex.quote(v)}", markup=False)
    for name, value in plan.options:
        p(f"option   {name}={value} (--opt {plan.recipe}.{name}=...)", markup=False)
    step = plan.hipify_step
    if plan.pass_env:
        p(f"pass_env {' '.join(plan.pass_env)} (build.pass_env)", markup=False)
    if seen["passed"] is None:
        p("host env on that host: the variables matching the allow-list (`plan --json`: "
          "host_env.allow); every other one is withheld", markup=False)
    else:
        p(f"host env {' '.join(seen['passed']) or '(none)'} (names only; every other host "
          "variable is withheld)", markup=False)
    if plan.label_torch:
        mm = ".".join((plan.host.torch or "").split("+")[0].split(".")[:2]) or "<X.Y>"
        shown = plan.label(f"torch{mm}.cxx11abi<true|false>")
        p(f"label    +{shown} (target.label_torch: torch and its C++ ABI as the build "
          "imports them)", markup=False)
    if plan.hipify:
        p(f"hipify   {shlex.join(plan.hipify)}" + ("  (strict)" if step and step.strict else ""),
          markup=False)
    elif step is not None:
        p(f"hipify   {step.tool}: {step.project_dir or '.'} includes={','.join(step.includes)}"
          + (f" ignores={','.join(step.ignores)}" if step.ignores else "")
          + (" out-of-place" if step.out_of_place else " in-place")
          + (" strict" if step.strict else ""), markup=False)
    for dep in plan.depends:
        p(f"depends  {dep.recipe} (variant {dep.variant}, {dep.package}) cache {dep.cache_key}: "
          "built first, its wheel installed into the build env (its plan: `rocmbuild plan "
          f"{display(dep.recipe_path)}`)", markup=False)
    for c in plan.commands:
        p(f"run      {shlex.join(c)}", markup=False)
    p("network  " + ("none: the build runs offline (a network namespace)" if plan.offline
                     else "the build may use the network (build.offline = false)"),
      markup=False)
    p(f"cache    {plan.cache_key}")
