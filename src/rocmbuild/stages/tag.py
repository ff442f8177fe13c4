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

from rocmbuild import __version__, fsutil, options
from rocmbuild.digest import sha256_file
from rocmbuild.errors import BuildError
from rocmbuild.recipe.plan import Plan
from rocmbuild.results import Artifacts, StageResult, Status
from rocmbuild.stages import Context, need
from rocmbuild.wheel import PROVENANCE, WheelFormatError, parse_wheel_name


def retag(src: Path, out_dir: Path, local: str, provenance: dict[str, Any]) -> Path:
    """Write ``src`` with ``+local`` appended to its version and rocmbuild.json added."""
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
                    data = _set_version(data, new_version)
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


def _set_version(metadata: bytes, version: str) -> bytes:
    lines = metadata.decode("utf-8").split("\n")
    for i, line in enumerate(lines):
        if line.startswith("Version:"):
            lines[i] = f"Version: {version}"
            break
        if not line:  # end of headers
            break
    return "\n".join(lines).encode("utf-8")


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    raw = need(ctx.artifacts.raw_wheel, "built wheel", "tag")
    log_path = ctx.log_dir / "tag.log"
    provenance = {
        "rocmbuild_version": __version__,
        "recipe": plan.recipe,
        "recipe_sha256": plan.recipe_sha256,
        "package": plan.package,
        "variant": plan.variant,
        "archs": list(plan.archs),
        "gpu_vendor": plan.gpu_vendor,
        "rocm_version": plan.rocm.version,
        "rocm_version_from": plan.rocm.version_kind,
        "local_version": plan.local_version,
        "runtime_env": plan.runtime_env,
        "validate_requires": list(plan.validate.requires),
        "validate_upstream": plan.validate.upstream_json(),
        "validate_floor": plan.validate.floor_json(),
        "cache_key": plan.cache_key,
        "python_tag": plan.host.python_tag,
        "source": plan.source_json(),
        "patches": [{"file": p["file"], "sha256": p["sha256"]} for p in plan.patches_json()],
        "torch": ctx.artifacts.torch.to_json() if ctx.artifacts.torch else {},
        "toolchain": {
            "rocm": plan.rocm.to_json(),
            "python": sys.version.split()[0],
            **{d: ctx.host.dists.get(d) for d in ("pip", "setuptools", "wheel")},
        },
        "jobs": {"max_jobs": plan.jobs, "reason": plan.jobs_reason},
        "timings": {k: round(v, 3) for k, v in ctx.timings.items()},
        "original_wheel": {"name": raw.name, "sha256": sha256_file(raw)},
        "plan": plan.to_json(),
    }
    try:
        tagged = retag(
            raw, ctx.log_dir.parent / f".{plan.short_key}-tagged", plan.local_version, provenance
        )
    except (zipfile.BadZipFile, KeyError, ValueError, WheelFormatError) as exc:
        raise BuildError(
            f"{raw.name}: cannot retag: {exc}",
            hint="the backend produced an unreadable wheel; see the build log",
        ) from exc
    return StageResult(
        Status.SUCCESS, time.monotonic() - start, tagged.name, log_path, Artifacts(wheel=tagged)
    )
