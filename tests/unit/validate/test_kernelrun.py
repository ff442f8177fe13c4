"""KernelRun: the gate's JSON read back as typed values, on the real H200 reports in docs/, and
the one status vocabulary."""

from __future__ import annotations

import json

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.config import REPO_ROOT
from rocmbuild.core.errors import UsageError
from rocmbuild.validate import kernels
from rocmbuild.validate.kernelrun import KernelRun
from rocmbuild.validate.model import ValidateOptions

REPORTS = sorted((REPO_ROOT / "docs/dev/validate-h200").glob("*.json"))


def test_status_parse_maps_the_gate_and_old_reports():
    assert Status.parse("passed") is Status.SUCCESS
    assert Status.parse("success") is Status.SUCCESS
    assert Status.parse("warning") is Status.WARNING
    assert Status.parse("skipped") is Status.SKIPPED
    with pytest.raises(ValueError):
        Status.parse("ok")


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_real_reports_read_back_and_round_trip(path):
    runs = json.loads(path.read_text())["kernels"]["runs"]
    assert runs
    for raw in runs:
        run = KernelRun.from_json(raw)
        assert run.kernel == raw["kernel"]
        assert run.status is Status.parse(raw["status"])
        assert KernelRun.from_json(run.to_json()) == run
        assert len(run.correctness) == len(raw.get("correctness") or [])
        for case, c in zip(run.correctness, raw.get("correctness") or [], strict=True):
            assert case.status is Status.parse(c["status"]) and case.errors == c["errors"]
        for row, e in zip(run.throughput, raw.get("throughput") or [], strict=True):
            for d in ("fwd", "bwd"):
                t = row.timing(d)
                assert (t is None) == (d not in e)
                if t is not None:
                    assert t.tflops == e[d]["tflops"] and t.ms == e[d]["ms"]


def test_full_h200_run_is_typed():
    raw = json.loads((REPO_ROOT / "docs/dev/validate-h200/flash-attn-full.json").read_text())
    run = KernelRun.from_json(raw["kernels"]["runs"][0])
    assert run.device is not None and "H200" in run.device.name
    assert run.device.peak_tflops == 989.0
    assert {r.role for r in run.throughput} == {"test", "sdpa"}
    worst = [c.worst for c in run.correctness if c.status is Status.SUCCESS]
    assert worst and all(w is not None and w <= 1.0 for w in worst)


def test_malformed_run_is_an_error():
    with pytest.raises(KeyError):
        KernelRun.from_json({"status": "passed"})
    with pytest.raises(ValueError):
        KernelRun.from_json({"kernel": "sdpa", "status": "great"})


def _run(kernel, status, reason="", failures=()):
    return KernelRun(kernel, status, reason, failures=tuple(failures))


def test_summary_never_passes_what_did_not_run():
    assert kernels.summarize([]).status is Status.SKIPPED
    s = kernels.summarize([_run("hipattn", Status.SKIPPED, "AMD hosts only")])
    assert s.status is Status.SKIPPED and "hipattn: AMD hosts only" in s.reason
    s = kernels.summarize([_run("flash-attn", Status.SUCCESS),
                           _run("hipattn", Status.SKIPPED, "AMD hosts only")])
    assert s.status is Status.SUCCESS
    s = kernels.summarize([_run("flash-attn", Status.FAILED, failures=["B1 S1: NaN"]),
                           _run("sdpa", Status.SUCCESS)])
    assert s.status is Status.FAILED and s.reason == "flash-attn: B1 S1: NaN"


def test_options_are_checked_against_the_gate():
    kernels.check_options(ValidateOptions(kernel="hipattn", inject_fault="nan"))
    with pytest.raises(UsageError, match="unknown kernel 'xformers'"):
        kernels.check_options(ValidateOptions(kernel="xformers"))
    with pytest.raises(UsageError, match="unknown fault 'sluggish'"):
        kernels.check_options(ValidateOptions(inject_fault="sluggish"))


def test_issue14_reports_carry_rows_device_and_store():
    """The H200 runs of issue 14: per-row errors with the worst row's index, the identified
    model and its peak's source, the store comparison; all round-trip."""
    base = REPO_ROOT / "docs/dev/validate-h200/issue14"
    first = KernelRun.from_json(json.loads((base / "first.json").read_text())["kernels"]["runs"][0])
    assert first.device is not None and first.device.model == "H200"
    assert first.device.peak_tflops == 989.4 and "NVIDIA H200" in first.device.peak_source
    assert first.baseline is not None and first.baseline.reason == (
        "first run on this device: baseline recorded")
    fault = KernelRun.from_json(
        json.loads((base / "zero-row.json").read_text())["kernels"]["runs"][0])
    assert all(c.status is Status.FAILED and c.fault_changed for c in fault.correctness)
    c = fault.correctness[0]
    assert c.worst_row["out"] == (1, 63, 2) and c.row_errors["out"] == pytest.approx(1.0)
    assert c.worst is not None and c.worst > 100  # the row, not the diluted global norm
    for run in (first, fault):
        assert KernelRun.from_json(run.to_json()) == run
