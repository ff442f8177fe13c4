"""Validate built wheels: isolated install and import, torch compatibility guard, code-object
audit, and the attention kernel gate on a GPU.

    from rocmbuild import validate
    report = validate.run(wheels, archs, validate.ValidateOptions(...))
    report.ok  # False on any failure; failing wheels were copied to <workdir>/broken/ (never moved)

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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocmbuild.validate.model import (
        KernelsSummary,
        Step,
        ValidateOptions,
        ValidationReport,
        WheelReport,
    )
    from rocmbuild.validate.runner import raise_if_failed, run

__all__ = ["KernelsSummary", "Step", "ValidateOptions", "ValidationReport", "WheelReport",
           "raise_if_failed", "run"]

# Imported on first use: a cache hit (and the recipe check, which reads the kernel gate's adapter
# names from the kernelgate subpackage) must not pay for the validator's modules.
_LAZY = {"KernelsSummary": "model", "Step": "model", "ValidateOptions": "model",
         "ValidationReport": "model", "WheelReport": "model", "raise_if_failed": "runner",
         "run": "runner"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"rocmbuild.validate.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rocmbuild.validate' has no attribute {name!r}")
