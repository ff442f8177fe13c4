"""Tag: give the wheel its local version label (``2.8.3.post1`` -> ``2.8.3.post1+rocm6.2.gfx942``)
and record provenance in ``*.dist-info/rocmbuild.json``: the rendered plan, source pin, patch
hashes, toolchain versions, archs, MAX_JOBS and timings.

The wheel is rewritten with ``wheel.wheelfile.WheelFile``, which writes RECORD with correct hashes,
so pip, ``wheel unpack`` and ``pip show -f`` accept the result.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from wheel.wheelfile import WheelFile

from rocmbuild import __version__, fsutil, label, options
from rocmbuild.digest import sha256_file
from rocmbuild.errors import BuildError
from rocmbuild.recipe.plan import Plan
from rocmbuild.results import Artifacts, StageResult, Status, TorchBuild
from rocmbuild.stages import Context, need
from rocmbuild.wheel import PROVENANCE, SHARED_LIB, WheelFormatError, parse_wheel_name


def retag(src: Path, out_dir: Path, local: str, provenance: dict[str, Any],
          requires_external: str | None = None) -> Path:
    """Write ``src`` with ``+local`` appended to its version and rocmbuild.json added (and a
    ``Requires-External`` line in METADATA when given)."""
    parts = parse_wheel_name(src.name)  # the parts keep their spelling
    old_namever = parts.namever
    sep = "." if parts.version.local else "+"
    new_version = f"{parts.version}{sep}{local}"
    new_name = parts.with_version(new_version)
    new_namever = f"{parts.distribution}-{new_version}"
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / new_name
    # SOURCE_DATE_EPOCH keeps RECORD's zip timestamp fixed (zip cannot store dates before 1980).
    saved = options.env("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = saved or "315532800"
    try:
        # the temporary has the final name: WheelFile derives the dist-info name from it
        with (
            fsutil.atomic_path(final) as tmp,
            zipfile.ZipFile(src) as zin,
            WheelFile(tmp, "w") as zout,
        ):
            for info in zin.infolist():
                if info.is_dir():
                    continue
                top, _, rest = info.filename.partition("/")
                if top == f"{old_namever}.dist-info":
                    if rest == "RECORD":
                        continue  # WheelFile writes a fresh one
                    top = f"{new_namever}.dist-info"
                elif top == f"{old_namever}.data":
                    top = f"{new_namever}.data"
                data = zin.read(info)
                if rest == "METADATA" and top.endswith(".dist-info"):
                    data = _set_version(data, new_version, requires_external)
                new_info = zipfile.ZipInfo(f"{top}/{rest}" if rest else top, info.date_time)
                new_info.external_attr = info.external_attr
                new_info.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(new_info, data)
            blob = json.dumps(provenance, indent=2, sort_keys=True).encode()
            zout.writestr(f"{new_namever}.dist-info/{PROVENANCE}", blob)
        return final
    finally:
        if saved is None:
            del os.environ["SOURCE_DATE_EPOCH"]


def _set_version(metadata: bytes, version: str, requires_external: str | None = None) -> bytes:
    lines = metadata.decode("utf-8").split("\n")
    end = len(lines)
    for i, line in enumerate(lines):
        if line.startswith("Version:"):
            lines[i] = f"Version: {version}"
        if not line:  # end of headers
            end = i
            break
    if requires_external and f"Requires-External: {requires_external}" not in lines[:end]:
        lines.insert(end, f"Requires-External: {requires_external}")
    return "\n".join(lines).encode("utf-8")


def local_label(plan: Plan, torch: TorchBuild | None, torch_log: Path) -> str:
    """The wheel's local label: the plan's, with the build's torch in it when the recipe says
    ``target.label_torch`` (known only now: the ABI flag needs an import of that torch)."""
    if not plan.label_torch:
        return plan.local_version
    where = f"{plan.recipe_path.name}: target.label_torch"
    if torch is None or not torch.version or torch.cxx11_abi is None:
        raise BuildError(
            f"{where}: the torch the build compiled against is unknown"
            + (f" (torch {torch.version}: its C++ ABI flag could not be read)"
               if torch is not None and torch.version else ""),
            hint="the label needs torch's version and torch._C._GLIBCXX_USE_CXX11_ABI; see "
            f"{torch_log} and check that `python -c 'import torch'` works here")
    try:
        part = label.torch_part(torch.version, torch.cxx11_abi)
    except ValueError as exc:
        raise BuildError(f"{where}: {exc}",
                         hint="a torch version starts with major.minor, e.g. 2.9.1") from exc
    return label.local(plan.rocm.version, plan.archs, part)
def rocm_requirement(version: str) -> str:
    """``rocm (>=6.2,<6.3)``: the ROCm release series a host-bound wheel was built for (its
    libraries' ABI changes between minor releases, as the per-release index URLs upstream
    say: .../whl/rocm6.2)."""
    parts = [int(x) for x in version.split(".")[:2]] + [0]
    major, minor = parts[0], parts[1]
    return f"rocm (>={major}.{minor},<{major}.{minor + 1})"


def _native(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        return any(SHARED_LIB.search(n) for n in zf.namelist())


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    raw = need(ctx.artifacts.raw_wheel, "built wheel", "tag")
    bundled = ctx.artifacts.bundle
    src = bundled.wheel if bundled is not None else raw
    log_path = ctx.log_dir / "tag.log"
    local = local_label(plan, ctx.artifacts.torch, ctx.log_dir / "torch.log")
    provenance: dict[str, Any] = {
        "rocmbuild_version": __version__,
        "recipe": plan.recipe,
        "recipe_sha256": plan.recipe_sha256,
        "package": plan.package,
        "variant": plan.variant,
        "archs": list(plan.archs),
        "gpu_vendor": plan.gpu_vendor,
        "rocm_version": plan.rocm.version,
        "rocm_version_from": plan.rocm.version_kind,
        "local_version": local,
        "runtime_env": plan.runtime_env,
        "validate_requires": list(plan.validate.requires),
        "validate_upstream": plan.validate.upstream_json(),
        "validate_floor": plan.validate.floor_json(),
        "cache_key": plan.cache_key,
        "python_tag": plan.host.python_tag,
        "source": plan.source_json(),
        "patches": [{"file": p["file"], "sha256": p["sha256"]} for p in plan.patches_json()],
        "downloads": plan.downloads_json(),
        "offline": plan.offline,
        "torch": ctx.artifacts.torch.to_json() if ctx.artifacts.torch else {},
        "toolchain": {
            "rocm": plan.rocm.to_json(),
            "python": sys.version.split()[0],
            **{d: ctx.host.dists.get(d) for d in ("pip", "setuptools", "wheel")},
        },
        "jobs": {"max_jobs": plan.jobs, "reason": plan.jobs_reason},
        "timings": {k: round(v, 3) for k, v in ctx.timings.items()},
        **({"hipify": ctx.artifacts.hipify.to_json()} if ctx.artifacts.hipify else {}),
        "original_wheel": {"name": raw.name, "sha256": sha256_file(raw)},
        # bundle: what went in (the patterns are in "plan")
        "rocm_runtime": {"mode": plan.runtime.mode,
                         **(bundled.to_json() if bundled is not None else {})},
        "plan": plan.to_json(),
    }
    try:
        # a host-bound wheel with native code says which ROCm it needs (PEP 345's
        # Requires-External; pip shows it, publish files the wheel under that ROCm's view)
        external = (rocm_requirement(plan.rocm.version)
                    if plan.runtime.mode == "host" and _native(src) else None)
        tagged = retag(src, ctx.log_dir.parent / f".{plan.short_key}-tagged", local, provenance,
                       external)
    except (zipfile.BadZipFile, KeyError, ValueError, WheelFormatError) as exc:
        raise BuildError(
            f"{raw.name}: cannot retag: {exc}",
            hint="the backend produced an unreadable wheel; see the build log",
        ) from exc
    if bundled is not None:  # the bundle stage's copy is spent (GBs for torch)
        bundled.wheel.unlink(missing_ok=True)
    return StageResult(
        Status.SUCCESS, time.monotonic() - start, tagged.name, log_path, Artifacts(wheel=tagged)
    )
