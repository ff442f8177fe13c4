"""KernelsSummary.needs_a_gpu: the gate had kernels to check and could not run any for want of
a GPU (or of torch), which the nightly treats as "cannot validate here" (pending)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.validate.kernelrun import KernelRun
from rocmbuild.validate.model import NO_DEVICE, KernelsSummary

NO_GPU = "no GPU: torch.cuda.is_available() is False (torch 2.13.0+cpu)"


@pytest.mark.parametrize(("summary", "why"), [
    (KernelsSummary(Status.SKIPPED, "x", (KernelRun("sdpa", Status.SKIPPED, NO_GPU),)), NO_GPU),
    (KernelsSummary(Status.SKIPPED, "x", (
        KernelRun("flash-attn", Status.SKIPPED, "torch cannot be imported: No module"),)),
     "torch cannot be imported: No module"),
    # nothing to check: not the host's lack
    (KernelsSummary(Status.SKIPPED, "no attention kernel among these wheels"), ""),
    # the adapter is not available here (a kernel this host cannot import): not a GPU question
    (KernelsSummary(Status.SKIPPED, "x", (
        KernelRun("hipattn", Status.SKIPPED, "hipattn: needs a HIP torch"),)), ""),
    (KernelsSummary(Status.SKIPPED, "x", (
        KernelRun("sdpa", Status.SKIPPED, NO_GPU),
        KernelRun("hipattn", Status.SKIPPED, "hipattn: needs a HIP torch"))), ""),
    (KernelsSummary(Status.SUCCESS, "", (KernelRun("sdpa", Status.SUCCESS),)), ""),
    (KernelsSummary(Status.FAILED, "bad", (KernelRun("sdpa", Status.FAILED, "bad"),)), ""),
])
def test_needs_a_gpu(summary: KernelsSummary, why: str) -> None:
    assert summary.needs_a_gpu() == why


def test_the_harness_begins_its_no_device_reasons_so() -> None:
    """The prefixes are the harness's own words (it runs in the validation venv and imports
    nothing of rocmbuild, so the two are held together here)."""
    harness = (Path(__file__).parents[3] / "src/rocmbuild/programs/kernelgate/harness.py")
    text = harness.read_text()
    for prefix in NO_DEVICE:
        assert f'"reason": f"{prefix}' in text, prefix
