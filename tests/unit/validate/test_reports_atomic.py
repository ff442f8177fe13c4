"""validate's reports are written all or none (``runner.write_reports``): every report is
rendered and written to a temporary file before any is renamed, the JSON renamed last, so a
failure leaves no report of the run and the error stub (``runner.write_stopped``) never
replaces a complete ``--json-file``. In-process, real files; the failure is a real one (a
directory standing where the Markdown report goes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import ValidationError
from rocmbuild.validate import runner
from rocmbuild.validate.model import (
    Environment,
    KernelsSummary,
    ValidateOptions,
    ValidationReport,
)


def _report(log: Path) -> ValidationReport:
    return ValidationReport(wheels=(), archs=("gfx942",),
                            kernels=KernelsSummary(Status.SKIPPED, "no kernels"),
                            environment=Environment(None, None, "3.12", {}, None, log),
                            created="2026-12-06T00:00:00Z")


def test_all_reports_are_written(tmp_path: Path) -> None:
    opts = ValidateOptions(json_out=tmp_path / "r.json", md_out=tmp_path / "r.md",
                           html_out=tmp_path / "r.html")
    runner.write_reports(_report(tmp_path / "log"), opts)
    assert json.loads((tmp_path / "r.json").read_text())["archs"] == ["gfx942"]
    assert (tmp_path / "r.md").stat().st_size and (tmp_path / "r.html").stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json", "r.md"]


def test_a_failed_report_writes_none_and_the_stub_keeps_its_place(tmp_path: Path) -> None:
    """--md names a directory: the JSON is not renamed into place (nothing half-made), and
    the stub that run() writes for the error is then the only --json-file."""
    (tmp_path / "r.md").mkdir()
    opts = ValidateOptions(json_out=tmp_path / "r.json", md_out=tmp_path / "r.md")
    with pytest.raises(OSError):
        runner.write_reports(_report(tmp_path / "log"), opts)
    assert not (tmp_path / "r.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]  # no temporary left
    runner.write_stopped(ValidationError("validate: r.md: is a directory"), opts.json_out, [])
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "error"


def test_a_complete_json_report_is_never_replaced_by_the_stub(tmp_path: Path) -> None:
    """The JSON is renamed last: once it is in place every report is, so no later failure of
    this run can be followed by the stub."""
    (tmp_path / "r.html").mkdir()
    opts = ValidateOptions(json_out=tmp_path / "r.json", md_out=tmp_path / "r.md",
                           html_out=tmp_path / "r.html")
    with pytest.raises(OSError):
        runner.write_reports(_report(tmp_path / "log"), opts)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.md").exists()
