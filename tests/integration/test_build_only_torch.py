"""The build-only ROCm torch (scripts/install-build-only-torch.sh) and what is built against it.

Real parts: the CPU torch 2.13 wheel in its own venv (.venv-rocm-torch), torch's own hipify of
its CUDA headers, clang-22's AST of the hipified headers, the link stubs made from it, Debian's
ROCm 7.2.4 SDK tree (scripts/install-rocm-sdk.sh), torch's cpp_extension compiling a CUDA-only
extension (tests/fixtures/cuda-ext) through the script's hipcc for gfx942, the real audit and
link check, and the real publish and validate commands refusing the wheel.

What cannot exist here, and so is not tested: loading the wheel (the HIP libraries are stubs and
there is no AMD GPU); a real ROCm torch's libc10_hip/libtorch_hip (the stubs export what the
hipified headers declare, which a real ROCm torch exports too, but that is not checked here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts import links
from rocmbuild.host import toolchain
from tests.conftest import REPO, rocmbuild

SDK_DIR = Path(os.environ.get("ROCMBUILD_ROCM_SDK_DIR")
               or Path.home() / ".cache/rocmbuild/rocm-7.2")
ROOT = SDK_DIR / "usr"
VENV = REPO / ".venv-rocm-torch"
PY = VENV / "bin/python"

pytestmark = pytest.mark.skipif(
    not (ROOT / toolchain.SDK_FACTS).is_file() or shutil.which("clang++-22") is None,
    reason=f"needs the ROCm 7.2 SDK tree at {SDK_DIR} and clang++-22 (scripts/setup.sh)")


def _env(workdir: Path, cache: Path | None = None) -> dict[str, str]:
    return {"ROCM_PATH": str(ROOT), "HIP_PATH": "", "ROCMBUILD_HIP_COMPILER": "",
            "ROCMBUILD_WORKDIR": str(workdir),
            **({"ROCMBUILD_CACHE_DIR": str(cache)} if cache else {})}


def _cli(*args: str, workdir: Path, cache: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    """rocmbuild run by the build-only venv's python (its torch is the host's torch)."""
    return subprocess.run([str(PY), "-m", "rocmbuild", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "COLUMNS": "200", **_env(workdir, cache)})


@pytest.fixture(scope="module")
def torch_dir() -> Path:
    """The build-only torch, made (or found current: the script is idempotent) by the script."""
    res = subprocess.run(["scripts/install-build-only-torch.sh"], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    probe = "import os, torch; print(os.path.dirname(torch.__file__))"
    out = subprocess.run([str(PY), "-c", probe], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def built(torch_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """tests/fixtures/cuda-ext built for gfx942 against it: (wheel, build output, workdir)."""
    work = tmp_path_factory.mktemp("bo-ws")
    res = _cli("--recipes", str(REPO / "tests/fixtures"), "build", "cuda-ext", "--arch", "gfx942",
               workdir=work)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wheels = sorted((work / "wheels").glob("cuda_ext-*.whl"))
    assert len(wheels) == 1
    return wheels[0], res.stdout + res.stderr, work


def test_it_compiles_like_a_rocm_torch(torch_dir: Path, tmp_path: Path) -> None:
    probe = ("import json, torch, torch.utils.cpp_extension as c; print(json.dumps(["
             "torch.version.hip, torch.version.rocm, torch.version.cuda, c.ROCM_HOME, "
             "c.IS_HIP_EXTENSION, torch.cuda.is_available()]))")
    facts = json.loads(subprocess.run([str(PY), "-c", probe], capture_output=True, text=True,
                                      check=True).stdout)
    sdk = json.loads((ROOT / toolchain.SDK_FACTS).read_text())
    assert facts == [sdk["hip_version"], sdk["version"], None, str(VENV / "rocm-home"), True,
                     False]
    marker = json.loads((torch_dir / toolchain.BUILD_ONLY_MARKER).read_text())
    assert marker["sdk"] == str(ROOT) and marker["hipified_headers"] > 100
    # torch's hipify wrote the HIP headers a ROCm torch ships, and the generated config
    for rel in ("ATen/hip/HIPContext.h", "c10/hip/HIPGuard.h", "c10/hip/HIPStream.h",
                "ATen/hip/HIPConfig.h", "c10/hip/impl/hip_cmake_macros.h"):
        assert (torch_dir / "include" / rel).is_file(), rel
    # the stubs export what the headers declare: c10::cuda::device_count() is C10_CUDA_API
    c10 = links.read_symbols(torch_dir / "lib/libc10_hip.so")
    assert "_ZN3c104cuda12device_countEv" in c10.defined
    assert sorted(c10.defined) == marker["stubs"]["libc10_hip.so"]
    hipcc = subprocess.run([str(VENV / "rocm-home/bin/hipcc"), "--version"], capture_output=True,
                           text=True, check=True).stdout
    assert f"HIP version: {sdk['hip_version']}" in hipcc and "clang version 22" in hipcc
    # doctor: a ROCm build, and build-only, said plainly (a warning, not an error)
    doc = _cli("doctor", "--json", workdir=tmp_path)
    torch_check = next(c for c in json.loads(doc.stdout)["checks"] if c["name"] == "torch")
    assert torch_check["status"] == "warn" and "build-only ROCm torch" in torch_check["message"]
    assert torch_check["data"]["torch"]["build_only_sdk"] == str(ROOT)


def test_an_extension_builds_links_and_is_refused_everywhere(built: tuple[Path, str, Path]
                                                             ) -> None:
    wheel, out, work = built
    assert ".buildonly.gfx942" in wheel.name, wheel.name
    assert "device code for gfx942; links: " in out and "all resolve" in out
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(next(zf.read(n) for n in zf.namelist()
                               if n.endswith(".dist-info/rocmbuild.json")))
        so = next(n for n in zf.namelist() if n.endswith(".so"))
        zf.extract(so, work / "so")
    assert prov["torch"]["build_only"] is True
    assert "build-only ROCm torch" in prov["unpublishable"][0]
    needed = links.read_symbols(work / "so" / so).needed
    assert "libc10_hip.so" in needed and "libamdhip64.so.7" in needed
    pub = rocmbuild("publish", str(wheel), "--index", str(work / "index"), env=_env(work))
    assert pub.returncode == 9 and "never published: built against a build-only" in pub.stderr
    assert not (work / "index").exists() or not list((work / "index").rglob("*.whl"))
    val = rocmbuild("validate", str(wheel), env=_env(work))
    assert val.returncode == 8 and "cannot be imported" in val.stderr
    assert "Traceback" not in pub.stderr + val.stderr


def test_the_nightly_refuses_it_too(built: tuple[Path, str, Path], tmp_path: Path) -> None:
    """A nightly cell of the same recipe, run by the build-only venv's rocmbuild: the cell
    validates before it publishes, and validation refuses the wheel (exit 8, the reason says
    why); nothing reaches the index (were it published unvalidated, as a Slurm build step does,
    ``publish.api``'s one check refuses it: the CLI publish above), and the run fails."""
    config = tmp_path / "nightly.toml"
    config.write_text(f"""[[matrix]]
recipes = ["{REPO / 'tests/fixtures/cuda-ext.toml'}"]
archs = ["gfx942"]
[publish]
index = "index"
[reports]
dir = "reports"
""")
    res = _cli("nightly", "--config", str(config), "--json", workdir=built[2])
    assert res.returncode != 0, res.stdout[-2000:] + res.stderr[-2000:]
    (cell,) = json.loads(res.stdout)["cells"]
    assert cell["status"] == "failed" and cell["exit_code"] == 8, cell
    assert "build-only ROCm torch" in cell["reason"] and cell["promoted"] is False, cell
    assert not list(tmp_path.glob("index/**/*.whl"))
    assert "Traceback" not in res.stderr

def test_the_link_check_names_a_symbol_that_resolves_nowhere(torch_dir: Path,
                                                             tmp_path: Path) -> None:
    """A library calling one function the hipified headers declare (it resolves against the
    libc10_hip stub) and one they do not (it resolves nowhere): the check names the second."""
    src = tmp_path / "uses.c"
    src.write_text('void a(void) __asm__("_ZN3c104cuda12device_countEv");\n'
                   'void b(void) __asm__("_ZN3c104cuda20rocmbuild_not_an_apiEv");\n'
                   "void f(void) { a(); b(); }\n")
    so = tmp_path / "libuses.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src), "-Wl,--no-as-needed",
                    f"-L{torch_dir / 'lib'}", "-lc10_hip"], check=True)
    rep = links.check(so, [torch_dir / "lib"], links.interpreter_files(str(PY)))
    assert rep.unresolved == ("_ZN3c104cuda20rocmbuild_not_an_apiEv",)
    assert "libc10_hip.so" in rep.searched and "rocmbuild_not_an_api" in rep.problem()
    # without the search directory the stub itself is missing, and said so
    lost = links.check(so, [], ())
    assert lost.missing_libs == ("libc10_hip.so",) and not lost.ok
