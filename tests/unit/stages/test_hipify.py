"""The [hipify] table in plans and cache keys, and the scan for CUDA APIs hipify left (issue 15).

The scan reads text only; the translation itself (torch.utils.hipify in a child process, the
HIP compiler, the audit) is tested for real in tests/integration/hip/test_hipify.py."""

from __future__ import annotations

from pathlib import Path

from rocmbuild.artifacts.buildfacts import Unmapped
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.stages import hipify
from tests.conftest import REPO
from tests.unit.plan.test_render import HOST

EXT = REPO / "tests/fixtures/cuda-ext.toml"


def _recipe(tmp_path: Path, hipify_table: str, build: str = "") -> Path:
    p = tmp_path / "r.toml"
    p.write_text(f"""schema_version = 1
[package]
name = "demo"
[source]
path = "{REPO / 'tests/fixtures/cuda-ext'}"
[build]
{build}
{hipify_table}""")
    return p


def test_plan_carries_the_hipify_settings_and_needs_torch() -> None:
    plan = render(load(EXT), Target(arch="gfx942"), HOST)
    step = plan.hipify_step
    assert step is not None and step.tool == "torch" and step.out_of_place and step.strict
    assert plan.hipify == ()
    assert "torch" in plan.host_requires
    assert plan.to_json()["hipify_step"] == {
        "tool": "torch", "project_dir": "", "includes": ["csrc/*"], "ignores": [],
        "header_include_dirs": ["csrc"], "out_of_place": True, "strict": True}


def test_every_hipify_setting_is_in_the_cache_key(tmp_path: Path) -> None:
    keys = set()
    for table in ('[hipify]\ntool = "torch"', '[hipify]\ntool = "torch"\nstrict = true',
                  '[hipify]\ntool = "torch"\nout_of_place = true',
                  '[hipify]\ntool = "torch"\nincludes = ["csrc/*"]',
                  '[hipify]\ntool = "torch"\nignores = ["csrc/x*"]',
                  '[hipify]\ntool = "torch"\nproject_dir = "csrc"',
                  '[hipify]\ntool = "torch"\nheader_include_dirs = ["csrc"]',
                  '[hipify]\ntool = "torch"\ndefines = ["USE_X"]',
                  '[hipify]\ntool = "torch"\ninclude_dirs = ["common"]',
                  '[hipify]\ntool = "perl"', ""):
        d = tmp_path / str(len(keys))
        d.mkdir()
        keys.add(render(load(_recipe(d, table)), Target(arch="gfx942"), HOST).cache_key)
    assert len(keys) == 11


def test_build_hipify_is_the_command_tool_and_keeps_its_plan(tmp_path: Path) -> None:
    """Old recipes: build.hipify renders as before (the golden plans do not move)."""
    legacy = render(load(_recipe(tmp_path, "", 'hipify = ["python", "x.py", "{archs}"]')),
                    Target(arch="gfx90a,gfx942"), HOST)
    assert legacy.hipify == ("python", "x.py", "gfx90a;gfx942")
    assert legacy.hipify_step is not None and legacy.hipify_step.tool == "command"
    assert "hipify_step" not in legacy.to_json()
    d = tmp_path / "new"
    d.mkdir()
    table = render(load(_recipe(d, '[hipify]\ntool = "command"\ncommand = ["python", "x.py", '
                                '"{archs}"]')), Target(arch="gfx90a,gfx942"), HOST)
    assert table.hipify == legacy.hipify and table.to_json()["hipify"] == ["python", "x.py",
                                                                            "gfx90a;gfx942"]
    strict = render(load(_recipe(d, '[hipify]\ntool = "command"\ncommand = ["x"]\nstrict = '
                                 'true')), Target(arch="gfx942"), HOST)
    assert strict.to_json()["hipify_step"] == {"tool": "command", "strict": True}


SOURCE = """\
#include <cuda_runtime.h>
#include "cuda_helpers.h"
#include <cuda/std/atomic>   // libcu++: no HIP header of that name
#define CUDA_CHECK(x) do { (void)(x); } while (0)
// cudaMallocAsync in a comment is not a use
const char* s = "cudaFree in a string is not a use";
int cuda_ok = 1;  /* user names: cuda_ok, is_cuda */
bool is_cuda(void);
void f(CUresult r, cudaStream_t st) {
  CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  cublasLtMatmul(0); cuMemMap(0, 0, 0, 0, 0); int x = CU_DEVICE_ATTRIBUTE_X + CUDA_R_16F;
}
"""


def test_scan_finds_cuda_names_outside_comments_and_strings() -> None:
    found = list(hipify._cuda_names(SOURCE))
    assert found == [
        (1, "#include cuda_runtime.h"), (2, "#include cuda_helpers.h"),
        (3, "#include cuda/std/atomic"), (4, "CUDA_CHECK"), (9, "CUresult"),
        (9, "cudaStream_t"), (10, "CUDA_CHECK"), (10, "cudaCtxResetPersistingL2Cache"),
        (11, "cublasLtMatmul"), (11, "cuMemMap"), (11, "CU_DEVICE_ATTRIBUTE_X"),
        (11, "CUDA_R_16F")]


def test_left_names_report_the_original_line_and_skip_own_macros(tmp_path: Path) -> None:
    """The translated file has a line more at the top (hipify's hip_runtime include) and
    cudaStream_t mapped; what is left is reported at its line in the original source."""
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    (tmp_path / "cuda_helpers.h").write_text("#pragma once\n")  # the project's own header
    out = tmp_path / "k.hip"
    out.write_text('#include "hip/hip_runtime.h"\n' + SOURCE.replace(
        "<cuda_runtime.h>", "<hip/hip_runtime.h>").replace("cudaStream_t", "hipStream_t"))
    snap = hipify._snapshot(tmp_path, names=True)
    left = list(hipify._left("k.hip", snap["k.hip"], snap["k.cu"], "k.cu",
                             hipify._defines(tmp_path, snap, ["k.cu", "k.hip"])))
    assert sorted(map(str, left)) == sorted([
        "k.cu:3: #include cuda/std/atomic",
        "k.cu:9: CUresult", "k.cu:10: cudaCtxResetPersistingL2Cache",
        "k.cu:11: cublasLtMatmul", "k.cu:11: cuMemMap", "k.cu:11: CU_DEVICE_ATTRIBUTE_X",
        "k.cu:11: CUDA_R_16F"])
    # a use the original does not have (a tool added it): the translated file's own line
    new = list(hipify._left("n.hip", hipify._Seen("", {"cudaFoo": [3]}), None, "n.cu", set()))
    assert new == [Unmapped("n.hip", 3, "cudaFoo")]


def test_snapshot_skips_links_and_build_dirs(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text("cudaMalloc(0, 0);\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git/x.h").write_text("cudaFree(0);\n")
    (tmp_path / "link.cu").symlink_to(tmp_path / "a.cu")
    (tmp_path / "notes.txt").write_text("cudaFree\n")
    (tmp_path / "CMakeLists.txt").write_text("project(x LANGUAGES CUDA)\n")
    snap = hipify._snapshot(tmp_path, names=True)
    assert sorted(snap) == ["CMakeLists.txt", "a.cu"]
    assert snap["a.cu"].names == {"cudaMalloc": [1]} and snap["CMakeLists.txt"].names == {}
