"""The model check and the stack step (``rocmbuild.programs.modelcheck``) on the CPU.

What runs here for real: the decision (``compare.judge``) on real passes of a tiny LLaMA decoder
built with transformers in float32 on the CPU, torch SDPA against eager (the references), the
injected ``last-tile`` fault failing it, the SKIP lines (no GPU here; transformers made
unimportable with ``sys.modules``), the /proc/self/maps reading of the stack step, the report
reader and its Markdown/HTML. What cannot run here: flash-attn (no GPU: transformers refuses
``flash_attention_2`` without CUDA), bitsandbytes' and DeepSpeed's GPU steps; those ran on an
NVIDIA H200 (docs/dev/validate-runs.md). The package imports nothing of rocmbuild (checked as
the kernel gate's is)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.programs import modelcheck
from rocmbuild.programs.modelcheck import check, compare, decoder, harness, stackstep
from rocmbuild.validate import modelrun, report
from rocmbuild.validate.model import ValidateOptions

torch = pytest.importorskip("torch")

PROGRAM = Path(modelcheck.__file__).parent
LAZY_OK = {"torch", "transformers", "flash_attn", "peft", "bitsandbytes", "deepspeed"}


@pytest.mark.parametrize("module", sorted(p.name for p in PROGRAM.glob("*.py")))
def test_program_is_self_contained(module):
    tree = ast.parse((PROGRAM / module).read_text())
    for n in ast.walk(tree):
        names = ([a.name for a in n.names] if isinstance(n, ast.Import) else
                 [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names | LAZY_OK | {"__future__"}, (module, name)
            if n in tree.body:
                assert top in sys.stdlib_module_names | {"__future__"}, (module, name)


def _pass(impl, logits, grads, loss=1.0):
    return decoder.Pass(impl, loss, logits, grads)


def test_judge_passes_within_the_multiple_and_fails_beyond():
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(50, 16, generator=gen)
    g = {"w": torch.randn(8, 8, generator=gen)}
    noise = 1e-3
    sdpa = _pass("sdpa", ref, g)
    eager = _pass("eager", ref + noise * torch.randn(50, 16, generator=gen),
                  {"w": g["w"] + noise * torch.randn(8, 8, generator=gen)})
    good = _pass("test", ref + noise * torch.randn(50, 16, generator=gen),
                 {"w": g["w"] + noise * torch.randn(8, 8, generator=gen)})
    v = compare.judge(good, sdpa, eager, 4.0, 1e-12)
    assert v["passed"] and 0.5 < v["worst"]["ratio"] < 4.0
    bad_logits = ref.clone()
    bad_logits[-5:] += 0.1  # five rows off: 100x the references' spread on those rows
    bad = _pass("test", bad_logits, good.grads)
    v = compare.judge(bad, sdpa, eager, 4.0, 1e-12)
    # the five rows stand out more than the whole tensor: the worst token is the worst quantity
    assert not v["passed"] and v["worst"]["quantity"] == "logits_rows"
    assert v["logits_rows"]["ratio"] > v["logits"]["ratio"] > 4.0
    assert "allowed 4x" in v["reason"]
    nan = _pass("test", ref, {"w": torch.full((8, 8), float("nan"))})
    v = compare.judge(nan, sdpa, eager, 4.0, 1e-12)
    assert not v["passed"] and "NaN/Inf" in v["reason"] and "test" in v["reason"]


def test_last_tile_is_the_partial_tile():
    assert decoder.last_tile(1000) == 960 and decoder.last_tile(77) == 64
    assert decoder.last_tile(128) == 64  # no partial tile: the last whole one


def test_no_transformers_is_one_skip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import raises ImportError
    r = check.model_check(device="cpu", under_test="sdpa", sizes=(decoder.TINY,))
    assert r["status"] == "skipped" and "\n" not in r["reason"]
    assert r["reason"].startswith(modelcheck.NO_TRANSFORMERS)


def test_no_gpu_skips_both(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    monkeypatch.setitem(sys.modules, "transformers", None)  # the GPU is asked for first
    assert stackstep.stack_step()["reason"].startswith("no GPU:")
    r = check.model_check(device="cuda", sizes=(decoder.TINY,))
    assert r["status"] == "skipped" and r["reason"].startswith("no GPU:")


def test_bitsandbytes_without_code_for_this_gpu_is_skipped(tmp_path):
    (tmp_path / "libbitsandbytes_rocm72.so").write_bytes(b"")
    (tmp_path / "libbitsandbytes_cpu.so").write_bytes(b"")
    why = stackstep.bnb_code(tmp_path, "sm_90", False, ())
    assert why == ("bitsandbytes wheel has no code for sm_90 (its libraries: "
                   "libbitsandbytes_cpu.so, libbitsandbytes_rocm72.so)")
    assert stackstep.bnb_code(tmp_path, "gfx942", True, ()) == ""
    assert "archs gfx90a" in stackstep.bnb_code(tmp_path, "gfx942", True, ("gfx90a",))


def test_loaded_libraries_names_a_runtime_loaded_twice():
    maps = "\n".join([
        "7f00-7f01 r-xp 00000000 08:01 1 /opt/rocm-7.2/lib/libamdhip64.so.7",
        "7f02-7f03 r-xp 00000000 08:01 2 /venv/torch/lib/libamdhip64.so.7",
        "7f04-7f05 r-xp 00000000 08:01 3 /venv/torch/lib/librocblas.so.5",
        "7f06-7f07 rw-p 00000000 00:00 0 [heap]",
        "7f08-7f09 r--p 00000000 08:01 4 /usr/lib/locale/C.utf8/LC_CTYPE"])
    _, runtime, problems = stackstep.loaded_libraries(maps)
    assert len(runtime) == 3
    assert problems == ["libamdhip64 is loaded from 2 places: /opt/rocm-7.2/lib/libamdhip64.so.7,"
                        " /venv/torch/lib/libamdhip64.so.7"]


def test_report_reader_keeps_known_keys_and_refuses_junk():
    step = modelrun.read_report({"status": "failed", "multiple": 8, "cases": [
        {"size": "tiny", "status": "failed", "reason": "logits: x", "seq": "77",
         "logits": {"ratio": "inf", "test_sdpa": [1]}, "evil": {"a": 1}}]}, "model")
    case = step.detail["cases"][0]
    assert step.status is Status.FAILED and "evil" not in case
    assert case["logits"]["ratio"] == float("inf") and case["logits"]["test_sdpa"] is None
    assert case["seq"] is None
    with pytest.raises(TypeError):
        modelrun.read_report(["not", "an", "object"], "model")
    with pytest.raises(ValueError):
        modelrun.read_report({"status": "great"}, "stack")


def test_model_step_skips_with_its_reason():
    assert modelrun.model_step(None, [], ValidateOptions(model=False), {}, Path()).reason == (
        "--no-model")
    st = modelrun.model_step(None, [], ValidateOptions(), {}, Path())
    assert st.status is Status.SKIPPED and "no attention wheel" in st.reason
    assert modelrun.stack_step(None, [], ValidateOptions(), {}, Path()).status is Status.SKIPPED


def test_harness_always_writes_json(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    out = tmp_path / "r.json"
    assert harness.main(["model", "--device", "cpu", "--sizes", "tiny", "--under-test", "sdpa",
                         "--json", str(out)]) == 0
    assert json.loads(out.read_text())["status"] == "skipped"


def test_tiny_decoder_on_cpu_references_agree_and_the_fault_fails():
    """Real transformers, float32 on the CPU: SDPA under test against SDPA and eager passes;
    the same with the last partial query tile shifted fails, and the report renders both."""
    pytest.importorskip("transformers")
    kw = dict(device="cpu", under_test="sdpa", sizes=(decoder.TINY,), dtypes=("fp32",))
    good = check.model_check(**kw)
    assert good["status"] == "passed", good.get("failures")
    for c in good["cases"]:
        assert 0 < c["logits"]["sdpa_eager"] < 1e-5  # the references differ, a little
        assert c["worst"]["ratio"] <= modelcheck.MULTIPLE
        assert c["grads"]["params"] == 2 * 9 + 3  # every parameter's gradient compared
    bad = check.model_check(fault="last-tile", **kw)
    assert bad["status"] == "failed" and len(bad["failures"]) == 2
    assert all(c["worst"]["ratio"] > 1000 for c in bad["cases"])
    data = {"model": modelrun.read_report(json.loads(json.dumps(bad)), "model").to_json(),
            "stack": {"status": "skipped", "reason": "not a stack"}}
    md = "\n".join(report.modelreport.markdown(data))
    assert "Model check: **failed**" in md and "tiny GQA S77 fp32 padded seed 0" in md
    page = "".join(report.modelreport.html_parts(data, report._status))
    assert "<h2>Model check:" in page and "Stack step:" in page


def test_a_wheel_that_refuses_a_case_out_loud_skips_it():
    """An attention that raises NotImplementedError (flash-attn's Triton backend for a sliding
    window, patch 0004) is a SKIP with its reason: a loud refusal, not a wrong answer; a check
    in which nothing ran is not a pass."""
    pytest.importorskip("transformers")
    from transformers import AttentionInterface
    def refuses(module, query, key, value, mask, **kw):
        raise NotImplementedError("window_size=(7, 7) is not supported")

    AttentionInterface.register("rocmbuild_refuses", refuses)
    kw = dict(device="cpu", sizes=(decoder.TINY,), dtypes=("fp32",))
    none = check.model_check(under_test="rocmbuild_refuses", **kw)
    assert none["status"] == "failed" and none["reason"] == "no cases ran"
    assert all(c["status"] == "skipped" and "the wheel refuses it: NotImplementedError"
               in c["reason"] for c in none["cases"])
    assert Status.parse(none["cases"][0]["status"]) is Status.SKIPPED
    assert len(none["skipped"]) == 2 and not none["failures"]
