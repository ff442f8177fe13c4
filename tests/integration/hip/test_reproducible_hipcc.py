"""torch cpp_extension / hipcc builds get path-independent CUIDs too (docs/reproducible.md), for
real: the pip-wheel backend's HIP_CLANG_PATH scripts (compilecache.wrappers, with the chain the
build stage assembles: memlog.py, launchers/cuid.py, the compiler) compile two small HIP units
for gfx942 with the toolchain's clang in two trees at different absolute paths. CI has no hipcc,
so the test calls the scripts' ``clang++`` with the arguments in the order hipcc writes them
(its flags, ``--offload-arch``, ``-O3``, ``-mllvm ...``, then the caller's ``-fPIC -c``, ``-x
hip`` before the source, ``-o``: logged from Debian's hipcc 5.2.3 by hand, and ROCm 6's
hipBin_amd.h builds the same line), with absolute paths as torch's ninja file gives them. The
units declare what a kernel launch needs themselves and compile with ``-nogpuinc`` (no HIP
headers: about 0.1 s of CPU a unit instead of 2.6 s; the CUID does not depend on them).

- with the CUID launcher, each unit's object is byte-identical in both trees;
- without it (the same scripts minus cuid.py) the objects differ: clang's default CUID hashes
  the absolute path, so this test fails if the launcher stops working;
- the two units get two CUIDs (from ``src/a.hip`` and ``src/b.hip``), so a shared library of
  both links.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rocmbuild.buildtools import compilecache
from rocmbuild.core.run import run
from rocmbuild.host.compiler import HipCompiler, hip_env
from rocmbuild.stages.build import cuid_argv, memlog_argv

CUID_SYMBOL = re.compile(rb"__hip_cuid_([0-9a-f]+)")
UNIT = """struct dim3 {{ unsigned x, y, z; }};
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, unsigned long, void*);
__attribute__((global)) void k{name}(float* x) {{ x[__builtin_amdgcn_workitem_id_x()] {op}; }}
"""


def _tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    for name, op in (("a", "*= 2.0f"), ("b", "+= 1.0f")):
        (root / "src" / f"{name}.hip").write_text(UNIT.format(name=name, op=op))
    (root / "build").mkdir()
    return root


def _clangxx(tree: Path, hipc: HipCompiler, launch: str, cuid: bool) -> Path:
    """The HIP_CLANG_PATH ``clang++`` the build stage would write into ``tree``."""
    front = memlog_argv(tree / "units.jsonl")
    env = compilecache.wrappers({"PATH": hip_env()["PATH"]}, tree / launch, hipc.path, front,
                                [*front, *cuid_argv(tree)] if cuid else None)
    return Path(env["HIP_CLANG_PATH"]) / "clang++"


def _hipcc_line(clangxx: Path, hipc: HipCompiler, src: Path, out: Path) -> list[str]:
    return [str(clangxx), *hipc.flags, "-nogpuinc", "--offload-arch=gfx942", "-O3",
            "-mllvm", "-amdgpu-early-inline-all=true", "-mllvm", "-amdgpu-function-calls=false",
            "-fPIC", "-c", "-x", "hip", str(src), "-o", str(out)]


def test_hipcc_units_are_the_same_in_two_trees(tmp_path: Path, hipc: HipCompiler) -> None:
    one = _tree(tmp_path / "one")
    two = _tree(tmp_path / "second-workspace" / "deeper")
    jobs: list[list[str]] = []
    for tree in (one, two):
        cuid, plain = _clangxx(tree, hipc, "_rocmbuild_launch", True), _clangxx(
            tree, hipc, "_plain_launch", False)
        for unit in ("a", "b"):
            jobs.append(_hipcc_line(cuid, hipc, tree / f"src/{unit}.hip",
                                    tree / f"build/{unit}.o"))
        jobs.append(_hipcc_line(plain, hipc, tree / "src/a.hip", tree / "build/a_plain.o"))
    with ThreadPoolExecutor(2) as ex:
        for res in ex.map(lambda argv: run(argv, env=hip_env(), capture=True), jobs):
            assert res.returncode == 0

    for unit in ("a", "b"):
        assert (one / f"build/{unit}.o").read_bytes() == (two / f"build/{unit}.o").read_bytes()
    assert (one / "build/a_plain.o").read_bytes() != (two / "build/a_plain.o").read_bytes()

    cuids = {}
    for unit in ("a", "b"):
        found = set(CUID_SYMBOL.findall((one / f"build/{unit}.o").read_bytes()))
        assert len(found) == 1, found  # clang's hash of the -cuid= value
        cuids[unit] = found.pop()
    assert cuids["a"] != cuids["b"]
    lib = one / "build/libab.so"
    run([hipc.path, "-fPIC", "-shared", str(one / "build/a.o"), str(one / "build/b.o"),
         "-o", str(lib)], env=hip_env(), capture=True)
    assert lib.is_file()

    # memlog.py came first in the chain: it measured each unit
    lines = [json.loads(x) for x in (one / "units.jsonl").read_text().splitlines()]
    assert sorted(Path(x["out"]).name for x in lines if x["unit"]) == ["a.o", "a_plain.o", "b.o"]
