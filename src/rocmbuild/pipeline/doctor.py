"""``rocmbuild doctor``: is this host ready for the requested ROCm build? One line per check.

Each check is ok / warn / fail and, when not ok, carries the exact fix. Only a ``fail`` means the
requested build cannot run here (exit 10); things that matter only for running kernels (GPUs,
/dev/kfd, groups) are warnings, because wheels are compiled on GPU-less hosts too.

``root`` moves the file system root for everything read from disk (sysfs, /dev, /etc/group,
/etc/passwd, /opt/rocm, /usr/local/cuda), so the tests feed fixture trees. The compiler itself and
toolchain.json are not moved: acceptance of an arch is always tested by a real compile.
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rocmbuild.core import config, jobs, log
from rocmbuild.core import gfx as archmod
from rocmbuild.core.components import COMPONENTS, install_hint
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.core.jobs import GiB
from rocmbuild.core.pep508 import major_minor
from rocmbuild.core.run import no_network
from rocmbuild.host import access, components, toolchain
from rocmbuild.host import compiler as compmod
from rocmbuild.host import gpus as gpumod
from rocmbuild.host.detect import Host
from rocmbuild.plan import planning, requirements
from rocmbuild.plan.model import Plan

DEFAULT_ARCHS = ("gfx90a", "gfx942")
DEFAULT_MEM_PER_JOB_GB = 2.0
DEFAULT_DISK_GB = 5.0
GROUP_FIX = "sudo usermod -aG video,render $USER, then log out and in again"

# What a compiler needs for an arch it rejects.
ARCH_FIX = {
    "gfx942": "needs clang >= 19 with ROCm >= 6.0 device libs: ROCm >= 6.0's amdclang++, or on "
    "Debian 12 scripts/install-hip-toolchain.sh (clang-19)",
    "gfx950": "needs clang >= 21 with ROCm >= 6.4 device libs: ROCm >= 6.4's amdclang++, or on "
    "Debian 12 scripts/install-hip-toolchain.sh --with-gfx950 (clang-22)",
}


@dataclass
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    message: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    archs: list[str]
    recipe: str | None
    checks: list[Check]
    host: Host

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def get(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "archs": self.archs, "recipe": self.recipe,
                "checks": [asdict(c) for c in self.checks], "host": self.host.to_json()}


# --------------------------------------------------------------------------- checks


def diagnose(*, root: Path = Path("/"), archs: Sequence[str] | None = None,
             recipe: str | None = None, variant: str | None = None,
             release: str | None = None, hip_compiler: str | None = None,
             site_paths: Sequence[str] | None = None, user: str | None = None,
             workdir: Path | None = None, env: dict[str, str] | None = None,
             index: str | None = None, cache: Path | None = None) -> Report:
    """Run every check. ``user`` (fixture tests) names the user whose groups and device access
    are computed from the fixture's /etc/group and file modes instead of this process's.
    ``cache``: where builds recorded their units' memory (the recipe's MAX_JOBS; default the
    workspace's cache, as `build` finds it)."""
    env = dict(os.environ if env is None else env)
    root = Path(root)
    real = root == Path("/") and user is None
    checks: list[Check] = []
    add = checks.append

    # The same Host value `build` and `plan` use (`doctor --json` saves it for `plan --host`):
    # everything looked for, whatever the recipe needs, since doctor reports it all.
    log.step("detecting the host: torch, the ROCm root, the HIP compiler, memory")
    h = planning.host_for((), planning.Detect(
        hip_compiler=hip_compiler, fs_root=root, strict_compiler=False,
        site_paths=None if site_paths is None else tuple(site_paths),
        dists=tuple(_recipe_dists()), everything=True))
    found = h.rocm_root
    add(_rocm_check(found) if found else Check(
        "rocm", "fail", "no ROCm root (ROCM_PATH, HIP_PATH, rocm_sdk (pip), /opt/rocm, "
        "/usr/include/hip)", "install ROCm (amdgpu-install --usecase=rocm, or pip install "
        '"rocm[libraries,devel]" from a TheRock index), set ROCM_PATH, or on Debian 12 run '
        "scripts/install-hip-toolchain.sh"))

    log.step("looking for AMD GPUs (KFD topology)")
    gpus = _gpus(root)
    add(_gpus_check(root, gpus))
    if index and gpus:
        add(_view_check(index, gpus))
    wanted, defaults, arch_checks = _requested_archs(archs, gpus)
    checks += arch_checks
    checks += _compiler_checks(h, wanted, defaults)

    log.step("checking rocm-smi / amd-smi, /dev/kfd, render nodes and groups")
    add(_smi_check(root, found.path if found else None, real, bool(gpus)))
    uname = user or pwd.getpwuid(os.getuid()).pw_name
    db, have_db = access.group_db(root)
    groups = access.user_groups(root, uname, db, real) if have_db else set()
    add(_device_check(root, real, uname, groups, db, bool(gpus)))
    add(_group_check(root, real, uname, groups, db, have_db))

    # torch (informational on its own; a recipe's needs are judged below)
    add(_torch_check(h.torch, found if found and found.kind == "rocm" else None))
    if found is not None and found.targets is not None and wanted:
        add(_targets_check(found, wanted))

    plan: Plan | None = None
    if recipe:
        log.step(f"checking what recipe {recipe} needs from this host")
        plan, recipe_checks = _recipe_checks(recipe, wanted, variant, release, h, cache)
        checks += recipe_checks

    log.step("checking disk space and memory")
    add(_disk_check(root, workdir, plan.disk_gb if plan is not None else DEFAULT_DISK_GB))
    add(_memory_check(plan, h))
    add(_hip_platform_check(root, env))
    if real:
        add(_offline_check())
    return Report(wanted, recipe, checks, h)


def _gpus(root: Path) -> list[dict[str, str]]:
    """The AMD GPUs in KFD's topology: gfx, node, name, gfx_target_version."""
    return [{"gfx": n["gfx"], "node": n["node"], "name": archmod.KNOWN_ARCHS.get(n["gfx"], "?"),
             "gfx_target_version": n.get("gfx_target_version", "")}
            for n in gpumod.kfd_nodes(root / "sys")]


def _gpus_check(root: Path, gpus: Sequence[dict[str, str]]) -> Check:
    if gpus:
        return Check("gpus", "ok", ", ".join(f"{g['gfx']} ({g['name']}) node {g['node']}"
                                             for g in gpus), data={"gpus": list(gpus)})
    kfd_dir = root / "sys/class/kfd/kfd/topology/nodes"
    return Check("gpus", "warn", f"no AMD GPU in {kfd_dir}: compiling works, running kernels "
                 "(validate) does not", "on a GPU host: load the amdgpu driver; in a container: "
                 "--device /dev/kfd --device /dev/dri", data={"gpus": []})


def _requested_archs(archs: Sequence[str] | None, gpus: Sequence[dict[str, str]]
                     ) -> tuple[list[str], bool, list[Check]]:
    """The archs to check (--arch; ``native`` or none: the GPUs', else the defaults), whether
    they are the defaults, and what doctor says of them."""
    out: list[Check] = []
    defaults = False
    if archs is None or list(archs) == ["native"]:
        if gpus:
            archs = list(dict.fromkeys(g["gfx"] for g in gpus))
        elif archs is None:
            archs, defaults = list(DEFAULT_ARCHS), True
        else:
            archs = []
            out.append(Check("arch", "fail", "--arch native: no AMD GPU found",
                             "name the targets, e.g. --arch gfx942 (MI300) or --arch gfx90a "
                             "(MI200)"))
    archs = list(archs)
    if defaults:
        out.append(Check("arch", "warn", f"no --arch and no GPU: builds need --arch; checking "
                         f"{','.join(archs)}", "pass --arch, e.g. --arch gfx942"))
    elif gpus and archs:
        here = {g["gfx"] for g in gpus}
        missing = sorted(here - {a.split(":")[0] for a in archs})
        if missing:
            out.append(Check("arch-vs-gpus", "warn", f"GPUs here are {', '.join(sorted(here))} "
                             f"but --arch is {','.join(archs)}: the wheel will not run on "
                             f"{', '.join(missing)}", f"add {','.join(missing)} to --arch"))
    return archs, defaults, out


def _compiler_checks(h: Host, archs: Sequence[str], defaults: bool) -> list[Check]:
    """The HIP compiler, and whether it accepts each arch (a real compile of a test kernel)."""
    hipc = h.compiler
    if hipc is None:
        return [Check("hip-compiler", "fail", h.compiler_error, compmod.INSTALL_HINT)]
    out = [Check("hip-compiler", "ok", f"{hipc.path} ({hipc.kind} {hipc.version}) from "
                 f"{hipc.source}", data=hipc.to_json())]
    if archs:
        log.step(f"compiling a test kernel for {', '.join(archs)}")
    for a in archs:
        ok, msg = compmod.accepts_arch(hipc, a)
        status = "ok" if ok else ("warn" if defaults else "fail")
        fix = None if ok else ARCH_FIX.get(a.split(":")[0], "use a newer ROCm / clang "
                                           "(set ROCMBUILD_HIP_COMPILER)")
        out.append(Check(f"arch:{a}", status, msg, fix))
    return out


def _recipe_checks(recipe: str, archs: Sequence[str], variant: str | None,
                   release: str | None, h: Host, cache: Path | None
                   ) -> tuple[Plan | None, list[Check]]:
    """The recipe planned for these archs (those it supports; else its first supported one), so
    doctor judges exactly what `rocmbuild build` would: the same Plan (``planning.plan_for``,
    MAX_JOBS from the units ``cache`` learned; default the workspace's), the same checks of its
    ROCm components, torch vs SDK and host requirements. No plan: None and why."""
    from rocmbuild.plan.render import Target
    from rocmbuild.recipe.load import load
    from rocmbuild.recipe.search import find_recipe

    try:
        learned = cache if cache is not None else config.workspace(None, None).cache
        rec = load(find_recipe(recipe))
        wanted = [a for a in archs if not rec.supported_archs
                  or a.split(":")[0] in rec.supported_archs]
        arch = ",".join(wanted or rec.supported_archs[:1] or DEFAULT_ARCHS[:1])
        plan = planning.plan_for(rec, Target(arch=arch, variant=variant, release=release), h,
                                 learned).plan
    except RocmbuildError as exc:
        return None, [Check("recipe", "fail", exc.message, exc.hint)]
    out = _component_checks(plan, h)
    mismatch = requirements.torch_sdk_mismatch(plan, h)
    if mismatch:
        out.append(Check("torch-vs-sdk", "fail", f"{recipe} needs {mismatch}",
                         requirements.hint(plan, [mismatch], h)))
    missing = requirements.missing(plan, h)
    what = f"{recipe} (variant {plan.variant}" + (
        f", line {plan.release}: {plan.release_why})" if plan.release else ")")
    if missing:
        out.append(Check("recipe", "fail", f"{what} cannot be built here: needs "
                         + "; and ".join(missing), requirements.hint(plan, missing, h)))
    else:
        out.append(Check("recipe", "ok", f"{what}: host requirements met "
                         f"({', '.join(plan.host_requires) or 'none'})"))
    return plan, out


def _disk_check(root: Path, workdir: Path | None, disk_gb: float) -> Check:
    """Free space where the build would write (the nearest existing directory of it)."""
    where = workdir if workdir is not None else (root if root != Path("/") else Path.cwd())
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free / GiB
    if free >= disk_gb:
        return Check("disk", "ok", f"{free:.1f} GiB free at {where} (needs ~{disk_gb:g} GiB)")
    return Check("disk", "fail", f"{free:.1f} GiB free at {where}, the build needs "
                 f"~{disk_gb:g} GiB",
                 "free space, or point --workdir / ROCMBUILD_WORKDIR at a bigger disk")


def _hip_platform_check(root: Path, env: dict[str, str]) -> Check:
    """The HIP_PLATFORM trap: hipcc, hipconfig and CMake target NVIDIA when told to, or when
    /usr/local/cuda exists and it is unset."""
    hp = env.get("HIP_PLATFORM")
    cuda = root / "usr/local/cuda"
    if hp and hp != "amd":
        return Check("hip-platform", "fail", f"HIP_PLATFORM={hp}: HIP tools target NVIDIA",
                     "export HIP_PLATFORM=amd (or unset it)")
    if not hp and cuda.exists():
        return Check("hip-platform", "warn", f"{cuda} exists and HIP_PLATFORM is unset: hipcc, "
                     "hipconfig and CMake pick the NVIDIA platform (rocmbuild sets "
                     "HIP_PLATFORM=amd for its own builds)",
                     "export HIP_PLATFORM=amd for manual hipcc/cmake runs")
    return Check("hip-platform", "ok", f"HIP_PLATFORM={hp or 'unset'}, no /usr/local/cuda"
                 if not cuda.exists() else f"HIP_PLATFORM={hp}")


def _offline_check() -> Check:
    """build.offline: can this machine take the network away from a build?"""
    way = no_network()
    if way.prefix:
        return Check("offline", "ok", f"builds run without network: {way.how}")
    return Check("offline", "warn", f"no network namespace for offline builds ({way.why_not}): "
                 "builds of offline recipes run WITH network after a warning",
                 "allow unprivileged user namespaces (user.max_user_namespaces > 0) or build "
                 "as root; ROCMBUILD_OFFLINE=require turns the fallback into an error")


def _memory_check(plan: Plan | None, h: Host) -> Check:
    """MAX_JOBS as the recipe's plan has it (learned or recipe memory per job, the plan's
    reason and key); without a recipe, for DEFAULT_MEM_PER_JOB_GB."""
    if plan is not None:
        n, why, per_job = plan.jobs, plan.jobs_reason, plan.job_mem_gb
        data: dict[str, Any] = {"jobs": n, "jobs_reason": why, "mem_per_job_gb": per_job,
                                "mem_from": plan.job_mem_from, "cache_key": plan.cache_key}
    else:
        jp = jobs.plan(DEFAULT_MEM_PER_JOB_GB, None, cpus=h.cpus, usable_bytes=h.memory_bytes,
                       source=h.memory_source, cpus_source=h.cpus_source)
        n, why, per_job = jp.jobs, jp.reason, DEFAULT_MEM_PER_JOB_GB
        data = {"jobs": n, "jobs_reason": why, "mem_per_job_gb": per_job, "mem_from": "default"}
    if h.memory_bytes >= per_job * GiB:
        return Check("memory", "ok", f"MAX_JOBS={n}: {why}", data=data)
    return Check("memory", "warn", f"{h.memory_bytes / GiB:.1f} GiB usable, less than one "
                 f"compile job's ~{per_job:.3g} GiB: the build may be OOM-killed",
                 "close other programs, add swap, or build on a bigger host", data=data)


def _view_check(index: str, gpus: Sequence[dict[str, str]]) -> Check:
    """The per-arch view(s) of ``index``'s stable stage for the GPUs found (publish/views.py):
    the index a pip or uv on this host should use so that it gets wheels with code for them."""
    if "://" in index:  # an upload URL may carry user:password@: never print it
        parts = urlsplit(index)
        base = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2],
                                         query="", fragment="")).rstrip("/")
    else:
        base = Path(index).expanduser().absolute().as_uri()
    urls = {g["gfx"]: f"{base}/stable/{g['gfx']}/simple/" for g in gpus}
    lines = "; ".join(f"{gfx}: pip install --extra-index-url {u} NAME" for gfx, u in urls.items())
    return Check("index-view", "ok", lines, data={"views": urls})


def _component_checks(plan: Plan, h: Host) -> list[Check]:
    """One line per ROCm component the plan needs and the ROCm root lacks, with its packages;
    one ok line when none is missing. File checks only: milliseconds."""
    root = h.rocm_root
    if not plan.rocm_components or root is None or root.unusable:
        return []  # nothing needed, or the rocm check already failed
    absent = requirements.missing_components(plan, h) or []
    out = []
    for name in absent:
        c = COMPONENTS[name]
        out.append(Check(
            f"component:{name}", "fail", f"{name} ({c.what}) not found under {root.path} "
            f"(looked for {', '.join(c.looked_for())}): package {c.packages()}",
            install_hint([name]),
            data={"component": name, "apt": c.apt, "dnf": c.dnf, "looked_for": c.looked_for(),
                  "root": str(root.path)}))
    if not absent:
        found = components.locate(root.path, plan.rocm_components)
        out.append(Check("rocm-components", "ok", f"all {len(found)} ROCm components "
                         f"{plan.recipe} needs are under {root.path}: {', '.join(found)}",
                         data={"found": found}))
    return out


def _recipe_dists() -> list[str]:
    """Every shipped or configured recipe's python_requires, so a saved host can be judged."""
    from rocmbuild.recipe import load, search

    names: list[str] = []
    for name in search.available():
        try:
            names += load.load(search.find_recipe(name)).python_requires
        except RocmbuildError:
            continue  # a broken recipe is reported when it is asked for
    return names


def _smi_check(root: Path, rpath: Path | None, real: bool, have_gpus: bool) -> Check:
    dirs = [root / "opt/rocm/bin", root / "usr/bin"]
    if rpath is not None:
        dirs.insert(0, rpath / "bin")
    search = os.pathsep.join([*(str(d) for d in dirs)] + ([os.environ.get("PATH", "")]
                                                          if real else []))
    for tool, args in (("amd-smi", ["version"]), ("rocm-smi", ["--showproductname"])):
        path = shutil.which(tool, path=search)
        if not path:
            continue
        if not real:
            return Check("smi", "ok", f"{tool} at {path} (not run on a fixture root)")
        from rocmbuild.core.run import run

        res = run([path, *args], capture=True, check=False, timeout=30)
        first = next((ln.strip() for ln in res.output.splitlines() if ln.strip()), "")
        if res.returncode == 0:
            return Check("smi", "ok", f"{tool}: {first[:160]}")
        return Check("smi", "warn" if have_gpus else "ok",
                     f"{tool} exited {res.returncode}: {first[:160]}",
                     "check the amdgpu driver (dmesg | grep amdgpu)" if have_gpus else None)
    if have_gpus:
        return Check("smi", "warn", "neither amd-smi nor rocm-smi found",
                     "install amd-smi (ships with ROCm) or rocm-smi (apt install rocm-smi)")
    return Check("smi", "ok", "amd-smi / rocm-smi not installed (optional; no GPU here)")


def _device_check(root: Path, real: bool, user: str, groups: set[str],
                  db: dict[str, tuple[int, list[str]]], have_gpus: bool) -> Check:
    kfd = root / "dev/kfd"
    renders = sorted((root / "dev/dri").glob("renderD*"))
    data = {"kfd": kfd.exists(), "render_nodes": [r.name for r in renders]}
    if not kfd.exists():
        return Check("devices", "warn", f"{kfd} missing: no ROCm kernel driver, GPU kernels "
                     "cannot run here (compiling still works)",
                     "on a GPU host: sudo modprobe amdgpu (install amdgpu-dkms); in a container: "
                     "docker run --device /dev/kfd --device /dev/dri ...", data=data)
    if not renders:
        return Check("devices", "warn", f"{kfd} exists but no {root / 'dev/dri'}/renderD*",
                     "in a container also pass --device /dev/dri", data=data)
    denied = [str(p) for p in [kfd, *renders] if not access.can_rw(p, real, user, groups, db)]
    if denied:
        return Check("devices", "warn", f"no read/write access for {user} to "
                     f"{', '.join(denied)}", GROUP_FIX, data=data)
    return Check("devices", "ok", f"{kfd} and {', '.join(r.name for r in renders)} accessible",
                 data=data)


def _group_check(root: Path, real: bool, user: str, groups: set[str],
                 db: dict[str, tuple[int, list[str]]], have_db: bool) -> Check:
    if real and os.getuid() == 0:
        return Check("groups", "ok", "running as root: device access is not limited by groups")
    if not have_db:
        return Check("groups", "warn", f"cannot read {root / 'etc/group'}", GROUP_FIX)
    need = [g for g in ("video", "render") if g in db]
    missing = [g for g in need if g not in groups]
    if missing:
        return Check("groups", "warn", f"{user} is not in group(s) {', '.join(missing)}: "
                     "GPU kernels cannot run", GROUP_FIX, data={"groups": sorted(groups)})
    return Check("groups", "ok", f"{user} is in {', '.join(need) or '(no video/render groups)'}",
                 data={"groups": sorted(groups)})


def _rocm_check(r: toolchain.RocmRoot) -> Check:
    """The root, how it was found, its ROCm version (and from which file), HIP version and (pip
    ROCm) gfx targets; fails with the fix when it cannot be built against."""
    comps = list(r.components or ())
    data = {"path": str(r.path), "where": r.where, "version": r.version or None,
            "version_from": r.version_from or None, "hip_version": r.hip_version or None,
            "targets": None if r.targets is None else list(r.targets), "components": comps}
    version = (f"ROCm {r.version} (from {r.version_from})" if r.version else "version unknown"
               ) + (f", HIP {r.hip_version}" if r.hip_version else "")
    targets = "" if r.targets is None else f", targets {';'.join(r.targets) or 'none'}"
    line = (f"{r.path} ({r.where}), {version}{targets}, {len(comps)} of "
            f"{len(COMPONENTS)} known ROCm components")
    if r.unusable:
        return Check("rocm", "fail", f"{line}: {r.unusable}",
                     r.unusable.rpartition(": ")[2] + ", or set ROCM_PATH to another ROCm root",
                     data=data)
    return Check("rocm", "ok", line, data=data)


def _targets_check(r: toolchain.RocmRoot, archs: Sequence[str]) -> Check:
    """A pip ROCm's libraries carry code for its index's GPU family only (``rocm-sdk targets``):
    other archs compile, but this install's libraries do not run there."""
    lacking = [a for a in archs if a.split(":")[0] not in (r.targets or ())]
    data = {"targets": list(r.targets or ()), "archs": list(archs)}
    return Check("rocm-targets", "warn", f"the {r.where} ROCm at {r.path} carries libraries "
                 f"for {';'.join(r.targets or ()) or 'no target'}, not {', '.join(lacking)}: "
                 "wheels for those compile but this install cannot run them", "install the rocm "
                 "and torch wheels of TheRock's index for those GPUs (per family, or multi-arch "
                 "with rocm[libraries,devel,device-gfxNNN])", data=data) if lacking else Check(
        "rocm-targets", "ok", f"the {r.where} ROCm carries libraries for {', '.join(archs)}",
        data=data)


def _torch_check(t: toolchain.TorchInfo, root: toolchain.RocmRoot | None) -> Check:
    if not t.version:
        return Check("torch", "ok", "torch not installed (needed only by torch-based recipes)",
                     data={"torch": None})
    info = {"version": t.version, "kind": t.kind, "hip": t.hip, "rocm": t.rocm, "cuda": t.cuda,
            "location": t.location}
    if t.kind != "rocm":
        return Check("torch", "warn", f"torch {t.version} is a {t.kind.upper()} "
                     "build: --no-build-isolation builds compile against it, so torch-based HIP "
                     "extensions (flash-attn) cannot build here", "install a ROCm torch, e.g. pip "
                     "install torch --index-url https://download.pytorch.org/whl/rocm6.2 (match "
                     "your ROCm)", data={"torch": info})
    built = t.rocm_short
    if root is not None and built and major_minor(root.version) not in ("", built):
        return Check("torch", "warn", f"torch {t.version} is built for ROCm {built} "
                     f"({t.rocm_from}) but the ROCm root is ROCm {root.version} (from "
                     f"{root.version_from or 'its version file'}): extensions may fail to load",
                     "use the ROCm that matches torch (ROCM_PATH) or the torch that matches ROCm",
                     data={"torch": info})
    rocm = f"ROCm {t.rocm}, " if t.rocm else ""
    if t.build_only_sdk:
        info["build_only_sdk"] = t.build_only_sdk
        return Check("torch", "warn", f"torch {t.version} is a build-only ROCm torch ({rocm}HIP "
                     f"{t.hip or '?'}, made against {t.build_only_sdk}): extensions compile and "
                     "link against it, but nothing built here can load, and its wheels are "
                     "never validated or published",
                     "install a real ROCm torch on a ROCm host to build wheels for users",
                     data={"torch": info})
    return Check("torch", "ok", f"torch {t.version} is a ROCm build ({rocm}HIP {t.hip or '?'})",
                 data={"torch": info})
