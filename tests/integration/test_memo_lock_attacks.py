"""The memo and lock attacks of issue 24 (class 1), on real builds: the real CLI in a child, a
real sdist served by an http.server on 127.0.0.1 started here, real `pip wheel` builds of a
tiny project for two archs (two entries of one cache). Nothing is faked.

What is proved: a memo whose ``cache_key`` names another valid entry (the other arch's build)
or that is another command line's memo copied to this one's name is a miss, and the full path
delivers the wheel these inputs name (its bytes and arch label checked); a memo or entry.json
that is a FIFO never hangs a build; ``nightly.lock`` as a symlink to a file, a hard link or a
FIFO is refused at once, the file it names unchanged; a lock record's terminal escapes never
reach stderr."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.test_noop_memo import _env, _imports, _memos, _recipe, served

__all__ = ["served"]  # the fixture, shared with test_noop_memo

LABEL = {"gfx90a": "+rocm6.2.gfx90a", "gfx942": "+rocm6.2.gfx942"}


def _two_arch_recipe(tmp_path: Path, files: dict[str, bytes]) -> None:
    r = _recipe(tmp_path / "r", files)
    r.write_text(r.read_text().replace('supported = ["gfx942"]',
                                       'supported = ["gfx90a", "gfx942"]'))


def _build(tmp_path: Path, arch: str) -> tuple[int, str, bool]:
    """(exit code, stderr without import lines, whether the full path ran)."""
    (tmp_path / "first").mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "rocmbuild", "demo", "--arch", arch],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "COLUMNS": "200", **_env(tmp_path)})
    text = "\n".join(ln for ln in res.stderr.splitlines() if not ln.startswith("import time:"))
    return res.returncode, text, "rocmbuild.recipe.model" in _imports(res.stderr)


def _entry_wheel(tmp_path: Path, key: str) -> Path:
    (wheel,) = (tmp_path / "c" / "wheels" / key).glob("*.whl")
    return wheel


def _two_entries(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Both archs built: arch -> (its memo's file name, its cache key)."""
    out: dict[str, tuple[str, str]] = {}
    for arch in ("gfx942", "gfx90a"):
        before = set(_memos(tmp_path))
        rc, err, _ = _build(tmp_path, arch)
        assert rc == 0 and err.rstrip().endswith("built"), err
        (name,) = set(_memos(tmp_path)) - before
        out[arch] = (name, str(_memos(tmp_path)[name]["cache_key"]))
    assert out["gfx942"][1] != out["gfx90a"][1]
    return out


@pytest.mark.parametrize("attack", ["cache-key", "whole-memo"])
def test_a_memo_pointed_at_another_entry_delivers_the_right_wheel(
        tmp_path: Path, served: dict[str, bytes], attack: str) -> None:
    """The gfx942 command line's memo edited to name the gfx90a entry (its key; or the gfx90a
    memo copied over it whole): the old code served the gfx90a wheel as ``cached``. Now the
    seal does not match, the full path runs and delivers the gfx942 entry's bytes."""
    _two_arch_recipe(tmp_path, served)
    entries = _two_entries(tmp_path)
    memo_dir = tmp_path / "c" / "memo"
    name942, key942 = entries["gfx942"]
    name90a, key90a = entries["gfx90a"]
    if attack == "cache-key":
        memo = json.loads((memo_dir / name942).read_text())
        memo["cache_key"] = key90a
        (memo_dir / name942).write_text(json.dumps(memo, indent=1, sort_keys=True))
    else:
        (memo_dir / name942).write_bytes((memo_dir / name90a).read_bytes())
    wheels = tmp_path / "w" / "wheels"
    for w in wheels.glob("*.whl"):
        w.unlink()
    rc, err, full = _build(tmp_path, "gfx942")
    assert rc == 0 and err.rstrip().endswith("cached") and full, err
    (delivered,) = wheels.glob("*.whl")
    assert LABEL["gfx942"] in delivered.name and LABEL["gfx90a"] not in err, err
    assert delivered.read_bytes() == _entry_wheel(tmp_path, key942).read_bytes()
    assert delivered.read_bytes() != _entry_wheel(tmp_path, key90a).read_bytes()
    # the full path wrote the memo again, sealed: the next run is served by it, rightly
    assert _memos(tmp_path)[name942]["cache_key"] == key942
    rc, err, full = _build(tmp_path, "gfx942")
    assert rc == 0 and not full and LABEL["gfx942"] in err, err


@pytest.mark.parametrize("where", ["memo", "entry-json"])
def test_a_fifo_in_the_cache_never_hangs_a_build(tmp_path: Path, served: dict[str, bytes],
                                                 where: str) -> None:
    """A FIFO at the memo's path (the old ``remember`` read it and waited for a writer
    forever) or as an entry's entry.json (the old lookup opened it and waited): the build ends,
    a miss and a rebuild, or a hit."""
    _two_arch_recipe(tmp_path, served)
    rc, err, _ = _build(tmp_path, "gfx942")
    assert rc == 0, err
    ((name, memo),) = _memos(tmp_path).items()
    if where == "memo":
        path = tmp_path / "c" / "memo" / name
    else:
        path = tmp_path / "c" / "wheels" / str(memo["cache_key"]) / "entry.json"
    path.unlink()
    os.mkfifo(path)
    try:
        rc, err, full = _build(tmp_path, "gfx942")
    except subprocess.TimeoutExpired:  # pragma: no cover - the old code
        pytest.fail(f"the build waited on the FIFO {path}")
    assert rc == 0 and full, err
    assert err.rstrip().endswith("cached" if where == "memo" else "built"), err
    assert path.is_file() and not path.is_symlink()  # replaced by a regular file


_NIGHTLY = """[[matrix]]
recipes = ["demo"]
archs = ["gfx942"]
[publish]
index = "index"
"""


def _nightly(d: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCMBUILD_")}
    env.update(PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO / "src")), COLUMNS="1000",
               ROCMBUILD_RECIPE_PATH=str(d / "r"))
    return subprocess.run([sys.executable, "-m", "rocmbuild", "nightly", "--config",
                           str(d / "nightly.toml")], capture_output=True, text=True, env=env,
                          cwd=d, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("shape", ["symlink", "hardlink", "fifo"])
def test_a_nightly_lock_that_is_not_its_own_file_is_refused_untouched(
        tmp_path: Path, shape: str) -> None:
    """``build/nightly.lock`` a symlink to (or a hard link of) the user's file: the old code
    took the lock through it and truncated the file; a FIFO was taken as a lock. Now: exit 2,
    one line naming the lock, the file as it was, nothing run."""
    (tmp_path / "nightly.toml").write_text(_NIGHTLY)
    (tmp_path / "build").mkdir()
    (tmp_path / "r").mkdir()  # the recipe path: the config loads (the old code ran on)
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's notes\n")
    lock = tmp_path / "build" / "nightly.lock"
    if shape == "symlink":
        lock.symlink_to(victim)
    elif shape == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    try:
        res = _nightly(tmp_path)
    except subprocess.TimeoutExpired:  # pragma: no cover - a hang is a failure
        pytest.fail("the nightly waited on its lock")
    assert victim.read_text() == "the user's notes\n"
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("usage error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"usage error: {lock}: "), res.stderr
    assert "not a nightly lock" in errors[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "reports").exists()


def test_a_lock_records_escapes_never_reach_the_terminal(tmp_path: Path) -> None:
    """A live holder (this test holds the flock) whose record's host is an OSC title sequence:
    ``busy`` (exit 15) names it with the control characters replaced."""
    (tmp_path / "nightly.toml").write_text(_NIGHTLY)
    (tmp_path / "build").mkdir()
    lock = tmp_path / "build" / "nightly.lock"
    lock.write_text(json.dumps({"pid": 4242, "host": "n1\x1b]0;you are owned\x07\x1b[31m",
                                "started": "2026-12-01T00:00:00Z"}))
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = _nightly(tmp_path)
    finally:
        os.close(fd)
    assert res.returncode == 15, res.stderr
    assert "pid 4242 on n1?]0;you are owned??[31m" in res.stderr, res.stderr
    assert "\x1b" not in res.stderr + res.stdout and "\x07" not in res.stderr
