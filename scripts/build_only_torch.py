"""Turn the torch of this interpreter into a build-only ROCm torch (what that is:
scripts/install-build-only-torch.sh, which runs this with the venv's python). Steps, each checked:

1. torch's own hipify on the wheel's CUDA headers (every ``cuda`` directory under torch/include),
   in place, as torch's ROCm build does; plus the headers that build generates
   (``c10/hip/impl/hip_cmake_macros.h``, ``ATen/hip/HIPConfig.h`` and ``ATen/cuda/CUDAConfig.h``
   with ``AT_ROCM_ENABLED() 1``).
2. The HIP-side API: clang++-22 parses one unit that includes every header of ATen/hip and c10/hip
   (the API of libtorch_hip and libc10_hip; ATen/native/hip is torch's own kernels') and dumps
   its AST (declarations whose qualified names hold cuda, hip, CUDA or HIP: at::cuda::...,
   at::CUDAGeneratorImpl); each function or variable declared
   with the export attribute (C10_CUDA_API: libc10_hip.so; TORCH_CUDA_*_API: libtorch_hip.so)
   and not defined in the header is a symbol of that library.
3. Link stubs torch/lib/libc10_hip.so and libtorch_hip.so defining exactly those symbols.
4. ROCM_HOME for cpp_extension: ``--home`` with bin/hipcc (clang++-22 against the SDK),
   include and lib (the SDK's), bin/hipconfig (the SDK tree's shim), .info/version.
5. torch/version.py: hip and rocm from the SDK (cuda None); torch/utils/cpp_extension.py:
   ROCM_HOME is ``--home``; share/cmake/Caffe2/Caffe2Config.cmake loads LoadHIP.cmake and
   TorchConfig.cmake links torch_hip and c10_hip, as a ROCm build's do. Each edit replaces
   known lines and stops if they are not found.
6. torch/_rocmbuild_build_only.json: what was done (rocmbuild's host detection reads it).

Standalone on purpose (stdlib and torch only): it runs inside the venv it changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

MARKER = "_rocmbuild_build_only.json"
HIP_CONFIG = """#pragma once
// Written by rocmbuild's scripts/build_only_torch.py: what torch's ROCm build generates from
// aten/src/ATen/cuda/CUDAConfig.h.in (no cuDNN/MIOpen, cuSPARSELt/hipSPARSELt or MAGMA here).
#define AT_CUDNN_ENABLED() 0
#define AT_CUSPARSELT_ENABLED() 0
#define AT_HIPSPARSELT_ENABLED() 0
#define AT_ROCM_ENABLED() 1
#define AT_MAGMA_ENABLED() 0
#define NVCC_FLAGS_EXTRA ""
"""
CMAKE_MACROS = """#pragma once
// Written by rocmbuild's scripts/build_only_torch.py (torch's ROCm build configures it).
#define C10_HIP_BUILD_SHARED_LIBS
"""
# Headers left out of the AST unit: the CPU wheel's ATen/hip/impl/*MasqueradingAsCUDA.h predate
# hipify v2 and do not compile against its headers; c10/hip/driver_api.h is NVML's (CUDA only).
SKIP_HEADER = re.compile(r"MasqueradingAsCUDA\.h$|/driver_api\.h$")
DECLS = frozenset({"FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "CXXDestructorDecl",
                   "CXXConversionDecl", "VarDecl"})
RECORDS = frozenset({"CXXRecordDecl", "ClassTemplateSpecializationDecl"})
TORCH_HIP_TARGETS = """
# rocmbuild build-only torch: a ROCm build's torch target links torch_hip and c10_hip
find_library(C10_HIP_LIBRARY c10_hip PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
find_library(TORCH_HIP_LIBRARY torch_hip PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
list(APPEND TORCH_LIBRARIES ${TORCH_HIP_LIBRARY} ${C10_HIP_LIBRARY})
set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_LIBRARIES
             ${TORCH_HIP_LIBRARY} ${C10_HIP_LIBRARY})
"""
DROPPED_MLLVM = ("-amdgpu-early-inline-all=true", "-amdgpu-function-calls=false")

HIPCC = """#!/usr/bin/env bash
# hipcc of rocmbuild's build-only ROCm torch (scripts/install-build-only-torch.sh): clang++ 22
# against Debian's ROCm {version} SDK, with what hipcc adds: -x hip before .cu/.hip/.cpp sources
# (unless -x is given), --rocm-path, the device libraries, the SDK's headers ahead of the
# system's, --hip-link when linking. The clang++ is $HIP_CLANG_PATH/clang++ when set (as hipcc
# does; rocmbuild's memory and CUID launchers sit there), else {clang}.
# It drops `-mllvm {drop0}` and `-mllvm {drop1}`: ROCm's
# amdclang tuning flags that flash-attn's setup.py adds for HIP > 6.2.41132, with which upstream
# clang 22 did not finish one CK unit in 20 CPU-minutes (measured); nothing built here is run.
set -euo pipefail
if [ "${{1:-}}" = --version ]; then echo "HIP version: {hip}"; exec {clang} --version; fi
clang={clang}
if [ -n "${{HIP_CLANG_PATH:-}}" ] && [ -x "$HIP_CLANG_PATH/clang++" ]; then
  clang=$HIP_CLANG_PATH/clang++
fi
args=() lang=0 compile=0 src=0
while [ $# -gt 0 ]; do
  case "$1" in
    -mllvm) if [ "${{2:-}}" = {drop0} ] || [ "${{2:-}}" = {drop1} ]; then shift 2; continue; fi
            args+=("$1" "${{2:-}}"); shift 2; continue ;;
    -x) lang=1 ;;
    -c|-E|-S|-fsyntax-only|-M|-MM) compile=1 ;;
    *.cu|*.hip|*.cpp|*.cc|*.cxx)
      if [ $lang = 0 ] && [ "${{1:0:1}}" != - ]; then args+=(-x hip); lang=1; fi
      src=1 ;;
  esac
  args+=("$1"); shift
done
flags=(--rocm-path={root} --rocm-device-lib-path={bc} -isystem {root}/include
       -D__HIP_PLATFORM_AMD__=1)
if [ $compile = 0 ] && [ $src = 0 ]; then flags+=(--hip-link -L{lib}); fi
exec "$clang" "${{flags[@]}}" "${{args[@]}}"
"""


def fail(msg: str) -> None:
    print(f"build_only_torch.py: {msg}", file=sys.stderr)
    sys.exit(1)


def sdk_facts(path: Path) -> dict[str, str]:
    """The SDK facts scripts/install-rocm-sdk.sh wrote: the strings this script uses."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"{path}: {exc}")
    keys = ("version", "hip_version", "root", "include", "lib", "device_lib_path", "hipconfig")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in keys):
        fail(f"{path}: not the facts file of scripts/install-rocm-sdk.sh (needs {', '.join(keys)})")
    return {k: data[k] for k in keys}


def hipify(inc: Path) -> int:
    """torch's hipify on every ``cuda`` directory under ``inc``, in place; the files written."""
    from torch.utils.hipify import hipify_python

    dirs = sorted(r for r, _, _ in os.walk(inc) if os.path.basename(r) == "cuda")
    result = hipify_python.hipify(
        project_directory=str(inc), output_directory=str(inc),
        includes=[f"{d}/*" for d in dirs],  # absolute: relative patterns match nothing
        is_pytorch_extension=False, hip_clang_launch=True, show_detailed=False,
        show_progress=False)
    written = [k for k, v in result.items() if v.hipified_path and v.hipified_path != k]
    if not written:
        fail(f"torch's hipify wrote nothing under {inc}")
    for rel, text in (("c10/hip/impl/hip_cmake_macros.h", CMAKE_MACROS),
                      ("ATen/hip/HIPConfig.h", HIP_CONFIG), ("ATen/cuda/CUDAConfig.h", HIP_CONFIG)):
        out = inc / rel
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
    return len(written)


def _objects(text: str) -> list[dict[str, object]]:
    """clang's filtered JSON AST dump: one JSON object per matching declaration, back to back."""
    dec = json.JSONDecoder()
    pos, out = 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        obj, pos = dec.raw_decode(text, pos)
        out.append(obj)


def exported(nodes: list[dict[str, object]], inc: Path) -> dict[str, str]:
    """mangled name -> the hipified header declaring it, for each exported function or variable
    that the header declares but does not define. clang writes a location's file only where it
    changes, so the walk keeps the last one seen, in document order."""
    found: dict[str, str] = {}
    last = {"file": ""}

    def note_files(node: dict[str, object]) -> None:
        places = [node.get("loc")]
        rng = node.get("range")
        if isinstance(rng, dict):
            places += [rng.get("begin"), rng.get("end")]
        for p in places:
            if not isinstance(p, dict):
                continue
            for q in (p, p.get("spellingLoc"), p.get("expansionLoc")):
                if isinstance(q, dict) and isinstance(q.get("file"), str):
                    last["file"] = q["file"]

    def walk(node: dict[str, object], in_exported_record: bool) -> None:
        note_files(node)
        here = last["file"]
        kind = node.get("kind")
        inner = [c for c in node.get("inner", []) or [] if isinstance(c, dict)]
        visible = any(c.get("kind") == "VisibilityAttr" for c in inner)
        name = node.get("mangledName")
        if kind in DECLS and isinstance(name, str) and (visible or in_exported_record):
            defined = any(c.get("kind") == "CompoundStmt" for c in inner)
            skip = (defined or node.get("inline") or node.get("pure") or node.get("isImplicit")
                    or node.get("explicitlyDeleted") or node.get("explicitlyDefaulted")
                    or name.startswith("_ZZ")  # a static local of an inline function
                    or (kind == "VarDecl" and node.get("storageClass") not in ("extern", "static")))
            rel = os.path.relpath(here, inc) if here else ""
            if not skip and "/hip/" in f"/{rel}" and not rel.startswith(".."):
                found[name] = rel
        for child in inner:
            walk(child, (visible and kind in RECORDS) or (in_exported_record and kind in RECORDS))

    for n in nodes:
        walk(n, False)
    return found


def hip_api(inc: Path, clang: str, sdk: dict[str, str]) -> dict[str, dict[str, str]]:
    """{"libc10_hip.so": {mangled: header}, "libtorch_hip.so": {...}} from the AST."""
    headers = sorted(str(p.relative_to(inc)) for d in ("ATen/hip", "c10/hip")
                     for p in (inc / d).rglob("*.h") if not SKIP_HEADER.search(str(p)))
    py_inc = sysconfig.get_paths()["include"]
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        unit = Path(tmp) / "all.hip"
        unit.write_text("".join(f"#include <{h}>\n" for h in headers))
        for flt in ("cuda", "hip", "CUDA", "HIP"):  # case-sensitive: at::CUDAGeneratorImpl
            cmd = [clang, "-x", "hip", "--offload-arch=gfx942", "--offload-host-only", "-std=c++17",
                   "-fsyntax-only", f"--rocm-path={sdk['root']}",
                   f"--rocm-device-lib-path={sdk['device_lib_path']}", "-isystem", sdk["include"],
                   "-I", str(inc), "-I", str(inc / "torch/csrc/api/include"), "-I", py_inc,
                   "-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", "-Xclang", "-ast-dump=json",
                   "-Xclang", f"-ast-dump-filter={flt}", str(unit)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                err = [ln for ln in res.stderr.splitlines() if "error" in ln][:3]
                fail(f"the hipified headers do not compile with {clang}: {'; '.join(err)}")
            found.update(exported(_objects(res.stdout), inc))
    libs: dict[str, dict[str, str]] = {"libc10_hip.so": {}, "libtorch_hip.so": {}}
    for name, header in found.items():
        libs["libc10_hip.so" if header.startswith("c10/") else "libtorch_hip.so"][name] = header
    if not libs["libc10_hip.so"] or not libs["libtorch_hip.so"]:
        fail("no exported HIP-side declarations found in the hipified headers")
    return libs


def write_stub(out: Path, names: list[str], clang: str) -> None:
    """A shared library ``out`` (soname its file name) defining each of ``names``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "stub.c"
        src.write_text("".join(f'void rocmbuild_stub_{i}(void) __asm__("{n}");\n'
                               f"void rocmbuild_stub_{i}(void) {{}}\n"
                               for i, n in enumerate(sorted(names))))
        cc = str(Path(clang).with_name(Path(clang).name.replace("clang++", "clang")))
        subprocess.run([cc, "-shared", "-nostdlib", "-fuse-ld=lld", "-fPIC",
                        f"-Wl,-soname,{out.name}", "-Wl,--build-id=none", "-o", str(out), str(src)],
                       check=True)


def rocm_home(home: Path, sdk: dict[str, str], clang: str) -> None:
    """ROCM_HOME for cpp_extension (bin/hipcc, bin/hipconfig, include, lib, .info/version)."""
    (home / "bin").mkdir(parents=True, exist_ok=True)
    for name, target in (("include", sdk["include"]), ("lib", sdk["lib"]),
                         ("bin/hipconfig", sdk["hipconfig"])):
        link = home / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    # AMD's layout has the ROCm version here; DeepSpeed's op builder reads it (builder.py
    # installed_rocm_version) and stops without it
    (home / ".info").mkdir(exist_ok=True)
    (home / ".info/version").write_text(f"{sdk['version']}\n")
    hipcc = home / "bin/hipcc"
    hipcc.write_text(HIPCC.format(version=sdk["version"], hip=sdk["hip_version"], clang=clang,
                                  root=sdk["root"], bc=sdk["device_lib_path"], lib=sdk["lib"],
                                  drop0=DROPPED_MLLVM[0], drop1=DROPPED_MLLVM[1]))
    hipcc.chmod(0o755)


def edit(path: Path, old: re.Pattern[str], new: str) -> None:
    text = path.read_text(encoding="utf-8")
    changed, n = old.subn(new, text)
    if n != 1:
        fail(f"{path}: expected one line matching {old.pattern!r}, found {n} (a torch this "
             "script does not know: add its lines here)")
    path.write_text(changed, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdk-facts", type=Path, required=True)
    ap.add_argument("--clang", required=True)
    ap.add_argument("--home", type=Path, required=True)
    args = ap.parse_args()
    sdk = sdk_facts(args.sdk_facts)
    import torch

    tdir = Path(torch.__file__).parent
    if (tdir / MARKER).exists():
        fail(f"{tdir} is already build-only: reinstall the wheel first "
             "(scripts/install-build-only-torch.sh does)")
    inc = tdir / "include"
    count = hipify(inc)
    print(f"[build-only-torch] torch's hipify wrote {count} headers")
    libs = hip_api(inc, args.clang, sdk)
    for lib, names in libs.items():
        write_stub(tdir / "lib" / lib, list(names), args.clang)
        print(f"[build-only-torch] stub {lib}: {len(names)} symbols the hipified headers declare")
    rocm_home(args.home, sdk, args.clang)
    edit(tdir / "version.py", re.compile(r"^hip: Optional\[str\] = None$", re.M),
         f"hip: Optional[str] = {sdk['hip_version']!r}  # rocmbuild build-only torch")
    edit(tdir / "version.py", re.compile(r"^rocm: Optional\[str\] = None$", re.M),
         f"rocm: Optional[str] = {sdk['version']!r}  # rocmbuild build-only torch")
    edit(tdir / "version.py", re.compile(r"^cuda: Optional\[str\] = .*$", re.M),
         "cuda: Optional[str] = None  # rocmbuild build-only torch")
    edit(tdir / "utils/cpp_extension.py",
         re.compile(r"^ROCM_HOME = _find_rocm_home\(\) if .*$", re.M),
         f"ROCM_HOME = {str(args.home)!r}  # rocmbuild build-only torch (no HIP runtime here)")
    # CMake projects (vLLM): torch's CMake config loads LoadHIP.cmake where it was built with
    # ROCm (HIP_FOUND, PYTORCH_FOUND_HIP, the ROCm packages it finds under ROCM_PATH)
    edit(tdir / "share/cmake/Caffe2/Caffe2Config.cmake",
         re.compile(r"^if ?\(OFF\)(\n  include\(\"\$\{CMAKE_CURRENT_LIST_DIR\}"
                    r"/public/LoadHIP\.cmake\"\))", re.M),
         r"if (ON)  # rocmbuild build-only torch\1")
    # ...and its torch target links torch_hip and c10_hip (Caffe2Targets.cmake of a ROCm build)
    with open(tdir / "share/cmake/Torch/TorchConfig.cmake", "a", encoding="utf-8") as f:
        f.write(TORCH_HIP_TARGETS)
    facts = {
        "format": 1,
        "build_only": True,
        "why": "compiles like a ROCm torch; its HIP libraries are link stubs: nothing built "
               "against it can load, and it is never published",
        "made_by": "scripts/install-build-only-torch.sh",
        "torch": torch.__version__,
        "hip": sdk["hip_version"],
        "rocm": sdk["version"],
        "sdk": sdk["root"],
        "rocm_home": str(args.home),
        "hipified_headers": count,
        "stubs": {lib: sorted(names) for lib, names in libs.items()},
        "edited": ["version.py", "utils/cpp_extension.py",
                   "share/cmake/Caffe2/Caffe2Config.cmake", "share/cmake/Torch/TorchConfig.cmake"],
        "hipcc_drops": [f"-mllvm {d}" for d in DROPPED_MLLVM],
    }
    (tdir / MARKER).write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
