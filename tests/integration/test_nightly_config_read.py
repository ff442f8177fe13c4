"""``rocmbuild nightly --config <(cat f)`` through a real bash: the config is read once, and a
pipe is refused with one line and a hint (each cell's task reads the file again by its path, so
the nightly needs a file), before the lock is taken or anything is written; never a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

M = '[[matrix]]\nrecipes = ["hip-attention-probe"]\narchs = ["gfx942"]\n'
P = '[publish]\nindex = "index"\n'
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("extra", [["--dry-run"], []])
def test_process_substitution_through_bash(tmp_path: Path, extra: list[str]) -> None:
    """``--config <(cat f)``: read once, and refused as a pipe with one line and a hint (the
    nightly needs the file again in each cell's task); nothing taken or written, no hang."""
    (tmp_path / "f.toml").write_text(M + P)
    cmd = (f"{sys.executable} -m rocmbuild --workdir {tmp_path}/build nightly --config "
           f"<(cat {tmp_path}/f.toml) {' '.join(extra)}")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("usage error: --config: /dev/fd/") and \
        lines[0].endswith(": is a pipe, not a regular file")
    assert lines[1].startswith("hint: write the config to a file first")
    assert "Traceback" not in r.stderr and not (tmp_path / "build").exists()


def test_the_same_file_works(tmp_path: Path) -> None:
    """The control: the file itself passes the same dry run (so the pipe is what is refused)."""
    (tmp_path / "f.toml").write_text(M + P)
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m rocmbuild --workdir {tmp_path}/build "
                        f"nightly --config {tmp_path}/f.toml --dry-run"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(SRC)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hip-attention-probe.default.default.gfx942  BUILD")
