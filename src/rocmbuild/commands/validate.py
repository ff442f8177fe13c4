"""``rocmbuild validate``: install wheels in a fresh venv, import, guard, audit, kernel gate."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rocmbuild.commands import common
from rocmbuild.programs import kernelgate, modelcheck

if TYPE_CHECKING:
    from rocmbuild.validate.model import ValidateOptions

MAX_UPSTREAM_TESTS = 100_000
"""The most --upstream-tests cases per test function."""


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "validate",
        help="install wheels in a fresh venv, import, check torch compatibility, audit, and gate "
        "the attention kernels on a GPU",
        description="Validate wheels: isolated install and import, torch compatibility guard, "
        "code-object audit, and (on a GPU) attention correctness and throughput. Failing wheels "
        "stay where they are; a copy goes to <workdir>/broken/ (publish refuses those bytes) and "
        "a cached build's entry is recorded as failed.")
    p.add_argument("wheels", nargs="*", help="wheel files to validate together")
    common.add_setting(p, "arch", "validate")
    common.add_setting(p, "torch_from")
    p.add_argument("--kernels", action=argparse.BooleanOptionalAction, default=True,
                   help="run the GPU kernel gate (SKIPPED without a GPU) [default on]")
    p.add_argument("--kernel", default="auto", choices=["auto", "flash-attn", "sdpa", "hipattn"],
                   help="kernel under test; auto: flash-attn when a wheel provides it, plus the "
                   "hipattn probe on AMD hosts; sdpa checks the harness itself")
    p.add_argument("--quick", action="store_true", help="small correctness/throughput subset")
    p.add_argument("--model", action=argparse.BooleanOptionalAction, default=True,
                   help="the model check of an attention wheel: a small decoder's logits and "
                   "gradients with the wheel's attention against torch SDPA and eager, through "
                   "transformers (SKIPPED without a GPU or transformers) [default on]")
    p.add_argument("--stack", dest="stack_step", action="store_true",
                   help="the stack step: one training step with the wheels together "
                   "(flash-attn, peft LoRA, bitsandbytes 4-bit, DeepSpeed ZeRO-2), as "
                   "`stack build` runs it")
    p.add_argument("--inject-fault", choices=[*kernelgate.FAULTS, *modelcheck.FAULTS],
                   default=None, help="self-test: wrap the kernel (last-tile: the model "
                   "check's attention) with a deliberate error; the check must fail")
    p.add_argument("--cross-check", action="store_true",
                   help="also time every call with triton.testing.do_bench")
    p.add_argument("--baseline", default=None, help="JSON report of the last good run on this "
                   "host/arch; fail on a throughput drop beyond max(10%%, 3x run-to-run spread)")
    p.add_argument("--upstream-tests", default="10", metavar="N",
                   help="run a seeded sample of N cases per test function of the package's own "
                   "tests (the recipe's upstream_tests, from the cached source tree); 0: off "
                   "[default 10]")
    p.add_argument("--upstream-time", default="600", metavar="SECONDS",
                   help="time cap of the upstream-test run; cases not reached are reported "
                   "[default 600]")
    p.add_argument("--upstream-src", default=None, metavar="DIR",
                   help="the source tree holding the upstream tests [default: the one the "
                   "build left in the workspace]")
    p.add_argument("--baseline-store", action=argparse.BooleanOptionalAction, default=True,
                   help="compare throughput with, and record passing runs into, the "
                   "workspace's baseline store (<workdir>/baselines/) [default on]")
    common.add_json(p, "the report")
    p.add_argument("--json-file", default=None, metavar="FILE",
                   help="write the JSON report here")
    p.add_argument("--md", default=None, metavar="FILE", help="write the Markdown report here")
    p.add_argument("--html", default=None, metavar="FILE", help="write the HTML report here")
    p.add_argument("--keep-broken", action="store_true",
                   help="do not copy failing wheels to <workdir>/broken/ (the given files are "
                   "never moved)")
    p.add_argument("--keep-venv", action="store_true", help="keep the validation venv")
    p.add_argument("--with", dest="with_requirements", action="append", default=[],
                   metavar="REQ", help="also install REQ (a PEP 508 requirement) into the "
                   "validation venv, from the configured index / find-links (pip.conf, PIP_*); "
                   "repeatable; adds to the recipe's [validate] requires")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild.core import log
    from rocmbuild.core.errors import RocmbuildError
    from rocmbuild.validate import report as render
    from rocmbuild.validate import runner as vrunner

    wheels = [Path(w) for w in args.wheels]
    try:
        opts, archs = _options(args)
    except RocmbuildError as exc:  # --json-file is written for every early exit
        vrunner.write_stopped(exc, Path(args.json_file) if args.json_file else None, wheels)
        raise
    rep = vrunner.run(wheels, archs, opts)
    if args.json:
        common.print_json(rep.to_json())
    else:
        log.out.print(render.to_markdown(rep.to_json()), markup=False)
    vrunner.raise_if_failed(rep, opts, shown=not args.json)
    return 0


def _options(args: argparse.Namespace) -> tuple[ValidateOptions, tuple[str, ...]]:
    from rocmbuild.core import config, options, quantity
    from rocmbuild.core.errors import UsageError
    from rocmbuild.core.gfx import parse_archs
    from rocmbuild.recipe.load import requirement_problem
    from rocmbuild.validate import model as vmodel

    for req in args.with_requirements:
        problem = requirement_problem(req)
        if problem:
            raise UsageError(f"--with: {problem}",
                             hint='one PEP 508 requirement per --with, e.g. --with "triton>=3.0"')
    upstream_tests = common.quantity_flag(
        "--upstream-tests", args.upstream_tests,
        lambda v: quantity.count(v, 0, MAX_UPSTREAM_TESTS, "a number of cases"),
        f"a whole number of cases per test function, 0 (off) to {MAX_UPSTREAM_TESTS}")
    try:
        upstream_time = quantity.duration(args.upstream_time)
    except quantity.BadQuantity as exc:
        raise UsageError(f"--upstream-time: must be a number of seconds > 0 ({exc})",
                         hint="e.g. --upstream-time 600 or 10m (at most a year); "
                         "--upstream-tests 0 turns the step off") from None
    if not args.wheels and args.kernel == "auto":
        raise UsageError("validate: no wheels given",
                         hint="pass .whl files, or --kernel sdpa to check the harness alone")

    def path(value: str | None) -> Path | None:
        return Path(value) if value else None

    arch = options.resolve("arch", args.arch)
    opts = vmodel.ValidateOptions(
        workdir=str(config.workspace(args.workdir, args.cache_dir).root),
        torch_from=path(options.resolve("torch_from", args.torch_from)),
        kernels=args.kernels, kernel=args.kernel, quick=args.quick,
        inject_fault=args.inject_fault, cross_check=args.cross_check,
        baseline=path(args.baseline), json_out=path(args.json_file), md_out=path(args.md),
        html_out=path(args.html), copy_broken=not args.keep_broken, keep_venv=args.keep_venv,
        with_requirements=tuple(args.with_requirements),
        upstream_tests=upstream_tests, upstream_time_s=upstream_time,
        upstream_src=path(args.upstream_src), baseline_store=args.baseline_store,
        model=args.model, stack_step=args.stack_step)
    return opts, tuple(parse_archs(arch)) if arch else ()
