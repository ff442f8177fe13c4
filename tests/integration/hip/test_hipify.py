"""The hipify stage for real (issue 15): CUDA-only code of our own, translated by
torch.utils.hipify (the CPU torch of the test venv ships it) in a child process, compiled for
gfx90a and gfx942 by the HIP toolchain and audited.

- tests/fixtures/cuda-vecscale: a CMake library with CUDA as a language (a kernel, a
  cudaMalloc/cudaMemcpy host side, a .cuh header), built through the whole pipeline with the
  cmake backend by tests/fixtures/cuda-vecscale.toml; its contrib/l2_persist.cu uses CUDA APIs
  no HIP has, which ``strict`` must refuse with file, line and symbol.
- the same library through hipify-perl (Debian forky's: bookworm has none;
  scripts/install-hip-toolchain.sh --with-gfx950 unpacks it and lists it in toolchain.json).
- tests/fixtures/cuda-ext: a setup.py torch CUDAExtension, hipified out of place. Its wheel
  cannot be built here: CUDAExtension needs a ROCm torch (the venv's torch is a CPU build), so
  the test compiles the translated kernel with the HIP toolchain and audits that instead.

Nothing is faked; only the GPU is absent (the audit reads the code objects, it runs none)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import BuildError
from rocmbuild.core.run import run
from rocmbuild.host import detect as hostmod
from rocmbuild.host.compiler import HipCompiler, hip_env
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.stages import fetch, hipify, patch
from rocmbuild.stages.context import Context
from tests.conftest import REPO, rocmbuild
from tests.integration.hip.conftest import make_wheel

FIX = REPO / "tests/fixtures"
VECSCALE = FIX / "cuda-vecscale.toml"


def _recipe_copy(tmp_path: Path, *drop: str, tool: str = "torch") -> Path:
    """cuda-vecscale.toml outside the repo (its paths made absolute), less the lines that start
    with one of ``drop``."""
    text = VECSCALE.read_text().replace('path = "cuda-vecscale"', f'path = "{FIX}/cuda-vecscale"')
    text = text.replace('tool = "torch"', f'tool = "{tool}"')
    text = text.replace('file = "patches/', f'file = "{FIX}/patches/')
    out = tmp_path / "vecscale.toml"
    out.write_text("".join(x for x in text.splitlines(keepends=True) if not x.startswith(drop)))
    return out


def _through_hipify(recipe: Path, work: Path) -> tuple[Context, Status]:
    """fetch, patch and hipify of ``recipe``: the pipeline's first three stages, in process."""
    host = hostmod.detect()
    plan = render(load(recipe), Target(arch="gfx90a,gfx942"), host)
    ctx = Context(Workspace(work, work / "cache"), work / "logs", work / "wheels", host)
    status = Status.SKIPPED
    for stage in (fetch.run, patch.run, hipify.run):
        res = stage(plan, ctx)
        ctx.artifacts = ctx.artifacts.merged(res.artifacts)
        status = res.status
    return ctx, status


def test_cuda_cmake_library_becomes_a_gfx90a_gfx942_wheel(tmp_path: Path) -> None:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w")}
    res = rocmbuild("build", str(VECSCALE), "--arch", "gfx90a,gfx942", env=env)
    assert res.returncode == 0, res.stderr
    assert "tool torch: 4 file(s) changed" in res.stderr
    assert "device code for gfx90a, gfx942" in res.stderr
    wheel = next((tmp_path / "w/wheels").glob("vecscale-0.1.0+*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        assert "vecscale/lib/libvecscale.so" in zf.namelist()
        prov = json.loads(zf.read(next(n for n in zf.namelist()
                                       if n.endswith(".dist-info/rocmbuild.json"))))
    assert prov["hipify"] == {
        "tool": "torch",
        "changed_files": ["CMakeLists.txt", "src/scale_kernel.cuh", "src/scale_kernel.hip",
                          "src/vecscale.hip"],
        "renamed": {"src/scale_kernel.cu": "src/scale_kernel.hip",
                    "src/vecscale.cu": "src/vecscale.hip"},
        "unmapped": [],
        "not_compiled": [],
    }
    assert prov["plan"]["hipify_step"]["ignores"] == ["contrib/*"]
    log = next((tmp_path / "w/logs").rglob("hipify.log")).read_text()
    assert "changed: src/vecscale.hip" in log and "renamed: src/vecscale.cu -> " in log
    # the fixture itself is untouched: the stage works on the fetched copy
    assert "cudaMalloc(&d_data" in (FIX / "cuda-vecscale/src/vecscale.cu").read_text()


def test_strict_refuses_every_unmapped_api_with_its_line(tmp_path: Path) -> None:
    """Without ``ignores``, contrib/l2_persist.cu is translated too: three CUDA names with no
    HIP mapping, one line each (its own lines, though the file was renamed .hip), exit 6,
    before any compiler runs."""
    recipe = _recipe_copy(tmp_path, "ignores")
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942",
                    env={"ROCMBUILD_WORKDIR": str(tmp_path / "w")})
    assert res.returncode == 6, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("build error:")]
    assert errors == [
        "build error: hipify: contrib/l2_persist.cu:9: cudaCtxResetPersistingL2Cache: CUDA API "
        "with no HIP mapping",
        "build error: hipify: contrib/l2_persist.cu:13: cudaLaunchConfig_t: CUDA API with no "
        "HIP mapping",
        "build error: hipify: contrib/l2_persist.cu:15: cudaOccupancyMaxActiveClusters: CUDA "
        "API with no HIP mapping",
    ]
    assert "hint: port these by hand" in res.stderr and "] build" not in res.stderr
    assert "Traceback" not in res.stderr


def test_not_strict_logs_the_unmapped_apis_and_goes_on(tmp_path: Path) -> None:
    ctx, status = _through_hipify(_recipe_copy(tmp_path, "ignores", "strict"), tmp_path / "w")
    assert status is Status.WARNING
    report = ctx.artifacts.hipify
    assert report is not None
    assert [str(u) for u in report.unmapped] == [
        "contrib/l2_persist.cu:9: cudaCtxResetPersistingL2Cache",
        "contrib/l2_persist.cu:13: cudaLaunchConfig_t",
        "contrib/l2_persist.cu:15: cudaOccupancyMaxActiveClusters"]
    log = (tmp_path / "w/logs/hipify.log").read_text()
    assert "unmapped: contrib/l2_persist.cu:13: cudaLaunchConfig_t" in log


def test_torch_extension_out_of_place_and_its_kernel_compiles(tmp_path: Path,
                                                              hipc: HipCompiler) -> None:
    ctx, status = _through_hipify(FIX / "cuda-ext.toml", tmp_path)
    assert status is Status.SUCCESS
    tree, report = ctx.artifacts.tree, ctx.artifacts.hipify
    assert tree is not None and report is not None
    # the names torch's CUDAExtension gives them on a ROCm torch; the originals stay
    assert report.changed == ("csrc/axpy_hip.cuh", "csrc/axpy_kernel.hip",
                              "csrc/bindings_hip.cpp")
    assert "cudaStream_t" in (tree / "csrc/axpy_kernel.cu").read_text()
    kernel = (tree / "csrc/axpy_kernel.hip").read_text()
    assert '#include "axpy_hip.cuh"' in kernel and "hipStream_t s" in kernel
    assert "hipLaunchKernelGGL(( axpy_kernel)" in kernel
    bindings = (tree / "csrc/bindings_hip.cpp").read_text()
    assert "#include <c10/hip/HIPStream.h>" in bindings and "hipStream_t stream" in bindings
    # the kernel (no torch headers) compiles for both archs; bindings_hip.cpp needs ROCm
    # torch's headers (ATen/hip), which a CPU torch does not ship
    so = tmp_path / "libaxpy.so"
    run([hipc.path, "-x", "hip", *hipc.flags, "--offload-arch=gfx90a", "--offload-arch=gfx942",
         "-fPIC", "-shared", str(tree / "csrc/axpy_kernel.hip"), "-o", str(so)],
        env=hip_env(), capture=True)
    wheel = make_wheel(tmp_path / "cuda_ext-0.1.0-cp311-cp311-linux_x86_64.whl",
                       {"cuda_ext/libaxpy.so": so})
    audit = rocmbuild("audit", str(wheel), "--arch", "gfx90a,gfx942")
    assert audit.returncode == 0, audit.stderr
    assert "gfx90a" in audit.stdout + audit.stderr and "gfx942" in audit.stdout + audit.stderr


def test_perl_tool_in_place_and_strict_names_the_original_lines(tmp_path: Path) -> None:
    """hipify-perl puts an #include line on top of each kernel file: the unmapped APIs are
    still reported at their lines in the original. Names are kept (no .cu -> .hip), its .prehip
    backups are removed, CMakeLists.txt is not its to translate."""
    with pytest.raises(BuildError) as err:
        _through_hipify(_recipe_copy(tmp_path, "ignores", tool="perl"), tmp_path / "w")
    assert err.value.message.splitlines() == [
        "hipify: contrib/l2_persist.cu:9: cudaCtxResetPersistingL2Cache: CUDA API with no HIP "
        "mapping",
        "hipify: contrib/l2_persist.cu:13: cudaLaunchConfig_t: CUDA API with no HIP mapping",
        "hipify: contrib/l2_persist.cu:15: cudaOccupancyMaxActiveClusters: CUDA API with no "
        "HIP mapping"]
    (tmp_path / "ok").mkdir()
    ctx, status = _through_hipify(_recipe_copy(tmp_path / "ok", tool="perl"), tmp_path / "ok/w")
    assert status is Status.SUCCESS and ctx.artifacts.hipify is not None
    assert ctx.artifacts.hipify.changed == ("src/scale_kernel.cu", "src/scale_kernel.cuh",
                                            "src/vecscale.cu")
    tree = ctx.artifacts.tree
    assert tree is not None and not list(tree.rglob("*.prehip"))
    assert "hipMemcpy(d_data, data, bytes, hipMemcpyHostToDevice)" in (
        tree / "src/vecscale.cu").read_text()


HELPERS = FIX / "cuda-helpers.toml"


def _helpers_copy(tmp_path: Path, hipify_extra: str = "", drop: str = "\0") -> Path:
    """cuda-helpers.toml outside the repo, with more [hipify] keys and less the lines that
    start with ``drop``."""
    text = HELPERS.read_text().replace('path = "cuda-helpers"', f'path = "{FIX}/cuda-helpers"')
    text = text.replace("strict = true", f"strict = true\n{hipify_extra}")
    out = tmp_path / "helpers.toml"
    out.write_text("".join(x for x in text.splitlines(keepends=True) if not x.startswith(drop)))
    return out


def test_strict_judges_only_the_code_the_build_compiles(tmp_path: Path) -> None:
    """issue 24: common/helper_check.h (a CUDA-samples-style helper of our own) has a driver-API
    block (#ifdef CUDA_DRIVER_API) and a cuSOLVER block (#ifdef CUSOLVER_COMMON_H_) with names
    no hipify translates; the vecadd build defines neither, so the preprocessor (the HIP
    compiler's, host and device passes) leaves them out: strict passes, and the three uses are
    warnings, in the report, the log and on stderr."""
    ctx, status = _through_hipify(HELPERS, tmp_path / "w")
    assert status is Status.WARNING
    report = ctx.artifacts.hipify
    assert report is not None and report.unmapped == () and report.not_judged == ""
    assert [str(u) for u in report.not_compiled] == [
        "common/helper_check.h:12: CUDA_DRIVER_API",  # an #if condition: tested, not compiled
        "common/helper_check.h:19: cuCtxResetPersistingL2Cache",
        "common/helper_check.h:24: cusolverStatus_t"]
    log = (tmp_path / "w/logs/hipify.log").read_text()
    assert "not compiled: common/helper_check.h:24: cusolverStatus_t" in log
    res = rocmbuild("plan", str(HELPERS), "--arch", "gfx942", "--json")
    assert json.loads(res.stdout)["hipify_step"]["include_dirs"] == ["common"]


def test_strict_still_refuses_a_name_the_build_compiles(tmp_path: Path) -> None:
    """The same tree built with -DCUDA_DRIVER_API (hipify.defines says so): the driver block is
    compiled, and its cuCtxResetPersistingL2Cache, which hipify left, stops the build (exit 6)
    with file, line and name; the cuSOLVER block stays a warning."""
    recipe = _helpers_copy(tmp_path, 'defines = ["CUDA_DRIVER_API"]')
    res = rocmbuild("build", str(recipe), "--arch", "gfx90a,gfx942",
                    env={"ROCMBUILD_WORKDIR": str(tmp_path / "w")})
    assert res.returncode == 6, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("build error:")]
    assert errors == ["build error: hipify: common/helper_check.h:19: "
                      "cuCtxResetPersistingL2Cache: CUDA API with no HIP mapping"]
    assert "common/helper_check.h:24: cusolverStatus_t: CUDA API with no HIP mapping, in code " \
           "this build does not compile" in " ".join(res.stderr.split())
    assert "Traceback" not in res.stderr


def test_a_unit_the_preprocessor_cannot_read_judges_nothing(tmp_path: Path) -> None:
    """Without include_dirs the preprocessor does not find helper_check.h: nothing can be
    judged, so every use outside an #if condition counts as compiled (as before the
    preprocessor), and the hint says why."""
    recipe = _helpers_copy(tmp_path, drop="include_dirs")
    with pytest.raises(BuildError) as err:
        _through_hipify(recipe, tmp_path / "w")
    assert err.value.message.splitlines() == [
        "hipify: common/helper_check.h:19: cuCtxResetPersistingL2Cache: CUDA API with no HIP "
        "mapping",
        "hipify: common/helper_check.h:24: cusolverStatus_t: CUDA API with no HIP mapping"]
    assert "src/vecadd.hip could not be preprocessed here" in (err.value.hint or "")
    assert "helper_check.h' file not found" in (err.value.hint or "")
