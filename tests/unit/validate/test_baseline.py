"""Baseline comparison: fail on a throughput drop beyond max(10 %, 3x run-to-run spread)."""

from __future__ import annotations

import json

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import UsageError
from rocmbuild.validate import baseline
from rocmbuild.validate.kernelrun import KernelRun


def _run(tflops, spread=0.0, status="passed", device="NVIDIA H200", kernel="flash-attn"):
    """A kernel run as the gate writes it (its own "passed")."""
    return {"kernel": kernel, "status": status, "device": {"name": device},
            "throughput": [{"shape": "B4 S4096", "role": "test",
                            "fwd": {"tflops": tflops, "spread": spread, "ms": 1.0},
                            "bwd": {"tflops": tflops / 2, "spread": spread, "ms": 2.0}}]}


def _baseline(run):
    return baseline.read_runs({"kernels": {"runs": [run]}}, "test")


def _compare(now, base):
    return baseline.compare(KernelRun.from_json(now), _baseline(base))


def test_allowed_drop_is_max_of_floor_and_three_spreads():
    assert baseline.allowed_drop(0.01, 0.0) == pytest.approx(0.10)
    assert baseline.allowed_drop(0.05, 0.02) == pytest.approx(0.15)
    assert baseline.allowed_drop(0.0, 0.06) == pytest.approx(0.18)


@pytest.mark.parametrize("now,spread,ok", [
    (100.0, 0.0, True), (95.0, 0.0, True), (91.0, 0.0, True), (89.0, 0.0, False),
    (85.0, 0.05, True), (84.0, 0.05, False), (120.0, 0.0, True)])
def test_drop_threshold(now, spread, ok):
    res = _compare(_run(now, spread), _run(100.0))
    assert (res.status is Status.SUCCESS) is ok, res
    if not ok:
        assert "below the baseline" in res.problems[0]
    rows = {(r.direction, r.status) for r in res.rows}
    assert ("fwd", Status.SUCCESS if ok else Status.FAILED) in rows


def test_correctness_failure_fails_even_when_fast():
    res = _compare(_run(150.0, status="failed"), _run(100.0))
    assert res.status is Status.FAILED


def test_other_device_fails():
    res = _compare(_run(100.0, device="AMD Instinct MI300X"), _run(100.0))
    assert res.status is Status.FAILED and "device" in res.problems[0]


def test_missing_kernel_in_baseline_is_skipped():
    res = _compare(_run(100.0), _run(100.0, kernel="sdpa"))
    assert res.status is Status.SKIPPED and "no run of kernel 'flash-attn'" in res.reason


def test_shape_missing_from_baseline_is_a_skipped_row():
    base = _run(100.0)
    base["throughput"][0]["shape"] = "B1 S128"
    res = _compare(_run(50.0), base)
    assert res.status is Status.SUCCESS
    assert {r.status for r in res.rows} == {Status.SKIPPED}
    assert all(r.baseline_tflops is None for r in res.rows)


def test_a_bare_kernel_run_is_a_baseline(tmp_path):
    path = tmp_path / "kernel-flash-attn.json"
    path.write_text(json.dumps(_run(100.0)))
    runs = baseline.load_baseline(path)
    assert [r.kernel for r in runs] == ["flash-attn"]
    assert baseline.compare(KernelRun.from_json(_run(80.0)), runs).status is Status.FAILED


def test_load_baseline_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        baseline.load_baseline(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{,}")
    with pytest.raises(UsageError, match="not valid JSON"):
        baseline.load_baseline(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"x": 1}))
    with pytest.raises(UsageError, match="'kernels' missing"):
        baseline.load_baseline(other)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"kernels": {"runs": [{"status": "passed"}]}}))
    with pytest.raises(UsageError, match="not a readable validate report"):
        baseline.load_baseline(broken)


# ------------------------------------------------------------------ the workspace's baseline store


def _kr(tflops, status="passed", device="NVIDIA H200", fault=None, spread=0.0):
    return KernelRun.from_json({**_run(tflops, spread, status, device), "fault": fault})


def test_first_run_records_and_says_so(tmp_path):
    path = baseline.store_path(tmp_path)
    cmp = baseline.compare_store(_kr(100.0), baseline.read_store(path), "triton")
    assert cmp.status is Status.SKIPPED and cmp.reason == baseline.FIRST_RUN
    assert baseline.record(path, [_kr(100.0)], "triton", "t1") == 2  # one shape: fwd, bwd
    assert baseline.compare_store(_kr(98.0), baseline.read_store(path), "triton").status is (
        Status.SUCCESS)


def test_a_3x_slower_kernel_fails_against_the_store(tmp_path):
    path = baseline.store_path(tmp_path)
    baseline.record(path, [_kr(100.0)], "triton", "t1")
    cmp = baseline.compare_store(_kr(33.0), baseline.read_store(path), "triton")
    assert cmp.status is Status.FAILED
    assert "67.0% below the best of the last 1 accepted run(s) on this device" in cmp.problems[0]


def test_best_of_the_last_n_and_keyed_by_device_and_variant(tmp_path):
    path = baseline.store_path(tmp_path)
    for i, t in enumerate([120.0, 100.0, 100.0, 100.0, 100.0, 100.0]):
        baseline.record(path, [_kr(t)], "triton", f"t{i}")
    store = baseline.read_store(path)
    assert all(len(v) == baseline.STORE_KEEP for v in store.values())
    # 120 fell out of the last 5: 95 passes against 100
    assert baseline.compare_store(_kr(95.0), store, "triton").status is Status.SUCCESS
    # another device or variant has no history: first run there
    assert baseline.compare_store(_kr(10.0, device="AMD Instinct MI300X"), store,
                                  "triton").reason == baseline.FIRST_RUN
    assert baseline.compare_store(_kr(10.0), store, "ck").reason == baseline.FIRST_RUN


def test_failed_and_fault_runs_are_not_recorded(tmp_path):
    path = baseline.store_path(tmp_path)
    assert baseline.record(path, [_kr(100.0, status="failed"), _kr(100.0, fault="slow")],
                           "triton", "t") == 0
    assert not path.exists()


@pytest.mark.parametrize("tflops", [2e6, -1.0, float("inf"), float("nan")])
def test_a_gate_report_out_of_range_is_not_stored(tmp_path, tflops):
    """The gate's own report is checked as the store reads figures back: a run with one out
    of range is not stored (the store stays readable, the good run is kept)."""
    path = baseline.store_path(tmp_path)
    good = KernelRun.from_json({**_run(100.0, kernel="sdpa"), "fault": None})
    assert baseline.record(path, [_kr(tflops), good], "triton", "t") == 2
    store = baseline.read_store(path)
    assert len(store) == 2 and all("sdpa" in k for k in store)


def test_an_unreadable_store_names_itself(tmp_path):
    path = baseline.store_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(UsageError, match="baseline store .*throughput.json: unreadable") as e:
        baseline.read_store(path)
    assert "--no-baseline-store" in e.value.hint


# ---------------------------------------------------------------- the recipe's floors per arch


def _with_sdpa(fwd, bwd, sdpa_fwd, sdpa_bwd, arch="gfx942"):
    return KernelRun.from_json({
        "kernel": "flash-attn", "status": "passed", "device": {"name": "X", "arch": arch},
        "throughput": [
            {"shape": "B4 S4096", "role": "test", "fwd": {"tflops": fwd, "ms": 1.0},
             "bwd": {"tflops": bwd, "ms": 1.0}},
            {"shape": "B4 S4096", "role": "sdpa", "fwd": {"tflops": sdpa_fwd, "ms": 1.0},
             "bwd": {"tflops": sdpa_bwd, "ms": 1.0}}]})


def test_floor_tflops_and_sdpa_fraction():
    floor = {"fwd_tflops": 200.0, "bwd_tflops": 80.0, "sdpa_fraction": 0.5}
    assert baseline.check_floor(_with_sdpa(300, 150, 330, 290), floor) == []
    probs = baseline.check_floor(_with_sdpa(150, 150, 330, 400), floor)
    assert len(probs) == 3
    assert "B4 S4096 fwd: 150.0 TFLOP/s is below the recipe's floor for gfx942 (200" in probs[0]
    assert "45% of torch SDPA's 330.0" in probs[1] and "sdpa_fraction" in probs[1]
    assert "bwd" in probs[2]


def test_floor_read_from_rocmbuild_json():
    prov = {"validate_floor": {"gfx942": {"fwd_tflops": 200, "junk": 1},
                               "gfx90a": "not a table"}}
    assert baseline.floor_for(prov, "gfx942") == {"fwd_tflops": 200.0}
    assert baseline.floor_for(prov, "gfx90a") == {} and baseline.floor_for(None, "x") == {}


def test_a_run_below_the_floor_fails_even_on_its_first_run():
    from rocmbuild.validate import kernels

    res = kernels.with_baseline(_with_sdpa(50, 150, 330, 290), None, {}, "triton",
                                {"fwd_tflops": 100.0})
    assert res.status is Status.FAILED and "below the recipe's floor" in res.failures[0]
    assert res.baseline is not None and res.baseline.reason == baseline.FIRST_RUN
