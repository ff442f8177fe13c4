"""The reports' own files of the wrong kind when the report is written (the up-front check,
``nightly.controller.check_outputs``, is in the corpus: tests/corpus/case_integrity.py): a
directory at ``rocmbuild.prom`` or ``index.html`` is one error naming that path, never the name
of the temporary it was written to (``reports/.tmp-x1y2/rocmbuild.prom: Is a directory`` before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.core import fsutil
from rocmbuild.core.errors import RocmbuildError
from rocmbuild.nightly.report.write import write
from tests.nightly_runs import night


@pytest.mark.parametrize("name", ["rocmbuild.prom", "index.html"])
def test_a_report_file_that_is_a_directory_is_named_not_its_temporary(
        tmp_path: Path, name: str) -> None:
    reports = tmp_path / "reports"
    (reports / name).mkdir(parents=True)
    with pytest.raises(RocmbuildError) as exc:
        write(reports, night(1))
    msg = exc.value.message
    assert f"{reports / name}: " in msg and fsutil.TMP_PREFIX not in msg, msg
    assert exc.value.hint
    assert [p.name for p in reports.iterdir() if p.name.startswith(fsutil.TMP_PREFIX)] == []


def test_atomic_writes_name_the_target_or_its_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError) as exc:
        fsutil.write_atomic(tmp_path / "d", "x")
    assert exc.value.filename == str(tmp_path / "d")
    with pytest.raises(FileNotFoundError) as missing:
        fsutil.write_atomic(tmp_path / "no" / "f", "x")
    assert missing.value.filename == str(tmp_path / "no")
