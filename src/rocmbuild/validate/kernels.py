"""The kernel step: pick the kernels to gate, run the kernel gate inside the validation venv,
read its JSON back as ``KernelRun``, hold it against the baseline, and sum the runs up."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core import log, untrusted
from rocmbuild.core.errors import UsageError
from rocmbuild.core.run import run as run_cmd
from rocmbuild.programs import kernelgate, modelcheck
from rocmbuild.validate import baseline as baseline_cmp
from rocmbuild.validate import install as inst
from rocmbuild.validate.kernelrun import KernelRun
from rocmbuild.validate.model import KernelsSummary, ValidateOptions

GATE_DIR = Path(kernelgate.__file__).parent
# The kernel gate's package name inside the validation venv (its modules import each other
# relatively, so the name is free; this one cannot shadow anything the wheels bring).
GATE_MODULE = "rocmbuild_kernelgate"
KERNEL_TIMEOUT_S = 3600.0
REPORT_MAX = 64 << 20
"""The largest kernel gate report read back (bytes)."""


def check_options(opts: ValidateOptions) -> None:
    """UsageError for a kernel or fault the gate does not have."""
    if opts.kernel != "auto" and opts.kernel not in kernelgate.ADAPTER_NAMES:
        raise UsageError(f"--kernel: unknown kernel {opts.kernel!r}",
                         hint=f"choose from auto, {', '.join(kernelgate.ADAPTER_NAMES)}")
    faults = (*kernelgate.FAULTS, *modelcheck.FAULTS)
    if opts.inject_fault and opts.inject_fault not in faults:
        raise UsageError(f"--inject-fault: unknown fault {opts.inject_fault!r}",
                         hint=f"choose from {', '.join(faults)}")


def pick(opts: ValidateOptions, wheels: Sequence[WheelInfo],
         env_torch: Mapping[str, Any] | None) -> list[str]:
    """``--kernel auto``: flash-attn when a wheel provides flash_attn, plus the hipattn probe on
    a HIP torch (the toolchain's own smoke test; SKIPPED when not importable)."""
    if opts.kernel != "auto":
        return [opts.kernel]
    kernels = []
    if any("flash_attn" in w.top_level for w in wheels):
        kernels.append("flash-attn")
    if env_torch and env_torch.get("hip"):
        kernels.append("hipattn")
    return kernels


def install_gate(venv: inst.Venv) -> None:
    """Copy the kernelgate package into the venv's site-packages as GATE_MODULE."""
    site = next((venv.root / "lib").glob("python3*/site-packages"))
    shutil.copytree(GATE_DIR, site / GATE_MODULE, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


def run_one(venv: inst.Venv, kernel: str, opts: ValidateOptions, env: Mapping[str, str],
            workdir: Path) -> KernelRun:
    """One gate process for one kernel. A process that leaves no (readable) report is a FAILED
    run carrying its output's tail."""
    out = workdir / f"kernel-{kernel}.json"
    argv = [str(venv.python), "-m", GATE_MODULE, "--kernel", kernel, "--json", str(out)]
    if opts.quick:
        argv.append("--quick")
    if opts.inject_fault in kernelgate.FAULTS:  # not a fault of the model check
        argv += ["--inject-fault", opts.inject_fault]
    if opts.cross_check:
        argv.append("--cross-check")
    r = run_cmd(argv, env=venv.env(dict(env)), log_path=venv.log, check=False, cwd=workdir,
                timeout=KERNEL_TIMEOUT_S, on_line=lambda s: log.debug(s))
    if not out.is_file():
        tail = "\n".join(r.output.splitlines()[-10:])
        return KernelRun(kernel, Status.FAILED, f"the kernel gate process exited "
                         f"{r.returncode} without a report: {tail}")
    try:  # written by the gate, in a venv that runs the wheel's code: untrusted
        return KernelRun.from_json(untrusted.read_json(out, REPORT_MAX))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return KernelRun(kernel, Status.FAILED,
                         f"the kernel gate wrote an unreadable report {out}: {str(exc)[:200]}")


def with_baseline(run: KernelRun, baseline: Sequence[KernelRun] | None,
                  store: Mapping[str, list[dict[str, Any]]] | None = None,
                  variant: str = "", floor: Mapping[str, float] | None = None) -> KernelRun:
    """``run`` with its baseline comparison (the ``--baseline`` file's runs, else the
    workspace's store) and the recipe's floor for its arch; a failed comparison or a shape
    below the floor fails the run."""
    below = baseline_cmp.check_floor(run, floor) if floor else []
    if below:
        run = dataclasses.replace(run, status=Status.FAILED, failures=(*run.failures, *below))
    if baseline is not None:
        cmp = baseline_cmp.compare(run, baseline)
    elif store is not None:
        cmp = baseline_cmp.compare_store(run, store, variant)
    else:
        return run
    if cmp.status.failed:
        return dataclasses.replace(run, status=Status.FAILED, baseline=cmp,
                                   failures=(*run.failures, *cmp.problems))
    return dataclasses.replace(run, baseline=cmp)


def summarize(runs: Sequence[KernelRun]) -> KernelsSummary:
    if not runs:
        return KernelsSummary(Status.SKIPPED, "no attention kernel among these wheels (pass "
                              "--kernel sdpa to check the harness itself)")
    failed = [r for r in runs if r.status.failed]
    if failed:
        return KernelsSummary(Status.FAILED, " | ".join(f"{r.kernel}: {r.why}" for r in failed),
                              tuple(runs))
    if any(r.status is Status.SUCCESS for r in runs):
        return KernelsSummary(Status.SUCCESS, "", tuple(runs))
    return KernelsSummary(Status.SKIPPED, "; ".join(f"{r.kernel}: {r.reason}" for r in runs),
                          tuple(runs))


def run_kernels(venv: inst.Venv, names: Sequence[str], opts: ValidateOptions,
                env: Mapping[str, str], workdir: Path,
                baseline: Sequence[KernelRun] | None,
                store: Mapping[str, list[dict[str, Any]]] | None = None,
                variant: str = "",
                floors: Mapping[str, Mapping[str, float]] | None = None) -> KernelsSummary:
    """Gate each kernel in ``names`` in the (installed) venv, each against ``baseline`` (the
    --baseline file) or else the baseline ``store``."""
    if names:
        install_gate(venv)
    runs = []
    for k in names:
        res = run_one(venv, k, opts, env, workdir)
        if res.status is not Status.SKIPPED:
            arch = res.device.arch if res.device else ""
            res = with_baseline(res, baseline, store, variant, (floors or {}).get(arch))
        runs.append(res)
    return summarize(runs)
