"""Tag: give the wheel its local version label (``2.8.3.post1`` -> ``2.8.3.post1+rocm6.2.gfx942``),
the build tag when one is asked for (``--build-tag 1``: ``name-ver-1-py3-...whl``, PEP 427), and
record provenance in ``*.dist-info/rocmbuild.json``: the inputs only (recipe hash, source pin,
patch hashes, toolchain versions, env, archs; ``Plan.inputs_json``).

The wheel is rewritten reproducibly: members in a stable order (``*.dist-info`` last, RECORD
last of all), every date the build's SOURCE_DATE_EPOCH (never before 1980), modes 0644 or 0755,
RECORD written afresh with correct hashes, so pip, ``wheel unpack`` and ``pip show -f`` accept
it and two builds of the same inputs give the same bytes. What only describes one build (stage
timings, MAX_JOBS and its reason, the backend's own wheel) goes into the build record beside
the wheel (``<wheel>.build.json``), never into the wheel.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import stat
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from rocmbuild import __version__
from rocmbuild.artifacts import label
from rocmbuild.artifacts.buildfacts import TorchBuild
from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.artifacts.wheel import PROVENANCE, SHARED_LIB, WheelFormatError, parse_wheel_name
from rocmbuild.core import fsutil
from rocmbuild.core.errors import BuildError
from rocmbuild.core.pep508 import major_minor
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import ZIP_EPOCH, Context, need, source_date_epoch

ZIP_LAST = 4354819198  # 2107-12-31T23:59:58Z, zip's last date

_SIGNATURES = ("RECORD", "RECORD.jws", "RECORD.p7s")  # written afresh / no longer valid


def retag(src: Path, out_dir: Path, local: str, provenance: dict[str, Any], epoch: int,
          build_tag: str = "", requires_external: str | None = None,
          requires_torch: str | None = None) -> Path:
    """Write ``src`` with ``+local`` appended to its version ("": kept as it is), ``build_tag``
    in its name ("" keeps the backend's, if any), a ``Requires-External`` line in METADATA when
    given, its ``Requires-Dist: torch`` replaced by ``requires_torch`` when given
    (``torch==2.13.*``) and ``rocmbuild.json`` added, reproducibly (dates ``epoch``, sorted
    members, normalised modes)."""
    parts = parse_wheel_name(src.name)  # the parts keep their spelling
    old_namever = parts.namever
    sep = "." if parts.version.local else "+"
    new_version = f"{parts.version}{sep}{local}" if local else str(parts.version)
    tags = parts.rest.split("-")  # [build-]python-abi-platform
    if build_tag:  # --build-tag replaces the backend's build tag, if it wrote one
        tags = [build_tag, *tags[-3:]]
    new_name = f"{parts.distribution}-{new_version}-{'-'.join(tags)}.whl"
    new_namever = f"{parts.distribution}-{new_version}"
    info_dir = f"{new_namever}.dist-info"
    members: dict[str, tuple[bytes, int]] = {}
    with zipfile.ZipFile(src) as zin:
        for info in zin.infolist():
            if info.is_dir():
                continue
            top, _, rest = info.filename.partition("/")
            if top == f"{old_namever}.dist-info":
                if rest in _SIGNATURES:
                    continue
                top = info_dir
            elif top == f"{old_namever}.data":
                top = f"{new_namever}.data"
            data = zin.read(info)
            if top == info_dir and rest == "METADATA":
                data = _set_header(data, "Version", new_version)
                if requires_external:
                    data = _set_header(data, "Requires-External", requires_external)
                if requires_torch:
                    data = _pin_requirement(data, "torch", requires_torch)
            elif top == info_dir and rest == "WHEEL" and build_tag:
                data = _set_header(data, "Build", build_tag)
            mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
            members[f"{top}/{rest}" if rest else top] = (data, mode)
    members[f"{info_dir}/{PROVENANCE}"] = (
        json.dumps(provenance, indent=2, sort_keys=True).encode() + b"\n", 0o644)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / new_name
    date_time = time.gmtime(min(max(epoch, ZIP_EPOCH), ZIP_LAST))[:6]  # what zip can store
    record = io.StringIO()
    rows = csv.writer(record, lineterminator="\n")
    with fsutil.atomic_path(final) as tmp, zipfile.ZipFile(tmp, "w") as zout:
        for name in sorted(members, key=lambda n: (n.split("/")[0] == info_dir, n)):
            data, mode = members[name]
            _write(zout, name, data, mode, date_time)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.writerow((name, f"sha256={digest.decode()}", len(data)))
        rows.writerow((f"{info_dir}/RECORD", "", ""))
        _write(zout, f"{info_dir}/RECORD", record.getvalue().encode(), 0o644, date_time)
    return final


def _write(zout: zipfile.ZipFile, name: str, data: bytes, mode: int,
           date_time: tuple[int, int, int, int, int, int]) -> None:
    info = zipfile.ZipInfo(name, date_time)
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.create_system = 3  # unix, wherever it runs: the modes above mean what they say
    info.compress_type = zipfile.ZIP_DEFLATED
    zout.writestr(info, data, compresslevel=6)


def _set_header(text: bytes, key: str, value: str) -> bytes:
    """Set one header of an email-style metadata file (METADATA's Version, WHEEL's Build),
    leaving the body and the other headers as they are."""
    lines = text.decode("utf-8").split("\n")
    end = lines.index("") if "" in lines else len(lines)
    head = [ln for ln in lines[:end] if not ln.startswith(f"{key}:")]
    at = next((i for i, ln in enumerate(lines[:end]) if ln.startswith(f"{key}:")), None)
    head.insert(at if at is not None else len(head), f"{key}: {value}")
    return "\n".join(head + lines[end:]).encode("utf-8")


_DIST_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _pin_requirement(text: bytes, name: str, requirement: str) -> bytes:
    """METADATA with every ``Requires-Dist`` on ``name`` (any spelling; not one limited to an
    extra) replaced by one ``Requires-Dist: <requirement>``, after the other Requires-Dist lines
    (before the body)."""
    lines = text.decode("utf-8").split("\n")
    end = lines.index("") if "" in lines else len(lines)
    head = []
    for ln in lines[:end]:
        key, _, value = ln.partition(":")
        m = _DIST_NAME.match(value) if key == "Requires-Dist" else None
        if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() == name \
                and "extra" not in value.partition(";")[2]:
            continue  # the wheel's own (unpinned) requirement on it
        head.append(ln)
    at = max((i + 1 for i, ln in enumerate(head) if ln.startswith("Requires-Dist:")),
             default=len(head))
    head.insert(at, f"Requires-Dist: {requirement}")
    return "\n".join(head + lines[end:]).encode("utf-8")


def torch_requirement(torch: TorchBuild | None) -> str:
    """``torch==2.13.*``: the torch release series an ABI-bound wheel was compiled against (torch's
    C++ ABI changes between minor releases; a patch release keeps it). "" when unknown."""
    mm = major_minor(torch.version) if torch is not None and torch.version else ""
    return f"torch=={mm}.*" if mm else ""


def local_label(plan: Plan, torch: TorchBuild | None, torch_log: Path) -> str:
    """The wheel's local label (``Plan.label``), with the build's torch in it when the recipe
    says ``target.label_torch`` (known only now: the ABI flag needs an import of that torch),
    and ``buildonly`` when that torch is a build-only ROCm torch."""
    build_only = torch is not None and torch.build_only
    if not plan.label_torch:
        return plan.label(build_only=build_only)
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
    return plan.label(part, build_only=build_only)


def unpublishable(plan: Plan, torch: TorchBuild | None) -> list[str]:
    """Why this wheel must never reach an index or a user (provenance ``unpublishable``; the
    label carries the marks): a build-only ROCm torch, a partial build."""
    out = []
    if torch is not None and torch.build_only:
        out.append("built against a build-only ROCm torch (torch's own hipify of the CPU "
                   "wheel's CUDA headers, link stubs for libc10_hip/libtorch_hip): it compiles "
                   "and links, but cannot load, and was never run on AMD hardware")
    if plan.partial:
        out.append(f"partial: {', '.join(plan.partial)} builds only part of the project")
    return out


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


def provenance(plan: Plan, ctx: Context, epoch: int, local: str) -> dict[str, Any]:
    """What the wheel records of its making: inputs only, no times, no host state."""
    benv = ctx.artifacts.build_env
    # the build's own pip/setuptools/wheel: the build env's when there is one
    tools = dict(ctx.host.dists) if benv is None else dict(
        (*benv.host_packages, *benv.packages))
    return {
        "rocmbuild_version": __version__,
        "recipe": plan.recipe,
        "recipe_sha256": plan.recipe_sha256,
        "package": plan.package,
        "variant": plan.variant,
        **({"release": plan.release} if plan.release else {}),
        "archs": list(plan.archs),
        "gpu_vendor": plan.gpu_vendor,
        "rocm_version": plan.rocm.version,
        "rocm_version_from": plan.rocm.version_kind,
        "local_version": local,
        "build_tag": plan.build_tag or None,
        "runtime_env": plan.runtime_env,
        "validate_requires": list(plan.validate.requires),
        "cache_key": plan.cache_key,
        "python_tag": plan.host.python_tag,
        "source": plan.source_json(),
        "source_date_epoch": epoch,
        "patches": [{"file": p["file"], "sha256": p["sha256"]} for p in plan.patches_json()],
        "torch": ctx.artifacts.torch.to_json() if ctx.artifacts.torch else {},
        "toolchain": {
            "rocm": plan.rocm.to_json(),
            "python": sys.version.split()[0],
            **{d: tools.get(d) for d in ("pip", "setuptools", "wheel")},
        },
        "build_env": benv.to_json() if benv is not None else None,
        **({"depends": [w.to_json() for w in ctx.artifacts.depends]}
           if ctx.artifacts.depends else {}),
        "downloads": plan.downloads_json(),
        "offline": plan.offline,
        **({"hipify": ctx.artifacts.hipify.to_json()} if ctx.artifacts.hipify else {}),
        # bundle: what went in (the patterns are in "plan")
        "rocm_runtime": {"mode": plan.runtime.mode,
                         **({"arch_independent": True} if not plan.runtime.device_code else {}),
                         **(ctx.artifacts.bundle.to_json() if ctx.artifacts.bundle else {})},
        "plan": plan.inputs_json(),
        **({"unpublishable": why} if (why := unpublishable(plan, ctx.artifacts.torch)) else {}),
    }


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    raw = need(ctx.artifacts.raw_wheel, "built wheel", "tag")
    bundled = ctx.artifacts.bundle
    src = bundled.wheel if bundled is not None else raw
    log_path = ctx.log_dir / "tag.log"
    epoch = source_date_epoch(ctx.artifacts)
    local = local_label(plan, ctx.artifacts.torch, ctx.log_dir / "torch.log")
    try:
        # a host-bound wheel with native code says which ROCm it needs (PEP 345's
        # Requires-External; pip shows it, publish files the wheel under that ROCm's view);
        # rocm_runtime = "none" needs none (the audit checks it carries no device code)
        external = (rocm_requirement(plan.rocm.version)
                    if plan.runtime.mode == "host" and _native(src) else None)
        # an ABI-bound wheel (its label carries torch) says which torch it needs, so pip and
        # uv refuse another (local_label has made sure the torch is known)
        pinned = torch_requirement(ctx.artifacts.torch) if plan.label_torch else ""
        tagged = retag(src, ctx.log_dir.parent / f".{plan.short_key}-tagged", local,
                       provenance(plan, ctx, epoch, local), epoch, plan.build_tag, external,
                       pinned or None)
    except (zipfile.BadZipFile, KeyError, ValueError, WheelFormatError) as exc:
        raise BuildError(
            f"{raw.name}: cannot retag: {exc}",
            hint="the backend produced an unreadable wheel; see the build log",
        ) from exc
    if bundled is not None:  # the bundle stage's copy is spent (GBs for torch)
        bundled.wheel.unlink(missing_ok=True)
    return StageResult(
        Status.SUCCESS, time.monotonic() - start, tagged.name, log_path,
        Artifacts(wheel=tagged),
    )
