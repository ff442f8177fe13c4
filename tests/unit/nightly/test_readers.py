"""The nightly's readers of JSON it wrote in an earlier process (slurm.json, a cell's
result.json, the run's manifest, earlier manifests and reports) against bad bytes: each goes
through core.untrusted, so deep nesting, bytes that are not UTF-8, NaN / Infinity, 400-digit
numbers, numbers out of range and FIFOs are one line naming the file and key (an error where the
caller stops, a skip where it treats bad data as absent), never a traceback or a hang. The
corpus cannot reach these files (they are made by a controller and its tasks), so the bad bytes
go to the reader functions here."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import cell, changes
from rocmbuild.nightly.report.history import load_history
from rocmbuild.nightly.slurm.outcome import read_result
from rocmbuild.nightly.slurm.submission import SLURM_JSON, load_submission

HUGE = "9" * 400
BAD_BYTES: list[tuple[bytes, str]] = [
    (b"[" * 100_000, "nested deeper than 32"),
    (bytes(range(128, 256)), "not UTF-8"),
    (b'{"x": NaN}', "NaN is not a number we accept"),
    (b'{"x": -Infinity}', "-Infinity is not a number"),
    (b'{"x": ' + HUGE.encode() + b"}", "more than 19 digits (key 'x')"),
    (b'{"x": 1e400}', "1e400 is not a finite number"),
]

SUBMISSION: dict[str, Any] = {
    "version": 1, "submitted": 1.5,
    "jobs": [{"job_id": "12", "script": "slurm/array0.sh", "cells": ["a"], "cpus": 1,
              "mem_mb": 0, "gpus": 0, "time_min": 5, "partition": None}],
    "cells": [{"cell": "a", "job_id": "12", "task": 0, "result": "cells/a/result.json",
               "log": "cells/a/log.txt"}]}


@pytest.mark.parametrize(("blob", "words"), BAD_BYTES)
def test_slurm_json_bad_bytes(tmp_path: Path, blob: bytes, words: str) -> None:
    (tmp_path / SLURM_JSON).write_bytes(blob)
    with pytest.raises(UsageError, match="not a Slurm submission") as info:
        load_submission(tmp_path)
    assert words in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize(("where", "value", "words"), [
    (("jobs", 0, "cpus"), 10 ** 18, "jobs[0].cpus: expected a whole number from 1 to 16384"),
    (("jobs", 0, "cpus"), 2.5, "jobs[0].cpus: expected a whole number"),
    (("jobs", 0, "cpus"), True, "jobs[0].cpus"),
    (("jobs", 0, "mem_mb"), -1, "jobs[0].mem_mb"),
    (("jobs", 0, "time_min"), 10 ** 12, "jobs[0].time_min"),
    (("jobs", 0, "partition"), 5, "jobs[0].partition"),
    (("jobs", 0, "job_id"), "١٢", "is not a number"),  # Arabic-Indic digits: not a job id
    (("jobs", 0, "job_id"), "1" * 25, "is not a number"),
    (("cells", 0, "task"), -1, "cells[0].task"),
    (("cells", 0, "task"), "0", "cells[0].task"),
])
def test_slurm_json_numbers(tmp_path: Path, where: tuple[str, int, str], value: object,
                            words: str) -> None:
    doc = json.loads(json.dumps(SUBMISSION))
    doc[where[0]][where[1]][where[2]] = value
    (tmp_path / SLURM_JSON).write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="not a Slurm submission") as info:
        load_submission(tmp_path)
    assert words in info.value.message, info.value.message


@pytest.mark.parametrize(("key", "value", "words"), [
    ("submitted", 1e300, "submitted: expected a number"),
    ("submitted", "now", "submitted: expected a number"),
    ("jobs", {"a": 1}, "jobs: expected a list"),
    ("cells", None, "cells: expected a list"),
])
def test_slurm_json_top_keys(tmp_path: Path, key: str, value: object, words: str) -> None:
    (tmp_path / SLURM_JSON).write_text(json.dumps({**SUBMISSION, key: value}))
    with pytest.raises(UsageError, match="not a Slurm submission") as info:
        load_submission(tmp_path)
    assert words in info.value.message, info.value.message
    (tmp_path / SLURM_JSON).write_text(json.dumps({k: v for k, v in SUBMISSION.items()
                                                   if k != key}))
    with pytest.raises(UsageError, match=f"key '{key}' missing"):
        load_submission(tmp_path)


def test_slurm_json_fifo_and_directory(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / SLURM_JSON)  # no writer: a reader that opens it blocking would hang
    with pytest.raises(UsageError, match="is not a regular file"):
        load_submission(tmp_path)
    os.unlink(tmp_path / SLURM_JSON)
    (tmp_path / SLURM_JSON).mkdir()
    with pytest.raises(UsageError, match="is not a regular file"):
        load_submission(tmp_path)


RESULT = {"cell": "c1", "status": "success", "end": "completed", "duration_s": 3}


@pytest.mark.parametrize(("blob", "words"), BAD_BYTES)
def test_result_json_bad_bytes(tmp_path: Path, blob: bytes, words: str) -> None:
    p = tmp_path / "result.json"
    p.write_bytes(blob)
    res, why = read_result(p, "c1")
    assert res is None and why.startswith("result.json unreadable: ") and words in why, why
    assert cell.read_result(p, "c1") is None  # the local executor reads it the same way


@pytest.mark.parametrize(("key", "value"), [
    ("duration_s", -1), ("duration_s", 1e300), ("peak_rss_bytes", -5),
    ("peak_rss_bytes", 2 ** 62), ("disk_bytes", 1.5), ("wheel_size", -1),
    ("cache_hit_rate", 1.5), ("tflops", -3.0), ("tflops", 1e12), ("exit_code", 10 ** 9),
    ("reason", "x" * 5000), ("log", "a\0b"),
])
def test_result_json_numbers_in_range(tmp_path: Path, key: str, value: object) -> None:
    p = tmp_path / "result.json"
    p.write_text(json.dumps({**RESULT, key: value}))
    res, why = read_result(p, "c1")
    assert res is None and why.startswith("result.json: ") and key in why, why
    assert cell.read_result(p, "c1") is None


def test_result_json_fifo(tmp_path: Path) -> None:
    p = tmp_path / "result.json"
    os.mkfifo(p)
    res, why = read_result(p, "c1")
    assert res is None and "is not a regular file" in why


def _manifest(run: Path, blob: bytes) -> None:
    run.mkdir(parents=True)
    (run / "manifest.json").write_bytes(blob)


GOOD_ENTRY = {"cell": {"id": "r.default.gfx942", "recipe": "r", "variant": None,
                       "source": "default", "arch": "gfx942", "timeout_s": 60},
              "pin": {"kind": "recipe", "value": "1.0"}}


@pytest.mark.parametrize(("blob", "words"), BAD_BYTES)
def test_run_manifest_bad_bytes(tmp_path: Path, blob: bytes, words: str) -> None:
    _manifest(tmp_path / "run", blob)
    with pytest.raises(UsageError, match=r"--run-dir: .*manifest\.json: ") as info:
        cell.read_manifest(tmp_path / "run")
    assert words in info.value.message


@pytest.mark.parametrize(("key", "value"), [
    ("timeout_s", 10 ** 18), ("timeout_s", 1.5), ("recipe", 5), ("arch", "x" * 5000),
    ("options", {"a": 1}),
])
def test_run_manifest_entry_checked(key: str, value: object) -> None:
    entry = json.loads(json.dumps(GOOD_ENTRY))
    assert cell.manifest_entry({"cells": [entry]}, "r.default.gfx942")[0].timeout_s == 60
    entry["cell"][key] = value
    words = f"cells[0].cell.{key}"
    with pytest.raises(UsageError, match="manifest.json: ") as info:
        cell.manifest_entry({"cells": [entry]}, "r.default.gfx942")
    assert words in info.value.message, info.value.message


def test_previous_manifests_bad_bytes_are_passed_over(tmp_path: Path) -> None:
    good = json.dumps({"cells": [GOOD_ENTRY]}).encode()
    _manifest(tmp_path / "20261101T000000Z", good)
    for i, (blob, _) in enumerate(BAD_BYTES):  # newer runs, each broken
        _manifest(tmp_path / f"2026110{i + 2}T000000Z", blob)
    os.mkfifo(tmp_path / "20261109T000000Z")  # a FIFO where a run directory belongs
    run = tmp_path / "20261110T000000Z"
    run.mkdir()
    os.mkfifo(run / "manifest.json")
    found = changes.last_manifest(tmp_path)
    assert list(found) == ["r.default.gfx942"]


@pytest.mark.parametrize(("blob", "words"), BAD_BYTES)
def test_history_reports_bad_bytes_are_skipped(tmp_path: Path, blob: bytes, words: str) -> None:
    run = tmp_path / "20261101T000000Z"
    run.mkdir()
    (run / "report.json").write_bytes(blob)
    runs, warnings = load_history(tmp_path)
    assert runs == () and len(warnings) == 1
    assert "report.json: skipped: " in warnings[0] and words in warnings[0], warnings
