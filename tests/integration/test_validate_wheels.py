"""`rocmbuild validate` on real wheels built here by pip from tiny projects, in a real venv.

One validation run (one venv) covers three wheels: a good one, one whose rocmbuild.json says it was
built for torch 2.5.1+rocm6.2 (this host has torch 2.13.0+cpu: the guard must fail it), and one
whose import fails the way a wrong-ABI extension does. Each ships a real shared library compiled
here with cc. The ROCm torch cannot exist here, so the mismatch is declared in rocmbuild.json.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from rocmbuild.core.run import run

torch = pytest.importorskip("torch")  # the CPU harness needs torch; setup installs it


def _pixels(png: Path) -> list[tuple[int, int, int]]:
    b = Image.open(png).convert("RGB").tobytes()
    return list(zip(b[0::3], b[1::3], b[2::3], strict=True))


HOST_TORCH = {"version": torch.__version__, "hip": torch.version.hip,
              "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI)}
ROCM_TORCH = {"version": "2.5.1+rocm6.2", "hip": "6.2.41133", "cxx11_abi": False}


def _add_to_wheel(whl: Path, name: str, data: bytes) -> None:
    """Add ``<dist-info>/name`` to a wheel and list it in RECORD."""
    with zipfile.ZipFile(whl) as z:
        items = {i: z.read(i) for i in z.namelist()}
    di = next(n.split("/")[0] for n in items if n.split("/")[0].endswith(".dist-info"))
    items[f"{di}/{name}"] = data
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    items[f"{di}/RECORD"] = (items[f"{di}/RECORD"].decode()
                             + f"{di}/{name},sha256={digest},{len(data)}\n").encode()
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in items.items():
            z.writestr(k, v)


def _build(root: Path, out: Path, pkg: str, init: str, requires: list[str],
           torch_meta: dict | None, native: bool = True) -> Path:
    src = root / pkg
    (src / pkg).mkdir(parents=True)
    (src / pkg / "__init__.py").write_text(init)
    if native:
        (src / "native.c").write_text("int rb_answer(void) { return 42; }\n")
        run(["cc", "-shared", "-fPIC", "-o", src / pkg / "_native.so", src / "native.c"])
    (src / "setup.py").write_text(textwrap.dedent(f"""
        from setuptools import setup
        setup(name={pkg!r}, version="1.0", packages=[{pkg!r}],
              package_data={{{pkg!r}: ["_native.so"]}}, install_requires={requires!r})
    """))
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
         "-w", out, src])
    whl = next(out.glob(f"{pkg}-1.0-*.whl"))
    if torch_meta is not None:
        meta = {"rocmbuild_version": "0.1.0", "recipe": pkg, "variant": "default", "archs": [],
                "rocm_version": "6.2" if torch_meta.get("hip") else None, "torch": torch_meta}
        _add_to_wheel(whl, "rocmbuild.json", json.dumps(meta).encode())
    return whl


@pytest.fixture(scope="session")
def validated(tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    wheels = root / "wheels"
    wheels.mkdir()
    good = _build(root, wheels, "rbgood", "import os\nANSWER = 42\n", ["torch>=1.0", "packaging"],
                  HOST_TORCH)
    rocm = _build(root, wheels, "rbrocm", "", ["torch==2.5.1"], ROCM_TORCH)
    undefined = "rbbroken/_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    broken = _build(root, wheels, "rbbroken", f"raise ImportError({undefined!r})\n", ["torch"],
                    HOST_TORCH)
    work = root / "work"
    before = {w: (w.stat().st_mtime_ns, hashlib.sha256(w.read_bytes()).hexdigest())
              for w in (good, rocm, broken)}
    r = run([sys.executable, "-m", "rocmbuild", "--workdir", work, "validate", good, rocm, broken,
             "--kernel", "sdpa", "--json-file", root / "r.json", "--md", root / "r.md",
             "--html", root / "r.html"], check=False, capture=True, timeout=600)
    report = json.loads((root / "r.json").read_text())
    by_name = {w["name"]: w for w in report["wheels"]}
    return {"root": root, "run": r, "report": report, "wheels": by_name, "work": work,
            "paths": {"good": good, "rocm": rocm, "broken": broken}, "before": before}


def test_exit_code_and_one_line_error(validated):
    r = validated["run"]
    assert r.returncode == 8
    err = [ln for ln in r.output.splitlines() if ln.startswith("validation error:")]
    assert len(err) == 1 and "(+" in err[0]  # first failure, and how many more


def test_good_wheel_passes_and_stays(validated):
    w = validated["wheels"]["rbgood"]
    st = {k: v["status"] for k, v in w["steps"].items()}
    assert st == {"install": "success", "guard": "success", "import": "success",
                  "audit": "skipped", "upstream": "skipped"}
    assert w["broken_copy"] is None and validated["paths"]["good"].exists()


def test_torch_never_reinstalled(validated):
    env = validated["report"]["environment"]
    assert env["torch"]["version"] == torch.__version__  # rbrocm asked for torch==2.5.1
    assert Path(env["torch"]["path"]).resolve() == Path(torch.__file__).resolve()


def test_given_files_are_never_moved_or_changed(validated):
    """validate leaves every wheel it is given where it is, same bytes and same mtime, failing
    ones included; a failing one is copied to broken/ (where publish looks)."""
    for path, (mtime, sha) in validated["before"].items():
        assert path.is_file(), path
        assert (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()) == (
            mtime, sha), path
    copy = validated["work"] / "broken" / validated["paths"]["rocm"].name
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == validated["before"][
        validated["paths"]["rocm"]][1]
    assert "a copy is in " in validated["run"].output


def test_guard_names_the_mismatch_and_copies_the_wheel(validated):
    w = validated["wheels"]["rbrocm"]
    g = w["steps"]["guard"]
    assert g["status"] == "failed"
    assert f"wheel built against 2.5.1+rocm6.2, environment has {torch.__version__}" in g["reason"]
    assert "not a ROCm build" in g["reason"]
    assert "rebuild the wheel against this torch" in g["reason"]
    copy = Path(w["broken_copy"])
    assert copy == validated["work"] / "broken" / validated["paths"]["rocm"].name
    assert copy.is_file() and validated["paths"]["rocm"].is_file()


def test_import_error_text_is_reported(validated):
    w = validated["wheels"]["rbbroken"]
    assert w["steps"]["import"]["status"] == "failed"
    assert "undefined symbol: _ZN3c104cuda9SetDeviceEi" in w["steps"]["import"]["reason"]
    assert Path(w["broken_copy"]).is_file()


def test_kernels_skipped_without_gpu_never_passed(validated):
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    k = validated["report"]["kernels"]
    assert k["status"] == "skipped" and "no GPU" in k["reason"]
    assert "| rbgood-1.0-py3-none-any.whl | success | success | success | skipped |" in (
        validated["root"] / "r.md").read_text()


def test_html_report_renders(validated, tmp_path, chromium):
    png = tmp_path / "r.png"
    dom = chromium(validated["root"] / "r.html", png, "1200,900")
    assert "rocmbuild validate" in dom and "not a ROCm build" in dom
    # no attention wheel: the model check says why it did not run; the stack step is not asked
    assert "Model check:" in dom and "no attention wheel (flash_attn)" in dom
    assert png.stat().st_size > 0
    px = _pixels(png)
    assert len(set(px)) > 10  # not blank
    red = sum(1 for p in px if p[0] > 180 and p[1] < 40 and p[2] < 40)
    assert red > 50  # the FAILED status is drawn in red


def test_bad_wheel_path_is_a_usage_error(tmp_path):
    r = run([sys.executable, "-m", "rocmbuild", "--workdir", tmp_path, "validate",
             tmp_path / "nope.whl"], check=False, capture=True)
    assert r.returncode == 2 and "nope.whl: no such wheel file" in r.output


def test_no_wheels_needs_a_kernel(tmp_path):
    r = run([sys.executable, "-m", "rocmbuild", "validate"], check=False, capture=True)
    assert r.returncode == 2 and "no wheels given" in r.output


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_h200_report_chart_renders(tmp_path, chromium):
    """The chart page built from the real H200 flash-attn run recorded in docs/."""
    from rocmbuild.core.config import REPO_ROOT
    from rocmbuild.validate import report

    raw = json.loads((REPO_ROOT / "docs/dev/validate-h200/flash-attn-full.json").read_text())
    page = tmp_path / "h200.html"
    page.write_text(report.to_html(raw))
    png = tmp_path / "h200.png"
    dom = chromium(page, png, "1200,1400")
    assert "<svg" in dom and "TFLOP/s" in dom and "torch SDPA" in dom
    assert "B4 S4096 H32 D128 full fp16 fwd" in dom and "baseline" in dom
    px = _pixels(png)
    blue = sum(1 for p in px if abs(p[0] - 0x1F) < 10 and abs(p[1] - 0x77) < 10
               and abs(p[2] - 0xB4) < 10)
    orange = sum(1 for p in px if abs(p[0] - 0xFF) < 10 and abs(p[1] - 0x7F) < 10
                 and abs(p[2] - 0x0E) < 10)
    assert blue > 2000 and orange > 2000  # this-run and SDPA bars are drawn


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_h200_failed_report_shows_fix_gridlines_and_unwrapped_numbers(tmp_path, chromium):
    """The zero-row fault run recorded on the H200 (docs/dev/validate-h200/issue14): the failed
    step's fix is on the page, the chart has labelled gridlines, numbers sit in no-wrap cells."""
    from rocmbuild.core.config import REPO_ROOT
    from rocmbuild.validate import report

    raw = json.loads((REPO_ROOT / "docs/dev/validate-h200/issue14/zero-row.json").read_text())
    page = tmp_path / "fault.html"
    page.write_text(report.to_html(raw))
    png = tmp_path / "fault.png"
    dom = chromium(page, png, "1000,2200")
    assert "<th>fix</th>" in dom and "class=\"fix\"" in dom
    assert "wrong results: see the correctness table" in dom and "What to do" in dom
    assert "the worst row" in dom and "out [1, 63, 2]" in dom  # the zeroed row, found
    # gridlines at 0, 100, 200, 300 TFLOP/s, each labelled under the axis
    labels = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', dom)
    assert labels == ["0", "100", "200", "300"] and dom.count('class="grid"') == 4
    # every number of the tables sits in a no-wrap cell ("3.9e-/03" cannot happen)
    assert "td.num{white-space:nowrap" in dom.replace(" ", "")
    assert "<td class=\"num\">out 3.6e-02<br>" in dom
    # and on the picture: a 1000 px window still draws light-grey gridlines across the chart
    px = _pixels(png)
    grid = sum(1 for p in px if p == (0xDD, 0xDD, 0xDD))
    assert grid > 200


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_h100_model_check_report_renders(tmp_path, chromium):
    """The model check of the flash-attn Triton wheel recorded on an H100
    (docs/dev/validate-h200/issue35): every case in its table, the failing sliding-window cases in
    red with the fix, and the stack step's parts of the stack run."""
    from rocmbuild.core.config import REPO_ROOT
    from rocmbuild.validate import report

    here = REPO_ROOT / "docs/dev/validate-h200/issue35"
    good = json.loads((here / "h100-validate-good.json").read_text())
    stack = json.loads((here / "h100-validate-stack.json").read_text())
    page = tmp_path / "model.html"
    page.write_text(report.to_html(good) + report.to_html(stack))
    png = tmp_path / "model.png"
    dom = chromium(page, png, "1400,2400")
    assert dom.count("seed 0</td>") == 16 and "gqa-1024-d128 GQA S777 fp16 padded" in dom
    assert "swa-512 GQA S1000 bf16 full seed 0" in dom and "allowed 8x" in dom
    assert "read the failing cases" in dom  # the model step's fix
    for part in ("flash-attn", "peft", "bitsandbytes", "deepspeed"):
        assert f"<td>{part}</td>" in dom
    assert "libbitsandbytes_cuda130.so" in dom
    red = sum(1 for p in _pixels(png) if p[0] > 180 and p[1] < 40 and p[2] < 40)
    assert red > 50  # the failed cases are drawn in red


# ----------------------------------------------------------------------------- the pipeline stage


def _stage_ctx(tmp_path: Path, wheel: Path):
    from rocmbuild.artifacts.results import Artifacts
    from rocmbuild.core import config
    from rocmbuild.host import detect as host
    from rocmbuild.plan import render
    from rocmbuild.recipe import load, search
    from rocmbuild.stages.context import Context

    here = host.detect(want_compiler=False)
    plan = render.render(load.load(search.find_recipe("flash-attn")),
                         render.Target(arch="gfx942", variant="triton", source="pypi",
                                       release="2.8-fork"), here)
    ws = config.workspace(str(tmp_path / "work"), str(tmp_path / "cache"))
    ctx = Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key, wheel_dir=ws.wheels,
                  host=here, artifacts=Artifacts(wheel=wheel))
    return plan, ctx


def test_stage_passes_a_good_wheel_and_writes_reports(tmp_path):
    from rocmbuild.artifacts.results import Status
    from rocmbuild.stages import validate as stage

    out = tmp_path / "wheels"
    out.mkdir()
    whl = _build(tmp_path, out, "rbpure", "ANSWER = 42\n", ["torch>=1.0"], HOST_TORCH,
                 native=False)
    plan, ctx = _stage_ctx(tmp_path, whl)
    res = stage.run(plan, ctx)
    assert res.status is Status.SUCCESS, res.reason
    assert "1 wheel(s) passed" in res.reason and "kernel gate skipped" in res.reason
    # the flash-attn plan has a kernel to check and this host no GPU: the stage says why, and
    # the pipeline records it in the cache entry (``Validation.needs_gpu``)
    assert (res.artifacts.gate_needs_gpu or "").startswith("no GPU:"), res.artifacts
    assert res.log_path is not None and res.log_path.is_file()
    stem = ctx.ws.reports / f"{plan.recipe}-{plan.short_key}"
    data = json.loads(stem.with_suffix(".json").read_text())
    assert data["status"] == "success" and data["archs"] == ["gfx942"]  # the plan's archs
    steps = {k: Status(s["status"]) for k, s in data["wheels"][0]["steps"].items()}
    assert steps == {"install": Status.SUCCESS, "guard": Status.SUCCESS,
                     "import": Status.SUCCESS, "audit": Status.SUCCESS,
                     "upstream": Status.SKIPPED}
    assert "| rbpure-1.0-py3-none-any.whl | success | success | success | success |" in (
        stem.with_suffix(".md").read_text())
    assert stem.with_suffix(".html").is_file()
    assert whl.exists()


def test_stage_failure_raises_after_writing_reports(tmp_path):
    from rocmbuild.core.errors import ValidationError
    from rocmbuild.stages import validate as stage

    out = tmp_path / "wheels"
    out.mkdir()
    whl = _build(tmp_path, out, "rbrocm2", "", ["torch==2.5.1"], ROCM_TORCH)
    plan, ctx = _stage_ctx(tmp_path, whl)
    with pytest.raises(ValidationError) as err:
        stage.run(plan, ctx)
    assert err.value.exit_code == 8
    assert "rbrocm2-1.0-py3-none-any.whl: guard: torch version" in str(err.value)
    stem = ctx.ws.reports / f"{plan.recipe}-{plan.short_key}"
    assert str(stem.with_suffix(".md")) in (err.value.hint or "")
    data = json.loads(stem.with_suffix(".json").read_text())
    assert data["status"] == "failed"
    steps = data["wheels"][0]["steps"]
    assert steps["guard"]["status"] == "failed"
    assert steps["audit"]["detail"]["requested_archs"] == ["gfx942"]  # the plan's archs
    assert (ctx.ws.broken / whl.name).is_file() and whl.is_file()  # a copy; the wheel stays
