"""What validation takes and gives: its options and its report, as typed values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild import __version__
from rocmbuild.artifacts.results import StageResult, Status
from rocmbuild.validate.kernelrun import KernelRun

# The per-wheel steps, in the order they run and are shown.
STEPS = ("install", "guard", "import", "audit", "kernels", "upstream")


@dataclass(frozen=True)
class ValidateOptions:
    workdir: str | None = None  # workspace root (None: config.workspace's default)
    torch_from: Path | None = None  # site-packages dir holding torch; default: the host's torch
    kernels: bool = True  # run the GPU kernel gate (SKIPPED anyway without a GPU)
    kernel: str = "auto"  # auto, or one of kernelgate.ADAPTER_NAMES
    quick: bool = False
    inject_fault: str | None = None  # one of kernelgate.FAULTS (self-test of the gate)
    cross_check: bool = False  # also time with triton.testing.do_bench
    baseline: Path | None = None
    json_out: Path | None = None
    md_out: Path | None = None
    html_out: Path | None = None
    copy_broken: bool = True  # copy failing wheels to <workdir>/broken/ (never moved)
    keep_venv: bool = False
    with_requirements: tuple[str, ...] = ()  # validate --with: extra packages for the venv
    upstream_tests: int = 10  # cases sampled per upstream test function (0: off)
    upstream_time_s: float = 600.0  # time cap of the upstream-test run
    upstream_src: Path | None = None  # source tree holding them (default: the workspace's)
    baseline_store: bool = True  # compare with and record into <workdir>/baselines/
    model: bool = True  # the model check of an attention wheel (SKIPPED without GPU/transformers)
    stack_step: bool = False  # the stack step: one training step with every member

    @property
    def outputs(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.json_out, self.md_out, self.html_out) if p is not None)


@dataclass(frozen=True)
class Step:
    """One validation step of one wheel. WARNING passes, with something to read."""

    status: Status
    reason: str = ""
    detail: Any = None  # JSON-able facts (guard comparisons, audit report, tracebacks)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status.value, "reason": self.reason}
        if self.detail is not None:
            d["detail"] = self.detail
        return d


@dataclass(frozen=True)
class WheelReport:
    wheel: str  # file name
    name: str
    version: str
    steps: Mapping[str, Step]
    broken_copy: Path | None = None  # the copy of a failing wheel in <workdir>/broken/

    @property
    def ok(self) -> bool:
        return not any(s.status.failed for s in self.steps.values())

    def to_json(self) -> dict[str, Any]:
        return {"wheel": self.wheel, "name": self.name, "version": self.version,
                "status": (Status.SUCCESS if self.ok else Status.FAILED).value,
                "steps": {k: v.to_json() for k, v in self.steps.items()},
                "broken_copy": str(self.broken_copy) if self.broken_copy else None}


NO_DEVICE = ("no GPU:", "torch cannot be imported:")
"""How the kernel gate's harness begins the reason of a run it SKIPPED because nothing here can
run a kernel (programs/kernelgate/harness.py; a unit test holds the two together)."""


@dataclass(frozen=True)
class KernelsSummary:
    """The kernel gate over all its runs: FAILED if any failed, SUCCESS if any passed, else
    SKIPPED with the reasons (never SUCCESS when nothing ran)."""

    status: Status
    reason: str = ""
    runs: tuple[KernelRun, ...] = ()

    def needs_a_gpu(self) -> str:
        """Why the gate could not run here, when it had kernels to check and every one was
        SKIPPED for want of a GPU (or of an importable torch, the gate's own reasons, written
        by programs/kernelgate/harness.py); "" otherwise (it ran, or had nothing to check)."""
        if self.status is not Status.SKIPPED or not self.runs:
            return ""
        if all(r.status is Status.SKIPPED and r.reason.startswith(NO_DEVICE) for r in self.runs):
            return self.runs[0].reason
        return ""

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs], "status": self.status.value,
                "reason": self.reason}


@dataclass(frozen=True)
class Environment:
    """The validation venv, as the import probe saw it."""

    torch: Mapping[str, Any] | None  # version, hip, cuda, cxx11_abi, path; None: no torch
    torch_error: str | None
    python: str | None
    runtime_env: Mapping[str, str]
    venv_torch_from: Path | None
    log: Path

    def to_json(self) -> dict[str, Any]:
        return {"torch": dict(self.torch) if self.torch is not None else None,
                "torch_error": self.torch_error, "python": self.python,
                "runtime_env": dict(self.runtime_env),
                "venv_torch_from": str(self.venv_torch_from) if self.venv_torch_from else None,
                "log": str(self.log)}


@dataclass(frozen=True)
class ValidationReport:
    wheels: tuple[WheelReport, ...]
    archs: tuple[str, ...]
    kernels: KernelsSummary
    environment: Environment
    created: str
    duration_s: float = 0.0
    paths: tuple[Path, ...] = field(default=())  # the report files written
    model_check: Step = Step(Status.SKIPPED, "not run")
    stack_check: Step = Step(Status.SKIPPED, "not run")

    @property
    def ok(self) -> bool:
        return (all(w.ok for w in self.wheels) and not self.kernels.status.failed
                and not self.model_check.status.failed and not self.stack_check.status.failed)

    @property
    def failures(self) -> list[str]:
        out = [f"{w.wheel}: {k}: {s.reason}" for w in self.wheels for k, s in w.steps.items()
               if s.status.failed]
        if self.kernels.status.failed:
            out.append(f"kernels: {self.kernels.reason}")
        for name, st in (("model check", self.model_check), ("stack step", self.stack_check)):
            if st.status.failed:
                out.append(f"{name}: {st.reason}")
        return out

    def stage_result(self) -> StageResult:
        """The pipeline's validate stage: FAILED on any failure, else SUCCESS, with a one-line
        reason and the validation log. The report itself is in the files it was written to."""
        if self.ok:
            kernels = self.kernels.status.value + (f" ({self.kernels.reason})"
                                                   if self.kernels.reason else "")
            reason = f"{len(self.wheels)} wheel(s) passed; kernel gate {kernels}"
        else:
            reason = "; ".join(self.failures[:3])
        return StageResult(Status.SUCCESS if self.ok else Status.FAILED, self.duration_s,
                           reason, self.environment.log)

    def to_json(self) -> dict[str, Any]:
        return {"rocmbuild_version": __version__, "created": self.created,
                "status": (Status.SUCCESS if self.ok else Status.FAILED).value,
                "archs": list(self.archs), "duration_s": round(self.duration_s, 2),
                "environment": self.environment.to_json(),
                "wheels": [w.to_json() for w in self.wheels], "kernels": self.kernels.to_json(),
                "model": self.model_check.to_json(), "stack": self.stack_check.to_json(),
                "failures": self.failures}
