"""The attention gate on a real GPU (torch.cuda; HIP on ROCm torch). Skipped without one.

torch SDPA (flash backend) is the kernel under test: it must pass, and every injected fault must
fail. Timing agreement with triton do_bench is measured by benchmarks/attention_gate.py (no timed
assertions here).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU: torch.cuda.is_available() is False")]

from rocmbuild.programs.kernelgate import FAULTS, harness  # noqa: E402


def test_sdpa_passes_correctness():
    res = harness.gate("sdpa", quick=True, throughput=False)
    assert res["status"] == "passed", res.get("failures")
    statuses = [c["status"] for c in res["correctness"]]
    assert statuses.count("passed") >= 3  # SDPA skips varlen and Sq != Sk causal


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "slow"])
def test_injected_fault_fails(fault):
    res = harness.gate("sdpa", fault=fault, quick=True, throughput=False)
    assert res["status"] == "failed"
    assert res["failures"]


@pytest.mark.parametrize("fault", ["zero-row", "softmax-shift", "head-swap"])
def test_one_bad_row_fails_every_case_it_changes(fault):
    res = harness.gate("sdpa", fault=fault, quick=True, throughput=False)
    ran = [c for c in res["correctness"] if c["status"] != "skipped"]
    assert ran and all(c["status"] == "failed" for c in ran if c["fault_changed"])


def test_slow_fault_is_correct_but_slow():
    """Right results, 3x the forward time: only a baseline (the store) can catch it."""
    res = harness.gate("sdpa", fault="slow", quick=True, throughput=False)
    assert res["status"] == "passed"


def test_throughput_entries_are_sane():
    res = harness.gate("sdpa", quick=True, correctness=False, compare_sdpa=False)
    assert res["status"] == "passed"
    for e in res["throughput"]:
        for d in ("fwd", "bwd"):
            assert e[d]["tflops"] > 0 and e[d]["ms"] > 0
        assert e["input_bytes"] > (torch.cuda.get_device_properties(0).L2_cache_size or 0)


def test_hipattn_adapter_skips_off_amd():
    if getattr(torch.version, "hip", None):
        pytest.skip("AMD host: the probe adapter is exercised for real here")
    res = harness.gate("hipattn", quick=True)
    assert res["status"] == "skipped"
    assert "AMD hosts only" in res["reason"]


def test_gate_runs_as_a_copied_package(tmp_path):
    """As the validation venv runs it: the directory copied under another name, `python -m`."""
    import json
    import shutil
    import sys
    from pathlib import Path

    from rocmbuild.artifacts.results import Status
    from rocmbuild.core.run import run
    from rocmbuild.programs import kernelgate
    from rocmbuild.validate.kernelrun import KernelRun

    shutil.copytree(Path(kernelgate.__file__).parent, tmp_path / "gatepkg",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "sdpa.json"
    run([sys.executable, "-m", "gatepkg", "--kernel", "sdpa", "--quick", "--no-throughput",
         "--json", out], cwd=tmp_path)
    res = KernelRun.from_json(json.loads(out.read_text()))
    assert res.status is Status.SUCCESS and res.device is not None
    assert res.correctness and all(c.status is not Status.FAILED for c in res.correctness)
