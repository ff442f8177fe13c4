"""The attention kernel gate's pure parts on the CPU: FLOP counting, error metric, tolerances,
timing statistics, peak table, the test matrix, and the correctness check itself run on CPU
tensors with a reference-math kernel (the real harness code, only the device is 'cpu'). Also: the
package is self-contained (stdlib and, inside functions, torch; never rocmbuild)."""

from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path

import pytest

from rocmbuild.programs import kernelgate
from rocmbuild.programs.kernelgate import adapters, harness, matrix, reference, timing

torch = pytest.importorskip("torch")  # the CPU harness needs torch; setup installs it

GATE_DIR = Path(kernelgate.__file__).parent
# What the gate may import inside functions: torch and the kernels under test.
LAZY_OK = {"torch", "triton", "flash_attn", "hipattn"}


def _imports(node: ast.AST) -> list[tuple[str, int]]:
    """(top-level module name, relative level) of each import under ``node``."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            out += [(a.name.split(".")[0], 0) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            out.append(((n.module or "").split(".")[0], n.level))
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in GATE_DIR.glob("*.py")))
def test_gate_is_self_contained(module):
    """Module level: the standard library and the gate's own modules only, so importing it
    does not import torch; inside functions also torch and the kernels; never rocmbuild."""
    tree = ast.parse((GATE_DIR / module).read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.If))]
    for name, level in _imports(ast.Module(body=top, type_ignores=[])):
        assert level > 0 or name in sys.stdlib_module_names or name == "__future__", (
            f"{module} imports {name} at module level")
    for name, level in _imports(tree):
        assert level > 0 or name in sys.stdlib_module_names | LAZY_OK | {"__future__"}, (
            f"{module} imports {name}")


def test_adapter_names_match_the_adapters():
    assert kernelgate.ADAPTER_NAMES == tuple(adapters.ADAPTERS)
    assert {adapters.make_adapter(n).name for n in kernelgate.ADAPTER_NAMES} == set(
        kernelgate.ADAPTER_NAMES)
    with pytest.raises(ValueError, match="unknown kernel"):
        adapters.make_adapter("xformers")
    with pytest.raises(ValueError, match="unknown fault"):
        adapters.make_adapter("sdpa", "sluggish")


def test_flops_non_causal_and_causal():
    assert timing.attention_flops(2, 3, 5, 7, 11, False) == 4 * 2 * 3 * 5 * 7 * 11
    assert timing.attention_flops(2, 3, 64, 64, 8, True) == 4 * 2 * 3 * 64 * 64 * 8 / 2
    # causal with Sq != Sk is not halved (the mask is not a triangle)
    assert timing.attention_flops(1, 1, 1, 1000, 64, True) == 4 * 1000 * 64
    assert timing.attention_flops(4, 32, 4096, 4096, 128, False, "bwd") == pytest.approx(
        2.5 * 4 * 4 * 32 * 4096 * 4096 * 128)
    with pytest.raises(ValueError):
        timing.attention_flops(1, 1, 1, 1, 1, False, "sideways")


def test_rel_error_metric():
    ref = torch.tensor([3.0, 4.0])
    assert reference.rel_error(ref, ref) == 0.0
    assert reference.rel_error(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.5 / 5.0)
    assert reference.rel_error(ref * 1.05, ref) == pytest.approx(0.05)
    assert math.isnan(reference.rel_error(torch.tensor([float("nan"), 4.0]), ref))
    assert reference.rel_error(torch.ones(2), torch.zeros(2)) == math.inf


def test_tolerances_and_judge():
    assert reference.tolerance("fp16", "fwd") < reference.tolerance("bf16", "fwd")
    assert reference.tolerance("fp16", "fwd") < reference.tolerance("fp16", "bwd")
    assert reference.tolerance("bf16", "fwd") == pytest.approx(2 * 2**-7)
    with pytest.raises(ValueError):
        reference.tolerance("fp8", "fwd")
    tol = reference.tolerance("bf16", "fwd")
    assert reference.judge(tol * 0.5, tol, True)
    assert not reference.judge(tol * 1.01, tol, True)
    assert not reference.judge(0.0, tol, False)  # a NaN/Inf element fails whatever the norm says
    assert not reference.judge(float("nan"), tol, True)


def test_median_and_spread():
    med, spread = timing.median_and_spread([[1.0, 1.0, 1.0], [1.1, 1.1, 1.1]])
    assert med == pytest.approx(1.05)
    assert spread == pytest.approx(0.1 / 1.05)
    assert timing.median_and_spread([[2.0, 4.0]]) == (3.0, 0.0)


DEVICE_FIXTURES = json.loads((Path(__file__).parents[2] / "fixtures" / "devices"
                              / "torch_device_properties.json").read_text())["devices"]


@pytest.mark.parametrize("props", DEVICE_FIXTURES,
                         ids=lambda p: f"{p['name'] or '(no name)'}-{p['multi_processor_count']}")
def test_device_table_identifies_recorded_devices(props):
    """Each device by name and CU count from torch's device properties; a device the table does
    not know (or only guesses at) gets no peak and says so."""
    gcn = props["gcnArchName"]
    arch = gcn.split(":")[0] if gcn else f"sm_{props['major']}{props['minor']}"
    facts = timing.device_facts(props["name"], arch, props["multi_processor_count"],
                                props["total_memory"], props["L2_cache_size"], "2.x",
                                "6.4" if gcn else None, None if gcn else "12.8")
    assert facts["model"] == props["expect"]["model"]
    assert facts["peak_tflops"] == props["expect"]["peak_tflops"]
    if facts["peak_tflops"] is None:
        assert facts["peak_source"] == "unknown device: % of peak not shown"
    else:
        assert facts["peak_source"]
    if arch in ("gfx942", "gfx950"):  # the input rotation must outgrow the Infinity Cache
        assert facts["llc_bytes"] == 256 << 20


def test_every_table_row_has_a_source_and_its_arithmetic():
    """peak = CUs x dense fp16 FLOP per clock per CU x peak clock, as the data sheets state it,
    within 0.1 %; every AMD model the issue names has a row."""
    models = {d.model for d in timing.DEVICES}
    assert {"MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI308X", "MI325X", "MI350X",
            "MI355X"} <= models
    for d in timing.DEVICES:
        assert d.source and (d.source.startswith(("AMD", "NVIDIA")) or d.estimated), d
        if d.check:
            cus, per_clk, mhz = d.check
            assert cus == d.cus
            assert cus * per_clk * mhz * 1e6 / 1e12 == pytest.approx(d.peak_tflops, rel=1e-3)


def test_rotation_outgrows_l2_and_infinity_cache():
    mib = 1 << 20
    # B2 S1024 H16 D64 fp16: q, k, v, dout = 16 MiB a set; MI300X: 4 MiB L2 + 256 MiB IC
    assert timing.rotation_sets(16 * mib, 260 * mib) == 33
    assert timing.rotation_sets(16 * mib, 60 * mib) == 8  # H200: 60 MiB L2
    assert timing.rotation_sets(512 * mib, 260 * mib) == 2  # at least two sets
    assert timing.rotation_sets(1 * mib, 260 * mib) == timing.MAX_INPUT_SETS


def test_matrix_covers_the_required_space():
    cases = matrix.correctness_matrix()
    assert {c.dtype for c in cases} == {"fp16", "bf16"}
    assert {c.head_dim for c in cases} == {64, 128, 256}
    assert {c.causal for c in cases} == {True, False}
    seqlens = {c.seqlen_q for c in cases} | {n for c in cases for n in c.varlen}
    assert {1, 127, 1000, 4096} <= seqlens
    assert any(c.heads_kv == 1 for c in cases) and any(1 < c.heads_kv < c.heads for c in cases)
    assert any(c.batch > 1 and not c.varlen for c in cases)
    assert any(c.varlen for c in cases)
    quick = matrix.correctness_matrix(quick=True)
    assert len(quick) < len(cases) and {c.causal for c in quick} == {True, False}
    assert len({c.name for c in cases}) == len(cases)


def test_no_gpu_is_skipped_never_passed():
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    res = harness.gate("sdpa", quick=True)
    assert res["status"] == "skipped"
    assert "no GPU" in res["reason"]


def test_hipattn_adapter_is_amd_only():
    if torch.version.hip:
        pytest.skip("AMD host")
    assert "AMD hosts only" in adapters.HipAttnAdapter().available()


class _MathKernel(adapters.Adapter):
    """A correct kernel on the CPU: fp32 math attention, rounded to the input dtype."""

    name = "cpu-math"
    has_varlen = True

    def forward(self, q, k, v, causal):
        return reference.reference(q.float(), k.float(), v.float(), causal).to(q.dtype)

    def forward_varlen(self, q, k, v, cu_q, cu_k, max_q, max_k, causal):
        parts = [self.forward(q[None, a:b], k[None, a:b], v[None, a:b], causal)[0]
                 for a, b in zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), strict=True)]
        return torch.cat(parts, 0)


@pytest.fixture()
def on_cpu(monkeypatch):
    monkeypatch.setattr(reference, "DEVICE", "cpu")
    return torch.Generator().manual_seed(1234)


CASES = [
    matrix.Case("bf16", 64, True, 2, 67, 67, 4, 2),
    matrix.Case("fp16", 32, False, 1, 1, 50, 2, 1),
    matrix.Case("bf16", 32, True, 3, 40, 40, 2, 2, (1, 17, 22)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_correct_kernel_passes(on_cpu, case):
    r = reference.run_case(_MathKernel(), case, on_cpu)
    assert r.status == "passed", r.reason
    assert set(r.errors) == {"out", "dq", "dk", "dv"}
    assert all(0 < e < r.tolerance[n] for n, e in r.errors.items())


@pytest.mark.parametrize("fault", ["scale", "nan"])
def test_faulty_kernel_fails(on_cpu, fault):
    r = reference.run_case(adapters.FaultAdapter(_MathKernel(), fault), CASES[0], on_cpu)
    assert r.status == "failed"
    if fault == "nan":
        assert not r.finite and "NaN" in r.reason


def test_dropped_causal_mask_fails(on_cpu):
    r = reference.run_case(adapters.FaultAdapter(_MathKernel(), "no-causal"), CASES[2], on_cpu)
    assert r.status == "failed" and r.errors["out"] > 0.1


def test_row_error_finds_the_worst_row():
    ref = torch.ones(2, 5, 3, 4)
    out = ref.clone()
    assert reference.row_error(out, ref) == (0.0, [0, 0, 0])
    out[1, 3, 2] = 0.0
    err, idx = reference.row_error(out, ref)
    assert err == pytest.approx(1.0) and idx == [1, 3, 2]
    # the global metric dilutes the same row by sqrt(rows): 1/sqrt(30)
    assert reference.rel_error(out, ref) == pytest.approx(30**-0.5)
    # a row whose reference is ~0 is judged on the tensor's RMS row norm, not its own
    ref2 = ref.clone()
    ref2[0, 0, 0] = 0.0
    out2 = ref2.clone()
    out2[0, 0, 0] = 1e-3
    err2, idx2 = reference.row_error(out2, ref2)
    assert idx2 == [0, 0, 0] and err2 < 2e-3  # 2e-3 / ~2, not 2e-3 / 0
    nan = ref.clone()
    nan[0, 1, 1, 2] = float("nan")
    assert reference.row_error(nan, ref) == (math.inf, [0, 1, 1])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_correct_kernel_passes_per_row(on_cpu, case):
    r = reference.run_case(_MathKernel(), case, on_cpu)
    assert set(r.row_errors) == {"out", "dq", "dk", "dv"}
    assert all(0 < e < r.row_tolerance[n] for n, e in r.row_errors.items()), r.row_errors
    assert r.row_tolerance["out"] == reference.ROW_TOL_FACTOR * r.tolerance["out"]


class _MathForward(_MathKernel):
    """The same kernel, forward only (the long cases: the fp64 backward is slow on 2 cores)."""

    has_backward = False


ROW_FAULTS = ["zero-row", "softmax-shift", "head-swap"]
# The harness's own cases (forward and backward) plus longer ones, forward only, where one row is
# diluted most: many rows, batch > 1, MQA, causal, varlen.
ROW_CASES = [(c, _MathKernel) for c in CASES] + [
    (matrix.Case("bf16", 64, False, 2, 512, 512, 8, 1), _MathForward),
    (matrix.Case("bf16", 64, True, 1, 1024, 1024, 4, 2), _MathForward),
    (matrix.Case("fp16", 64, True, 4, 300, 300, 4, 4, (1, 127, 600, 300)), _MathForward)]


@pytest.mark.parametrize("fault", ROW_FAULTS)
@pytest.mark.parametrize("case,kernel", ROW_CASES, ids=lambda c: getattr(c, "name", ""))
def test_one_bad_row_fails(on_cpu, case, kernel, fault):
    """One corrupted row (of thousands) fails the case whenever it changes the output, though
    the global norm alone would pass it; the worst row's index points at the row hit."""
    r = reference.run_case(adapters.FaultAdapter(kernel(), fault), case, on_cpu)
    assert r.fault_changed is not None
    if not r.fault_changed:
        pytest.skip(f"{fault} does not change {case.name}")
    assert r.status == "failed", r
    assert r.row_errors["out"] > r.row_tolerance["out"]
    assert "out row [" in r.reason


def test_single_row_faults_are_invisible_to_the_global_norm(on_cpu):
    """Why the row check exists: on a long MQA case the zeroed row stays under the global
    bound."""
    case = matrix.Case("bf16", 64, False, 1, 2048, 2048, 4, 1)
    r = reference.run_case(adapters.FaultAdapter(_MathForward(), "zero-row"), case, on_cpu)
    assert r.errors["out"] < r.tolerance["out"] < r.row_errors["out"]
    assert r.worst_row["out"] == [0, 1024, 2]
