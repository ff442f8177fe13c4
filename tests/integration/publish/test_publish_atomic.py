"""Atomicity and locking of the static index, with real processes and real SIGKILL.

The publisher pauses at a named step through ROCMBUILD_PUBLISH_PAUSE_AT (it writes a marker file
and sleeps); the test then kills it with SIGKILL and checks what a web server would serve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from publish_helpers import clean_env, make_wheel, rocmbuild, snapshot

from rocmbuild.publish.static_index import GENERATIONS, STEPS, TMP_PREFIX

PRE_COMMIT = [s for s in STEPS if s != "swapped"]


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rocmbuild", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"publisher exited early: {proc.communicate()}")
        if time.monotonic() > end:
            raise AssertionError(f"publisher never reached {path.read_text()}")
        time.sleep(0.01)


def leftovers(index: Path) -> list[str]:
    found = [str(p) for p in index.rglob(f"{TMP_PREFIX}*")]
    gens = sorted((index / GENERATIONS).iterdir())
    live = {(index / s).resolve() for s in ("stable", "staging") if (index / s).is_symlink()}
    found += [str(g) for g in gens if g.resolve() not in live]
    return found


@pytest.fixture
def base(tmp_path: Path) -> tuple[Path, list[Path]]:
    """An index with one live project, and two new wheels (one new project, one new version of
    the existing project) for a multi-wheel publish."""
    index = tmp_path / "index"
    w = tmp_path / "w"
    rocmbuild("publish", str(make_wheel(w, "keep", "1.0")), "--index", str(index), check=True)
    new = [
        make_wheel(w, "keep", "2.0+rocm6.2", payload="X = 1\n" * 5000),
        make_wheel(w, "fresh", "0.1"),
    ]
    return index, new


@pytest.mark.parametrize("step", PRE_COMMIT)
def test_kill9_before_commit_leaves_served_tree_identical(
    tmp_path: Path, base: tuple[Path, list[Path]], step: str
) -> None:
    index, new = base
    before = snapshot(index / "stable")
    marker = tmp_path / "paused"
    env = clean_env(ROCMBUILD_PUBLISH_PAUSE_AT=step, ROCMBUILD_PUBLISH_PAUSE_MARKER=str(marker))
    proc = start(["publish", *map(str, new), "--index", str(index)], env)
    wait_for(marker, proc)
    assert marker.read_text() == step
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)  # reaps it and closes its pipes
    assert proc.returncode == -signal.SIGKILL
    assert snapshot(index / "stable") == before  # byte-identical, nothing half-visible
    if step != "locked":
        assert leftovers(index), "the kill should have left a half-built generation"
    # the next publish succeeds, publishes both wheels, and cleans up
    rocmbuild("publish", *map(str, new), "--index", str(index), check=True)
    after = snapshot(index / "stable")
    assert f"files/{new[0].name}" in after and f"files/{new[1].name}" in after
    assert new[0].name in after["simple/keep/index.html"].decode()
    assert "fresh" in after["simple/index.html"].decode()
    assert leftovers(index) == []


def test_kill9_after_commit_shows_new_tree_and_next_run_cleans(
    tmp_path: Path, base: tuple[Path, list[Path]]
) -> None:
    index, new = base
    marker = tmp_path / "paused"
    env = clean_env(
        ROCMBUILD_PUBLISH_PAUSE_AT="swapped", ROCMBUILD_PUBLISH_PAUSE_MARKER=str(marker)
    )
    proc = start(["publish", *map(str, new), "--index", str(index)], env)
    wait_for(marker, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)  # reaps it and closes its pipes
    after = snapshot(index / "stable")
    assert f"files/{new[0].name}" in after and f"files/{new[1].name}" in after
    assert leftovers(index)  # the old generation is still there
    again = rocmbuild("publish", *map(str, new), "--index", str(index), check=True)
    assert "unchanged" in again.stderr
    assert snapshot(index / "stable") == after
    assert leftovers(index) == []


def test_kill9_during_promote(tmp_path: Path) -> None:
    index = tmp_path / "index"
    w = make_wheel(tmp_path / "w", "prom", "1.0")
    rocmbuild("publish", str(w), "--index", str(index), "--stage", "staging", check=True)
    rocmbuild(
        "publish", str(make_wheel(tmp_path / "w", "base", "1.0")), "--index", str(index), check=True
    )
    before = snapshot(index / "stable")
    marker = tmp_path / "paused"
    env = clean_env(
        ROCMBUILD_PUBLISH_PAUSE_AT="root-written",
        ROCMBUILD_PUBLISH_PAUSE_MARKER=str(marker),
        ROCMBUILD_INDEX=str(index),
    )
    proc = start(["promote", "prom==1.0"], env)
    wait_for(marker, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)  # reaps it and closes its pipes
    assert snapshot(index / "stable") == before
    rocmbuild("promote", "prom==1.0", "--index", str(index), check=True)
    assert (index / "stable" / "files" / w.name).read_bytes() == w.read_bytes()
    assert leftovers(index) == []


def test_two_concurrent_publishers_serialize(tmp_path: Path) -> None:
    """Publisher A holds the lock (paused for 1 s after writing its files); B starts meanwhile,
    must wait for the lock, and then adds its wheels on top of A's."""
    index = tmp_path / "index"
    wa = [make_wheel(tmp_path / "a", f"proj{i}", "1.0") for i in range(10)]
    wb = [make_wheel(tmp_path / "b", f"proj{i}", "2.0") for i in range(5, 15)]
    marker = tmp_path / "a-paused"
    env_a = clean_env(
        ROCMBUILD_PUBLISH_PAUSE_AT="files-written",
        ROCMBUILD_PUBLISH_PAUSE_MARKER=str(marker),
        ROCMBUILD_PUBLISH_PAUSE_SECONDS="1",
    )
    a = start(["publish", *map(str, wa), "--index", str(index)], env_a)
    wait_for(marker, a)
    b = start(["publish", *map(str, wb), "--index", str(index)], clean_env())
    out_a, err_a = a.communicate(timeout=60)
    out_b, err_b = b.communicate(timeout=60)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    assert "waiting for the index lock" in err_b
    root = json.loads((index / "stable" / "simple" / "index.json").read_text())
    assert [p["name"] for p in root["projects"]] == sorted(f"proj{i}" for i in range(15))
    for i in range(15):
        pj = json.loads((index / "stable" / "simple" / f"proj{i}" / "index.json").read_text())
        want = (["1.0"] if i < 10 else []) + (["2.0"] if i >= 5 else [])
        assert pj["versions"] == want, (i, pj["versions"])
        for f in pj["files"]:
            assert (index / "stable" / "files" / f["filename"]).stat().st_size == f["size"]
    assert leftovers(index) == []
