"""Readers of JSON that code we do not control wrote: the kernel gate's report (written in the
validation venv, after the wheel's code ran), a wheel's rocmbuild.json, and the build env's
marker. Each goes through core.untrusted; the gate writes its non-finite figures as strings
("inf", "nan") so its report is plain JSON and still says how far off a case was."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import pytest

from rocmbuild.artifacts.wheel import PROVENANCE_MAX, WheelFormatError, read_wheel
from rocmbuild.buildtools import buildenv
from rocmbuild.core import untrusted
from rocmbuild.programs.kernelgate import harness
from rocmbuild.validate.kernelrun import KernelRun


def test_gate_report_with_infinite_errors_reads_back() -> None:
    """A correctness case whose error is infinite (the 'nan' fault) is plain JSON after
    harness._plain, and KernelRun reads the infinity back."""
    res = {"kernel": "sdpa", "status": "failed", "throughput": [],
           "correctness": [{"case": "c", "status": "failed", "errors": {"out": math.inf},
                            "tolerance": {"out": 0.01}, "row_errors": {"out": math.nan}}]}
    text = json.dumps(harness._plain(res))
    assert "Infinity" not in text and "NaN" not in text
    run = KernelRun.from_json(untrusted.loads(text))
    assert run.correctness[0].errors["out"] == math.inf
    assert math.isnan(run.correctness[0].row_errors["out"])


def _wheel(path: Path, provenance: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a/__init__.py", "")
        zf.writestr("a-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: a\nVersion: 1.0\n")
        zf.writestr("a-1.0.dist-info/rocmbuild.json", provenance)
    return path


@pytest.mark.parametrize(("blob", "words"), [
    (b"[" * 100_000, "rocmbuild.json: nested deeper than 32"),
    (b'{"a": NaN}', "rocmbuild.json: NaN is not a number"),
    (b'{"a": ' + b"9" * 400 + b"}", "rocmbuild.json: a number of more than 19 digits"),
    (b'"\xff"', "rocmbuild.json: not UTF-8"),
    (b" " * (PROVENANCE_MAX + 1), f"is larger than {PROVENANCE_MAX} bytes"),
])
def test_wheel_provenance_bad(tmp_path: Path, blob: bytes, words: str) -> None:
    with pytest.raises(WheelFormatError) as info:
        read_wheel(_wheel(tmp_path / "a-1.0-py3-none-any.whl", blob))
    assert words in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize("blob", [
    b"[" * 100_000, b'{"format": NaN}', bytes(range(128, 256)),
    json.dumps({"format": buildenv.FORMAT, "digest": "d", "requirements": [5],
                "packages": [], "host_packages": []}).encode(),
    json.dumps({"format": buildenv.FORMAT, "digest": "d", "requirements": [],
                "packages": [["a", None]], "host_packages": []}).encode(),
])
def test_build_env_marker_not_ours_is_rebuilt(tmp_path: Path, blob: bytes) -> None:
    good = {"format": buildenv.FORMAT, "digest": "d", "requirements": ["x"],
            "packages": [["a", "1"]], "host_packages": []}
    (tmp_path / buildenv.MARKER).write_text(json.dumps(good))
    env = buildenv._read_marker(tmp_path, "d")
    assert env is not None and env.packages == (("a", "1"),)
    (tmp_path / buildenv.MARKER).write_bytes(blob)
    assert buildenv._read_marker(tmp_path, "d") is None
