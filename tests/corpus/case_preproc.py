"""hipify ``strict`` and the preprocessor, and delivery (issue 24, classes 7 and 8).

preproc: bad ``[hipify] defines`` / ``include_dirs`` (one line naming the recipe file and the
key); and ``strict`` refusing a CUDA name hipify cannot translate in code the build compiles,
as the HIP compiler's preprocessor finds it: a plain use, the ``#else`` the build takes, a block
a recipe define or a define's value turns on, device-only code, code for the target arch, a
header a unit includes, a header no unit includes (not judged: it counts), and a unit the
preprocessor cannot read (nothing judged: every use counts, but an ``#if`` condition never).
Each tree has exactly one such use, next to uses in blocks that are off (warnings), so the one
error line names its file:line and name. These run torch.utils.hipify for real (the CPU torch
of the venv), then stop.

delivery: ``validate --json-file`` runs that stop early (a bad flag, no wheels, a missing
baseline, an unreadable wheel, a report path under a file): each is one clean error (the
report file itself, with the error in it, is tested in
tests/integration/test_validate_host_deps.py)."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"
L2 = "cudaCtxResetPersistingL2Cache"  # no HIP has it: hipify leaves it
CLUSTERS = "cudaOccupancyMaxActiveClusters"


def _recipe(hipify: str) -> str:
    return f"""schema_version = 1
[package]
name = "pp"
version = "1.0"
[source]
path = "tree"
[build]
backend = "cmake"
python_requires = ["cmake", "ninja"]
[hipify]
tool = "torch"
strict = true
{hipify}"""


_CMAKE = "cmake_minimum_required(VERSION 3.24)\nproject(pp LANGUAGES CXX CUDA)\n" \
         "add_library(pp SHARED k.cu)\n"


def _key(cid: str, needle: str, hipify: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"],
                f"r.toml: {needle}", "preproc",
                files={R: _recipe(hipify), "recipes/tree/k.cu": "__global__ void k() {}\n",
                       "recipes/tree/CMakeLists.txt": _CMAKE}, writes_nothing=True)


def _strict(cid: str, at: str, name: str, files: dict[str, str], hipify: str = "",
            arch: str = "gfx90a,gfx942") -> Case:
    tree = {f"recipes/tree/{k}": v for k, v in files.items()}
    return Case(cid, ("build", f"{{dir}}/{R}", "--arch", arch), EXIT["build"],
                f"hipify: {at}: {name}: CUDA API with no HIP mapping", "preproc",
                files={R: _recipe(hipify), "recipes/tree/CMakeLists.txt": _CMAKE, **tree},
                timeout=240)


def _unit(body: str) -> dict[str, str]:
    return {"k.cu": "#include <cuda_runtime.h>\n" + body}


_OFF = f"#ifdef CUSOLVER_COMMON_H_\nint off() {{ return (int){CLUSTERS}(0, 0, 0); }}\n#endif\n"

_WHEEL_OK = ("--json-file", "{dir}/out/report.json", "{wheel}")

CASES: list[Case] = [
    _key("preproc-defines-not-list", "hipify.defines: expected a list, got str",
         'defines = "USE_X"'),
    _key("preproc-define-is-a-flag", "hipify.defines[0]: must be a macro the build defines",
         'defines = ["-DUSE_X"]'),
    _key("preproc-define-space-in-name", "hipify.defines[1]: must be a macro",
         'defines = ["OK", "USE X"]'),
    _key("preproc-define-starts-with-digit", "hipify.defines[0]: must be a macro",
         'defines = ["1X=2"]'),
    _key("preproc-define-newline", "hipify.defines[0]: control character U+000A",
         'defines = ["X=1\\n"]'),
    _key("preproc-define-control-char", "hipify.defines[0]: control character U+0007",
         'defines = ["X=\\u0007"]'),
    _key("preproc-define-key-typo", "hipify.define: unknown key (did you mean defines?)",
         'define = ["USE_X"]'),
    _key("preproc-include-dirs-absolute", "hipify.include_dirs[0]: must be a relative path",
         'include_dirs = ["/usr/include"]'),
    _key("preproc-include-dirs-dotdot", "hipify.include_dirs[0]: must be a relative path",
         'include_dirs = ["common/../../etc"]'),
    _key("preproc-include-dirs-not-list", "hipify.include_dirs: expected a list, got str",
         'include_dirs = "common"'),
    _key("preproc-include-dir-key-typo",
         "hipify.include_dir: unknown key (did you mean include_dirs?)",
         'include_dir = ["common"]'),
    _strict("preproc-strict-live-use", "k.cu:5", L2,
            _unit(f"{_OFF}int live() {{ return (int){L2}(); }}\n")),
    _strict("preproc-strict-else-taken", "k.cu:5", L2, _unit(
        f"#ifdef CUDA_DRIVER_API\nint a() {{ return (int){CLUSTERS}(0, 0, 0); }}\n#else\n"
        f"int b() {{ return (int){L2}(); }}\n#endif\n")),
    _strict("preproc-strict-recipe-define", "k.cu:3", L2, _unit(
        f"#ifdef USE_L2\nint a() {{ return (int){L2}(); }}\n#endif\n{_OFF}"),
        hipify='defines = ["USE_L2"]'),
    _strict("preproc-strict-define-value", "k.cu:3", L2, _unit(
        f"#if LEVEL > 1\nint a() {{ return (int){L2}(); }}\n#endif\n{_OFF}"),
        hipify='defines = ["LEVEL=2"]'),
    _strict("preproc-strict-device-only", "k.cu:3", L2, _unit(
        f"#ifdef __HIP_DEVICE_COMPILE__\n__device__ int a() {{ return (int){L2}(); }}\n"
        f"#endif\n{_OFF}")),
    _strict("preproc-strict-target-arch", "k.cu:3", L2, _unit(
        f"#if defined(__gfx942__)\n__device__ int a() {{ return (int){L2}(); }}\n#endif\n"
        f"#if defined(__gfx1100__)\nint b() {{ return (int){CLUSTERS}(0, 0, 0); }}\n#endif\n"),
        arch="gfx942"),
    _strict("preproc-strict-included-header", "h.cuh:6", L2, {
        "k.cu": '#include "h.cuh"\nint k() { return h(); }\n',
        "h.cuh": f"#pragma once\n#include <cuda_runtime.h>\n{_OFF}"
                 f"inline int h() {{ return (int){L2}(); }}\n"}),
    _strict("preproc-strict-header-of-no-unit", "lone.cuh:3", L2, {
        "k.cu": f"#include <cuda_runtime.h>\n{_OFF}",
        "lone.cuh": "#pragma once\n#include <cuda_runtime.h>\n"
                    f"int h() {{ return (int){L2}(); }}\n"}),
    _strict("preproc-strict-not-preprocessable", "k.cu:4", CLUSTERS, _unit(
        '#include "generated_by_the_build.h"\n'  # absent here: no block can be judged
        f"#ifdef CUDA_DRIVER_API\nint f() {{ return (int){CLUSTERS}(0, 0, 0); }}\n#endif\n")),
    Case("delivery-validate-json-file-bad-time", ("validate", "--upstream-time", "0",
                                                  *_WHEEL_OK),
         EXIT["usage"], "--upstream-time: must be a number of seconds > 0", "delivery",
         writes_nothing=True),
    Case("delivery-validate-json-file-nan-time", ("validate", "--upstream-time", "nan",
                                                  *_WHEEL_OK),
         EXIT["usage"], "--upstream-time: must be a number of seconds > 0", "delivery",
         writes_nothing=True),
    Case("delivery-validate-json-file-bad-with", ("validate", "--with", "x==", *_WHEEL_OK),
         EXIT["usage"], "--with: 'x==' is not a requirement", "delivery", writes_nothing=True),
    Case("delivery-validate-json-file-no-wheels",
         ("validate", "--json-file", "{dir}/out/report.json"), EXIT["usage"],
         "validate: no wheels given", "delivery", writes_nothing=True),
    Case("delivery-validate-json-file-no-baseline",
         ("validate", "--baseline", "{dir}/none.json", *_WHEEL_OK), EXIT["usage"],
         "--baseline", "delivery", writes_nothing=True),
    Case("delivery-validate-json-file-missing-wheel",
         ("validate", "--json-file", "{dir}/out/report.json", "{dir}/gone-1.0-py3-none-any.whl"),
         EXIT["usage"], "gone-1.0-py3-none-any.whl: no such wheel file", "delivery",
         writes_nothing=True),
    Case("delivery-validate-json-file-not-a-wheel",
         ("validate", "--json-file", "{dir}/out/report.json", "{dir}/bad-1.0-py3-none-any.whl"),
         EXIT["validation"], "bad-1.0-py3-none-any.whl: not a zip file", "delivery",
         files={"bad-1.0-py3-none-any.whl": b"PK\x03\x04 not a zip"}, writes_nothing=True),
    Case("delivery-validate-json-file-under-a-file",
         ("validate", "--json-file", "{dir}/afile/report.json", "{wheel}"), EXIT["validation"],
         "afile: is a file, not a directory", "delivery", files={"afile": "x\n"},
         writes_nothing=True),
]
