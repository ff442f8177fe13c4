"""What a person (or a CI log) sees while a build runs: the real CLI in a child process, building
a small local project with real `pip wheel` whose setup.py prints ninja-style ``[N/M]`` lines
slowly (a real build's output shape, in seconds instead of minutes).

- Not a terminal: plain periodic lines (ROCMBUILD_PROGRESS_SECONDS) and, under GitHub Actions,
  one ``::group::`` / ``::endgroup::`` pair around each stage.
- A terminal (a real pseudo-terminal from python's ``pty``): the live display shows a spinner
  with the line count before the first ``[N/M]`` and N/M after, never ``None``.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

from rocmbuild.pipeline.build import BUILD_STAGES
from tests.conftest import REPO

SETUP = """import time
for i in range(1, 4):
    print(f"[{i}/3] compiling part {i}", flush=True)
    time.sleep(0.7)
from setuptools import setup
setup(name="progress-demo", version="1.0", packages=["demo"])
"""
STAGES = tuple(stage.name for stage in BUILD_STAGES)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "src" / "demo").mkdir(parents=True)
    (tmp_path / "src" / "demo" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "src" / "setup.py").write_text(SETUP)
    recipe = tmp_path / "progress-demo.toml"
    recipe.write_text(f"""schema_version = 1
[package]
name = "progress-demo"
[source]
path = "{tmp_path / 'src'}"
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
""")
    return recipe


def _build(recipe: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", "ROCMBUILD_WORKDIR": str(work), **env}
    full.pop("ROCMBUILD_VERBOSITY", None)
    return subprocess.run([sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch",
                           "gfx942"], capture_output=True, text=True, env=full, cwd=REPO,
                          timeout=600)


def test_ci_lines_with_and_without_github_actions(tmp_path: Path) -> None:
    recipe = _project(tmp_path)
    gh = _build(recipe, tmp_path / "gh", GITHUB_ACTIONS="true", ROCMBUILD_PROGRESS_SECONDS="0.5")
    assert gh.returncode == 0, gh.stderr
    lines = gh.stderr.splitlines()
    opens = [ln for ln in lines if ln.startswith("::group::")]
    n = len(STAGES)
    assert opens == [f"::group::[{i}/{n}] {s}" for i, s in enumerate(STAGES, 1)], gh.stderr
    assert lines.count("::endgroup::") == n
    # every group is closed before the next opens
    depth = 0
    for ln in lines:
        depth += ln.startswith("::group::") - (ln == "::endgroup::")
        assert depth in (0, 1), gh.stderr
    ticks = [ln for ln in lines if re.fullmatch(
        r"  building progress-demo \(default, MAX_JOBS=\d+\): (\[\d/3\] \d+ %|\d+ lines), "
        r"\d+s elapsed(, ETA \S+ \([a-z +]+\))?(, peak [\d.]+ GiB)?", ln)]
    assert ticks, gh.stderr  # plain periodic lines, not a live display
    assert "None" not in gh.stderr and "\x1b[" not in gh.stderr

    plain = _build(recipe, tmp_path / "plain", GITHUB_ACTIONS="",
                   ROCMBUILD_PROGRESS_SECONDS="0")
    assert plain.returncode == 0, plain.stderr
    assert "::group::" not in plain.stderr and "::endgroup::" not in plain.stderr
    assert [ln for ln in plain.stderr.splitlines() if re.fullmatch(r"\[\d/\d\] \w+", ln)] == [
        f"[{i}/{len(STAGES)}] {s}" for i, s in enumerate(STAGES, 1)]
    assert "elapsed" not in plain.stderr  # 0: no periodic lines


def test_terminal_bar_never_shows_none(tmp_path: Path) -> None:
    recipe = _project(tmp_path)
    env = {**os.environ, "COLUMNS": "160", "LINES": "40", "TERM": "xterm-256color",
           "ROCMBUILD_WORKDIR": str(tmp_path / "work")}
    for name in ("ROCMBUILD_VERBOSITY", "GITHUB_ACTIONS", "NO_COLOR", "CI"):
        env.pop(name, None)
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch",
                             "gfx942"], stdin=child, stdout=child, stderr=child, env=env,
                            cwd=REPO, close_fds=True)
    os.close(child)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=60) == 0
    raw = b"".join(chunks).decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)  # drop cursor moves and colours
    assert "building progress-demo" in text, text  # the live display was drawn
    assert "None" not in text, text
    assert re.search(r"\d+ lines", text), text  # before the first [N/M]: lines and a spinner
    assert re.search(r"\b[123]/3\b", text), text  # then ninja's N/M
