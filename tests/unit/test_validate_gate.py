"""Baseline gate: fail on a throughput drop beyond max(10 %, 3x run-to-run spread)."""

from __future__ import annotations

import json

import pytest

from rocmbuild.errors import UsageError
from rocmbuild.validate import gate


def _run(tflops, spread=0.0, status="passed", device="NVIDIA H200", kernel="flash-attn"):
    return {"kernel": kernel, "status": status, "device": {"name": device},
            "throughput": [{"shape": "B4 S4096", "role": "test",
                            "fwd": {"tflops": tflops, "spread": spread},
                            "bwd": {"tflops": tflops / 2, "spread": spread}}]}


def _baseline(run):
    return {"kernels": {"runs": [run]}}


def test_allowed_drop_is_max_of_floor_and_three_spreads():
    assert gate.allowed_drop(0.01, 0.0) == pytest.approx(0.10)
    assert gate.allowed_drop(0.05, 0.02) == pytest.approx(0.15)
    assert gate.allowed_drop(0.0, 0.06) == pytest.approx(0.18)


@pytest.mark.parametrize("now,spread,ok", [
    (100.0, 0.0, True), (95.0, 0.0, True), (91.0, 0.0, True), (89.0, 0.0, False),
    (85.0, 0.05, True), (84.0, 0.05, False), (120.0, 0.0, True)])
def test_drop_threshold(now, spread, ok):
    res = gate.compare(_run(now, spread), _baseline(_run(100.0)))
    assert (res["status"] == "passed") is ok, res
    if not ok:
        assert "below the baseline" in res["problems"][0]


def test_correctness_failure_fails_even_when_fast():
    res = gate.compare(_run(150.0, status="failed"), _baseline(_run(100.0)))
    assert res["status"] == "failed"


def test_other_device_fails():
    res = gate.compare(_run(100.0, device="AMD Instinct MI300X"), _baseline(_run(100.0)))
    assert res["status"] == "failed" and "device" in res["problems"][0]


def test_missing_kernel_in_baseline_is_skipped():
    res = gate.compare(_run(100.0), _baseline(_run(100.0, kernel="sdpa")))
    assert res["status"] == "skipped"


def test_load_baseline_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        gate.load_baseline(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        gate.load_baseline(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"x": 1}))
    with pytest.raises(UsageError, match="'kernels' missing"):
        gate.load_baseline(other)
