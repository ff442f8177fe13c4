"""Validate built wheels: isolated install and import, torch compatibility guard, code-object
audit, and the attention kernel gate on a GPU.

    from rocmbuild import validate
    report = validate.run(wheels, archs, validate.ValidateOptions(...))
    report.ok  # False on any failure; failing wheels were moved to <workdir>/broken/

``run`` never raises for a failed check (only for bad input); ``raise_if_failed`` turns
``not ok`` into ValidationError (exit 8). The pipeline's stage is ``rocmbuild.stages.validate``.

- model.py      ValidateOptions, Step, WheelReport, KernelsSummary, ValidationReport
- runner.py     the steps in order (``run``), the report files, ``raise_if_failed``
- install.py    the isolated venv, install, import probe, torch guard
- kernels.py    the kernel step: runs ``kernelgate`` (copied into the venv) per kernel
- kernelrun.py  ``KernelRun``: the gate's JSON read back as typed values
- baseline.py   this run's throughput against the last good run's
- report.py     Markdown and HTML rendering of the JSON report
- kernelgate/   the gate itself (stdlib + torch only)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rocmbuild import config, log
from rocmbuild.errors import UsageError
from rocmbuild.validate.model import (
    KernelsSummary,
    Step,
    ValidateOptions,
    ValidationReport,
    WheelReport,
)
from rocmbuild.validate.runner import raise_if_failed, run

__all__ = ["KernelsSummary", "Step", "ValidateOptions", "ValidationReport", "WheelReport",
           "cli_validate", "raise_if_failed", "run"]


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def cli_validate(args: argparse.Namespace) -> int:
    """`rocmbuild validate`: the Namespace into ValidateOptions, run, print the table, exit 8 on
    failure (the command layer's job; it moves to commands/validate.py)."""
    from rocmbuild.arch import parse_archs
    from rocmbuild.validate import report as render

    if not args.wheels and args.kernel == "auto":
        raise UsageError("validate: no wheels given",
                         hint="pass .whl files, or --kernel sdpa to check the harness alone")
    # `--json FILE` today; `--json` (stdout) with `--json-file FILE` once --json means stdout in
    # every command.
    to_stdout = args.json is True
    json_file = args.json if isinstance(args.json, str) else getattr(args, "json_file", None)
    opts = ValidateOptions(
        workdir=str(config.workspace(args.workdir).root), torch_from=_path(args.torch_from),
        kernels=args.kernels, kernel=args.kernel, quick=args.quick,
        inject_fault=args.inject_fault, cross_check=args.cross_check,
        baseline=_path(args.baseline), json_out=_path(json_file), md_out=_path(args.md),
        html_out=_path(args.html), move_broken=not args.keep_broken, keep_venv=args.keep_venv)
    rep = run([Path(w) for w in args.wheels], parse_archs(args.arch) if args.arch else (), opts)
    if to_stdout:
        log.out.print_json(json.dumps(rep.to_json(), default=str))
    else:
        log.out.print(render.to_markdown(rep.to_json()), markup=False)
    raise_if_failed(rep, opts, shown=not to_stdout)
    return 0
