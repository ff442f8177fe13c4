"""HIP compiler detection: which clang compiles HIP device code here, with which flags.

Search order (first hit wins):

1. ``explicit`` (``--hip-compiler``) or ROCMBUILD_HIP_COMPILER: a path or a name on PATH.
   ROCMBUILD_HIP_FLAGS, when set, replaces the flags (space separated).
2. A real ROCm install: ROCM_PATH, HIP_PATH, then /opt/rocm; ``<root>/llvm/bin/amdclang++``,
   ``<root>/llvm/bin/clang++``, then ``<root>/bin/hipcc``. Debian's ``/usr`` layout is skipped
   here: its hipcc 5.2 is hard-wired to clang-15, which rejects gfx942.
3. The toolchain that ``scripts/install-hip-toolchain.sh`` wrote
   (``${ROCMBUILD_TOOLCHAIN_DIR:-~/.cache/rocmbuild/hiptc}/toolchain.json``): clang-22 when present
   (gfx950), else clang-19.

When the ROCm root is a Debian-packaged SDK tree (``scripts/install-rocm-sdk.sh``; it has no
compiler of its own that runs here), toolchain.json's clang-22 (or a clang named by 1.) compiles
against it: its ``--rocm-path``, device libraries and headers (``for_sdk``).

Whether a compiler accepts an arch is tested by compiling an empty kernel (``accepts_arch``), not
read from a table. Every child process gets HIP_PLATFORM=amd: with /usr/local/cuda installed, HIP
tools and CMake otherwise pick the NVIDIA platform.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.core import options, untrusted
from rocmbuild.core.errors import CommandFailed, ToolchainError
from rocmbuild.core.run import run
from rocmbuild.host import toolchain

INSTALL_HINT = (
    "run scripts/install-hip-toolchain.sh (Debian 12, no GPU needed) or set "
    "ROCMBUILD_HIP_COMPILER / --hip-compiler to a HIP-capable clang++ (e.g. "
    "/opt/rocm/llvm/bin/amdclang++)"
)

PROBE_KERNEL = """#include <hip/hip_runtime.h>
__global__ void rocmbuild_probe(float* p) { if (p) p[threadIdx.x] = 1.0f; }
"""


def toolchain_dir() -> Path:
    d = options.env("ROCMBUILD_TOOLCHAIN_DIR")
    return Path(d) if d else Path.home() / ".cache/rocmbuild/hiptc"


def hip_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A full child environment with HIP_PLATFORM=amd (the /usr/local/cuda trap)."""
    env = dict(os.environ if base is None else base)
    env["HIP_PLATFORM"] = "amd"
    return env


@dataclass(frozen=True)
class HipCompiler:
    path: str
    kind: str  # "amdclang" | "hipcc" | "clang"
    version: str
    rocm_path: str | None
    device_lib_path: str | None
    flags: tuple[str, ...]
    cmake_defines: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    source: str = ""  # where it was found, for doctor / plan output

    @property
    def flags_str(self) -> str:
        return " ".join(self.flags)

    def build_env(self, archs: Sequence[str], jobs: int | None = None) -> dict[str, str]:
        """The variables a scikit-build-core HIP project (probes/hip-attention) reads:
        HIP_CXX, HIP_ARCHS, HIP_FLAGS, plus HIP_PLATFORM=amd and CMAKE_BUILD_PARALLEL_LEVEL."""
        env = {
            "HIP_CXX": self.cmake_defines.get("CMAKE_HIP_COMPILER", self.path),
            "HIP_ARCHS": ";".join(archs),
            "HIP_FLAGS": self.flags_str,
            "HIP_PLATFORM": "amd",
        }
        if jobs:
            env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
        return env

    def compile_argv(self, src: str | os.PathLike[str], out: str | os.PathLike[str],
                     archs: Sequence[str], extra: Sequence[str] = ("-c",)) -> list[str]:
        return [self.path, "-x", "hip", *self.flags, *(f"--offload-arch={a}" for a in archs),
                *extra, str(src), "-o", str(out)]

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path, "kind": self.kind, "version": self.version,
            "rocm_path": self.rocm_path, "device_lib_path": self.device_lib_path,
            "flags": list(self.flags), "cmake_defines": dict(self.cmake_defines),
            "source": self.source,
        }


_version_cache: dict[str, str] = {}


def compiler_version(path: str) -> str:
    """'19.1.7' from ``clang++ --version``; for hipcc, the clang version it reports."""
    if path not in _version_cache:
        try:
            res = run([path, "--version"], env=hip_env(), capture=True, check=False, timeout=30)
            text = res.output
        except Exception:  # noqa: BLE001 - a broken binary just has no version
            text = ""
        m = re.search(r"clang version (\d+[\w.\-+]*)", text) or re.search(
            r"HIP version:\s*(\S+)", text)
        _version_cache[path] = m.group(1) if m else "unknown"
    return _version_cache[path]


def _kind(path: str) -> str:
    name = Path(path).name
    if "hipcc" in name:
        return "hipcc"
    if "amdclang" in name:
        return "amdclang"
    return "clang"


def _cmake_defines(cxx: str, flags: Sequence[str]) -> dict[str, str]:
    return {
        "CMAKE_HIP_COMPILER": cxx,
        "CMAKE_HIP_FLAGS": " ".join(flags),
        "CMAKE_HIP_PLATFORM": "amd",
    }


def _make(path: str, kind: str, rocm_path: str | None, device_lib_path: str | None,
          flags: Sequence[str], source: str, cmake_cxx: str | None = None) -> HipCompiler:
    flags = tuple(flags)
    env_flags = options.env("ROCMBUILD_HIP_FLAGS")
    if env_flags is not None:
        flags = tuple(shlex.split(env_flags))
    return HipCompiler(
        path=path, kind=kind, version=compiler_version(path), rocm_path=rocm_path,
        device_lib_path=device_lib_path, flags=flags,
        cmake_defines=_cmake_defines(cmake_cxx or path, flags), source=source,
    )


TOOLCHAIN_JSON_MAX = 1 << 20


def _toolchain_json(directory: Path | None) -> dict[str, Any]:
    """toolchain.json (install-hip-toolchain.sh's); {} when there is none or it is not one (a
    missing toolchain is reported where a compiler is needed)."""
    try:
        data = untrusted.read_json((directory or toolchain_dir()) / "toolchain.json",
                                   TOOLCHAIN_JSON_MAX)
    except (OSError, untrusted.BadJson):
        return {}
    return data if isinstance(data, dict) else {}


def load_toolchain_json(directory: Path | None = None) -> list[dict[str, object]]:
    """Entries of toolchain.json whose compiler exists; [] when there is none."""
    data = _toolchain_json(directory)
    compilers = data.get("compilers")
    entries = [c for c in compilers if isinstance(c, dict)] if isinstance(compilers, list) else []
    return [c for c in entries if c.get("path") and Path(str(c["path"])).is_file()]


def toolchain_tool(name: str, directory: Path | None = None) -> Path | None:
    """A program toolchain.json lists under ``tools`` (install-hip-toolchain.sh puts Debian
    forky's ``hipify-perl`` there), when it exists; else None."""
    tools = _toolchain_json(directory).get("tools")
    path = tools.get(name) if isinstance(tools, dict) else None
    return Path(path) if isinstance(path, str) and Path(path).is_file() else None


def _from_toolchain_entry(c: Mapping[str, object], source: str) -> HipCompiler:
    raw_flags: Any = c.get("flags") or []
    flags = [str(f) for f in raw_flags]
    rocm = c.get("rocm_path")
    dlp = c.get("device_lib_path")
    return _make(str(c["path"]), str(c.get("kind", "clang")), str(rocm) if rocm else None,
                 str(dlp) if dlp else None, flags, source)


def _rocm_from_path(p: Path) -> str | None:
    """/opt/rocm-6.2.0/llvm/bin/clang++ -> /opt/rocm-6.2.0 (when it looks like a ROCm root)."""
    for parent in p.parents:
        if (parent / "include/hip/hip_runtime.h").is_file() or (parent / ".info/version").is_file():
            return str(parent)
    return None


def _explicit(spec: str, source: str) -> HipCompiler:
    found = shutil.which(spec) if os.sep not in spec else (spec if Path(spec).is_file() else None)
    if not found:
        raise ToolchainError(
            f"{source}: HIP compiler {spec!r} not found",
            hint="give a path to clang++ / amdclang++ / hipcc, or unset it to auto-detect; "
            + INSTALL_HINT,
        )
    found = os.path.abspath(found)
    for c in load_toolchain_json():  # a compiler the install script set up: reuse its flags
        if os.path.realpath(str(c["path"])) == os.path.realpath(found):
            return _from_toolchain_entry({**c, "path": found}, f"{source} (toolchain.json)")
    rocm = _rocm_from_path(Path(found))
    if rocm and rocm != "/usr":
        kind = _kind(found)
        return _make(found, kind, rocm, None, [f"--rocm-path={rocm}"] if kind != "hipcc" else [],
                     source, cmake_cxx=_cmake_clang(Path(rocm)) if kind == "hipcc" else None)
    return _make(found, _kind(found), rocm, None, [f"--rocm-path={rocm}"] if rocm else [], source)


def _cmake_clang(root: Path) -> str | None:
    c = root / "llvm/bin/clang++"
    return str(c) if c.is_file() else None


def _real_rocm(root: Path) -> HipCompiler | None:
    for rocm, where in toolchain.rocm_candidates(root):
        if rocm.resolve() == (root / "usr").resolve():
            continue  # Debian's layout: hipcc 5.2 -> clang-15 (no gfx942); use toolchain.json
        for rel, kind in (("llvm/bin/amdclang++", "amdclang"), ("llvm/bin/clang++", "clang"),
                          ("bin/hipcc", "hipcc")):
            cand = rocm / rel
            if cand.is_file():
                flags = [f"--rocm-path={rocm}"] if kind != "hipcc" else []
                return _make(str(cand), kind, str(rocm), None, flags, f"{where} ({rocm})",
                             cmake_cxx=_cmake_clang(rocm) if kind == "hipcc" else None)
    return None


def for_sdk(found: HipCompiler, sdk: toolchain.RocmRoot) -> HipCompiler:
    """``found`` compiling against a Debian-packaged SDK tree (scripts/install-rocm-sdk.sh): its
    ROCm root and device libraries, and its headers ahead of any the system has (Debian 12's
    HIP 5.2 in /usr/include would otherwise be found first). ROCMBUILD_HIP_FLAGS still wins."""
    flags = (f"--rocm-path={sdk.path}", f"--rocm-device-lib-path={sdk.device_lib_path}",
             "-isystem", str(sdk.path / "include"))
    return _make(found.path, found.kind, str(sdk.path), sdk.device_lib_path, flags,
                 f"{found.source}, against {sdk.path} (layout {sdk.layout})")


def detect(explicit: str | None = None, root: Path = Path("/"),
           sdk: toolchain.RocmRoot | None = None) -> HipCompiler:
    """Find the HIP compiler (see the module docstring for the order). ``root`` moves the
    file system root for the ROCm search (fixture trees); toolchain.json is never moved.
    ``sdk``: a Debian-packaged SDK tree the build uses (its flags replace the compiler's,
    ``for_sdk``); its device libraries are clang-22's, so toolchain.json's clang-22 it is."""
    if explicit:
        found = _explicit(explicit, "--hip-compiler")
        return for_sdk(found, sdk) if sdk is not None and found.kind == "clang" else found
    env = options.env("ROCMBUILD_HIP_COMPILER")
    if env:
        found = _explicit(env, "ROCMBUILD_HIP_COMPILER")
        return for_sdk(found, sdk) if sdk is not None and found.kind == "clang" else found
    rocm = _real_rocm(root)
    if rocm is not None and sdk is None:
        return rocm
    entries = load_toolchain_json()
    if sdk is not None:
        entries = [c for c in entries if c.get("name") == "clang-22"]
        if not entries:
            raise ToolchainError(
                f"{sdk.path} (layout {sdk.layout}) needs clang-22, and "
                f"{toolchain_dir() / 'toolchain.json'} lists none",
                hint="run scripts/install-hip-toolchain.sh --with-gfx950, or set "
                "ROCMBUILD_HIP_COMPILER to a clang++ 22")
        return for_sdk(_from_toolchain_entry(entries[0], f"toolchain.json ({toolchain_dir()})"),
                       sdk)
    if entries:
        entries.sort(key=lambda c: 0 if c.get("name") == "clang-22" else 1)
        return _from_toolchain_entry(entries[0], f"toolchain.json ({toolchain_dir()})")
    raise ToolchainError(
        "no HIP compiler found (ROCM_PATH, HIP_PATH, /opt/rocm, "
        f"{toolchain_dir() / 'toolchain.json'})",
        hint=INSTALL_HINT,
    )


_accept_cache: dict[tuple[str, tuple[str, ...], str], tuple[bool, str]] = {}


def accepts_arch(compiler: HipCompiler, arch: str) -> tuple[bool, str]:
    """Compile an empty kernel for ``arch``: (True, 'compiled ... in 1.2s') or (False, the
    compiler's first error line). Cached per (compiler, flags, arch) in this process."""
    key = (compiler.path, compiler.flags, arch)
    if key in _accept_cache:
        return _accept_cache[key]
    with tempfile.TemporaryDirectory(prefix="rocmbuild-arch-") as tmp:
        src = Path(tmp) / "probe.hip"
        src.write_text(PROBE_KERNEL)
        t0 = time.monotonic()
        try:
            res = run(compiler.compile_argv(src, Path(tmp) / "probe.o", [arch]), env=hip_env(),
                      capture=True, check=False, timeout=300, cwd=tmp)
        except CommandFailed as exc:  # the compiler cannot even start
            _accept_cache[key] = (False, exc.message)
            return _accept_cache[key]
        dt = time.monotonic() - t0
    if res.returncode == 0:
        result = (True, f"compiled an empty kernel for {arch} in {dt:.1f}s")
    else:
        lines = [ln.strip() for ln in res.output.splitlines() if ln.strip()]
        err = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        result = (False, err[:300] or f"exit code {res.returncode}")
    _accept_cache[key] = result
    return result
