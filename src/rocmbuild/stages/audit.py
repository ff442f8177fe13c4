"""Audit: every shared object in the built wheel must carry device code for every requested arch.
A wheel that lacks one fails the build here, naming the .so and the arch, before anyone meets
"invalid device function". Pure-Python wheels pass with nothing to check. With
build.rocm_runtime = "none" it is the other way round: no object may carry device code, HIP host
code or a link to the HIP runtime (the wheel says it needs no ROCm).

Built against a build-only ROCm torch (it cannot be imported here, or anywhere), each shared
object's links are checked instead (``artifacts.links``): every undefined symbol resolves
against the libraries it needs (torch's, the build-only torch's HIP stubs, the ROCm SDK's, the
system's) or the Python interpreter."""

from __future__ import annotations

import sys
import tempfile
import time
import zipfile
from pathlib import Path

from rocmbuild.artifacts import audit, links
from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.artifacts.wheel import SHARED_LIB
from rocmbuild.core import log
from rocmbuild.core.errors import AuditError
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context, need


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    wheel = need(ctx.artifacts.wheel, "tagged wheel", "audit")
    report = audit.audit_wheel(wheel, plan.archs, device=plan.runtime.device_code)
    audit.require(report)
    for w in report.warnings:
        log.warn(w)
    if not report.objects:
        return StageResult(Status.SUCCESS, time.monotonic() - start,
                           "no shared objects: pure-Python wheel, no device code to check")
    linked = _links(wheel, ctx) if ctx.artifacts.torch and ctx.artifacts.torch.build_only else ""
    found = sorted({a for so in report.objects for a in so.archs})
    if not plan.runtime.device_code:
        return StageResult(Status.SUCCESS, time.monotonic() - start,
                           f"{len(report.objects)} shared object(s), no device code "
                           "(rocm_runtime = none)", artifacts=Artifacts(audit=report))
    return StageResult(Status.SUCCESS, time.monotonic() - start,
                       f"{len(report.objects)} shared object(s); device code for "
                       f"{', '.join(found) or 'none'}{linked}", artifacts=Artifacts(audit=report))


def _links(wheel: Path, ctx: Context) -> str:
    """Check the links of every shared object in ``wheel`` (AuditError at the first that does
    not resolve); the summary's addition."""
    torch = Path(ctx.host.torch.location) / "lib" if ctx.host.torch.location else None
    root = ctx.host.rocm_root
    dirs = [d for d in (torch, *((root.path / "lib", root.path / "lib/x86_64-linux-gnu")
                                 if root is not None else ())) if d is not None]
    python = links.interpreter_files(sys.executable)
    count = symbols = 0
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory(prefix="rocmbuild-ln-") as t:
        members = [i for i in zf.infolist()
                   if not i.is_dir() and SHARED_LIB.search(i.filename)]
        zf.extractall(t, members)  # together: one .so of the wheel may need another
        for info in members:
            try:
                rep = links.check(Path(t) / info.filename, [Path(t) / Path(info.filename).parent,
                                                            *dirs], python, info.filename)
            except ValueError as exc:
                raise AuditError(f"{wheel.name}: {exc}", hint="see the build log") from None
            if not rep.ok:
                raise AuditError(f"{wheel.name}: {rep.problem()}",
                                 hint="a header the build needs, an API the ROCm torch does not "
                                 "export or a library it does not link: see the build log")
            count += 1
            symbols += rep.checked
    return f"; links: {symbols} undefined symbol(s) of {count} object(s) all resolve"
