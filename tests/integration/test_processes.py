"""Class 5 (processes): rocmbuild's whole process tree ends with it.

Real processes and real signals throughout: pip -> the PEP 517 backend -> setup.py -> sh ->
sleep is a five-level tree that stands in for pip -> setup.py -> ninja -> clang (no ROCm
compiler here). Every process the tests start carries a marker in its environment; "no
descendant survives" means no process in /proc carries it afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from rocmbuild.core import run
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import CommandFailed
from tests.conftest import REPO

MARK = "ROCMBUILD_PROCS_TEST"


def marked(marker: str) -> list[int]:
    """Pids of live processes (not zombies) whose environment carries ``MARK=marker``."""
    needle = f"{MARK}={marker}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if needle not in (d / "environ").read_bytes().split(b"\0"):
                continue
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(d.name))
    return found


def wait_until(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch):
    m = uuid.uuid4().hex
    monkeypatch.setenv(MARK, m)
    yield m
    for pid in marked(m):  # never leave our own strays behind, even when a test fails
        os.kill(pid, signal.SIGKILL)


def test_timeout_fires_when_the_child_prints_nothing_and_kills_the_group(marker: str) -> None:
    """A silent command and its silent grandchildren are killed at the timeout, not when a
    line would arrive (none ever does)."""
    start = time.monotonic()
    with pytest.raises(CommandFailed, match=r"sh did not finish within 1s") as info:
        run.run(["sh", "-c", "sleep 60 & sleep 60; wait"], timeout=1)
    took = time.monotonic() - start
    assert took < 5, took
    assert wait_until(lambda: not marked(marker), 5), marked(marker)
    assert info.value.returncode != 0


def test_timeout_without_check_returns_a_timed_out_result(marker: str) -> None:
    res = run.run(["sh", "-c", "echo started; sleep 60"], timeout=0.5, check=False)
    assert res.timed_out and res.returncode != 0 and "started" in res.output
    assert wait_until(lambda: not marked(marker), 5)


def test_leftovers_of_a_finished_command_are_killed(marker: str) -> None:
    """A command that exits while a background child of it still runs (and holds its output
    pipe) returns at once, and the child is gone."""
    start = time.monotonic()
    res = run.run(["sh", "-c", "sleep 60 & echo done"], capture=True)
    assert res.returncode == 0 and res.output == "done"
    assert time.monotonic() - start < 10
    assert wait_until(lambda: not marked(marker), 5), marked(marker)


def test_an_exception_in_the_line_callback_kills_the_tree(marker: str) -> None:
    """Whatever ends run() early (here the callback raises, as a signal turned into
    KeyboardInterrupt would) kills the command's whole group first."""

    def stop(line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run.run(["sh", "-c", "sleep 60 & echo go; sleep 60"], on_line=stop)
    assert wait_until(lambda: not marked(marker), 5), marked(marker)


@pytest.mark.parametrize("depth", [1, 3])
def test_sigkill_of_the_parent_kills_every_descendant(marker: str, tmp_path: Path,
                                                      depth: int) -> None:
    """rocmbuild's process dies by SIGKILL (no handler runs): the supervisor's pdeathsig fires
    and it kills its group, grandchildren included."""
    tree = "sleep 60"
    for _ in range(depth):
        tree = f"sh -c {subprocess.list2cmdline([tree + ' & ' + tree + '; wait'])}"
    # the sleeps at the bottom of the tree, the Python process and the top sh
    sigkill_parent(f"from rocmbuild.core import run; run.run(['sh', '-c', {tree!r}])",
                   2 ** depth + 2, marker)


SLOW_GUARDIAN = """import subprocess, time
from rocmbuild.core import run
popen = subprocess.Popen
def slow(argv, *a, **k):  # a loaded machine: starting an interpreter takes seconds
    if run.GUARDIAN in argv:
        time.sleep(3)
    return popen(argv, *a, **k)
run.subprocess.Popen = slow
run.run(['sh', '-c', 'sleep 60 & sleep 60; wait'])
"""


def test_sigkill_while_the_guardian_is_still_starting(marker: str) -> None:
    """The guardian is running before the command starts: when starting it is slow (seconds on a
    loaded machine) and rocmbuild is SIGKILLed meanwhile, no command ran unguarded. Started after
    the command (as before), the tree outlived the parent (seen twice in CI)."""
    # the Python process, the sh and its two sleeps
    sigkill_parent(SLOW_GUARDIAN, 4, marker)


def _who(pids: list[int]) -> str:
    """The survivors and every process guardian alive, as /proc/<pid>/stat shows them (state,
    ppid, group, session), for a failure message."""
    rows = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")[:80]
        except OSError:
            continue
        if d.name.isdigit() and (int(d.name) in pids or b"groups = set()" in cmd):
            rows.append(f"{d.name}: {stat.rsplit(')', 1)[1].split()[:4]} {cmd!r}")
    return "survivors " + str(pids) + "; " + "; ".join(rows)


def sigkill_parent(code: str, alive: int, marker: str) -> None:
    """Run ``code`` (a Python process calling run.run) until ``alive`` marked processes run,
    SIGKILL that process, and check that none of them survives."""
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        assert wait_until(lambda: len(marked(marker)) >= alive, 20), marked(marker)
        parent.kill()
        assert parent.wait(10) == -signal.SIGKILL
        assert wait_until(lambda: not marked(marker), 15), _who(marked(marker))
    finally:
        parent.kill()
        parent.wait()


NINJA = """rule slow
  command = sleep 60 && touch $out
build a: slow
build b: slow
"""


def ninja_tree(tmp_path: Path) -> list[str]:
    """A real ninja with two running jobs: ninja puts each job in a process group of its own
    (not the command's), as it does with a build's compilers."""
    (tmp_path / "build.ninja").write_text(NINJA)
    return ["ninja", "-C", str(tmp_path), "-j2"]


def test_timeout_kills_ninjas_jobs_in_their_own_groups(marker: str, tmp_path: Path) -> None:
    """ninja's jobs leave the command's process group but stay in its session: the timeout's
    kill reaches them (a kill of the group alone left both sleeps running)."""
    argv = ninja_tree(tmp_path)
    with pytest.raises(CommandFailed, match=r"did not finish within 2s"):
        run.run(argv, timeout=2)
    assert wait_until(lambda: not marked(marker), 5), marked(marker)


def test_sigkill_of_the_parent_kills_ninjas_jobs(marker: str, tmp_path: Path) -> None:
    """rocmbuild's process dies by SIGKILL while ninja runs two jobs: the guardian kills the
    command's session, so the jobs in ninja's own groups die too."""
    # Python, ninja, and two jobs of sh and sleep
    sigkill_parent(f"from rocmbuild.core import run; run.run({ninja_tree(tmp_path)!r})", 6, marker)


SETUP = """import os, subprocess
from setuptools import setup
slow = os.environ.get("PROCS_TEST_SLOW", "0")
if slow != "0":  # a compiler driver that runs two workers, like ninja -> clang
    subprocess.run(["sh", "-c", f"sleep {slow} & sleep {slow}; wait"], check=True)
setup(name="slow-ext", version="1.0", packages=["slow"])
"""


def slow_recipe(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "slow").mkdir(parents=True)
    (src / "slow" / "__init__.py").write_text("VALUE = 1\n")
    (src / "setup.py").write_text(SETUP)
    recipe = tmp_path / "slow.toml"
    recipe.write_text("""schema_version = 1
[package]
name = "slow-ext"
[source]
path = "src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
# the build sees only allow-listed host variables: the marker and the step's length pass
pass_env = ["ROCMBUILD_PROCS_TEST", "PROCS_TEST_SLOW"]
""")
    return recipe


def sigint_default() -> None:
    """In the child before exec: SIGINT as a terminal job has it. A shell starts background
    jobs (`cmd &` without job control, as a CI script may run the suite) with SIGINT ignored,
    and a process that inherits that rightly ignores Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_build(recipe: Path, tmp_path: Path, slow: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "ROCMBUILD_WORKDIR": str(tmp_path / "build"),
           "PROCS_TEST_SLOW": slow}
    return subprocess.Popen(
        [sys.executable, "-m", "rocmbuild", "build", str(recipe), "--arch", "gfx942"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group, like a shell job: SIGINT goes to the group
        preexec_fn=sigint_default,
    )


def assert_cache_consistent(build: Path) -> None:
    """Every entry in the cache is whole (entry.json and a wheel with the recorded sha256);
    every wheel in the wheel dir is a whole zip, and a build record beside it is whole JSON
    about a wheel that is there."""
    import json

    for entry in (build / "cache" / "wheels").glob("[!.]*"):
        meta = json.loads((entry / "entry.json").read_text())
        assert sha256_file(entry / meta["wheel"]) == meta["sha256"], entry
    for wheel in (build / "wheels").glob("*"):
        if wheel.name.endswith(".whl.build.json"):
            json.loads(wheel.read_text())
            assert wheel.with_name(wheel.name.removesuffix(".build.json")).is_file(), wheel
            continue
        assert wheel.suffix == ".whl", f"a partial file in the wheel dir: {wheel}"
        with zipfile.ZipFile(wheel) as zf:
            assert zf.testzip() is None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_real_build_killed_at_a_random_point(sig: signal.Signals, marker: str,
                                            tmp_path: Path) -> None:
    """A real `rocmbuild build` (pip wheel of a local project whose setup.py runs a slow
    two-worker step) is signalled at a random point after its first command started: the
    exit is 128+N with one line and a hint (SIGKILL: killed), no descendant survives, the lock
    is free (a second build does not wait) and the cache and wheel dir hold nothing partial."""
    seed = random.randrange(1 << 30)
    delay = random.Random(seed).uniform(0.0, 2.5)
    why = f"seed {seed}, signal {sig.name} {delay:.2f}s after the first command started"
    recipe = slow_recipe(tmp_path)
    proc = start_build(recipe, tmp_path, "30")
    try:
        # rocmbuild and its first command (pip) carry the marker.
        assert wait_until(lambda: len(marked(marker)) >= 2, 60), why
        time.sleep(delay)
        sent = time.monotonic()
        os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.communicate()  # also closes the pipes of a build that ended on its own
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL, why
    else:
        assert proc.returncode == 128 + sig, f"{why}\n{err}"
        assert f"interrupted: stopped by {sig.name}" in err, f"{why}\n{err}"
        assert "hint:" in err and "Traceback" not in err, f"{why}\n{err}"
    # it does not wait for its commands (or the torch probe of another thread) to finish
    assert took < 10, f"{why}: exit {took:.1f}s after the signal"
    assert wait_until(lambda: not marked(marker), 5), f"{why}: survivors {marked(marker)}"
    assert_cache_consistent(tmp_path / "build")

    again = start_build(recipe, tmp_path, "0")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, f"{why}\n{err}"
    assert "waiting for" not in err, f"{why}: the lock was still held\n{err}"
    assert_cache_consistent(tmp_path / "build")
    assert len(list((tmp_path / "build" / "wheels").glob("*.whl"))) == 1


def test_run_from_a_thread_is_killed_when_the_process_is_interrupted(marker: str) -> None:
    """A command started from a worker thread (the build stage's torch probe does this) is
    killed by kill_all(), which the CLI calls when it is interrupted."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            run.run(["sh", "-c", "sleep 60 & sleep 60; wait"])
        except CommandFailed as exc:
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    assert wait_until(lambda: len(marked(marker)) >= 3, 20), marked(marker)
    run.kill_all()
    t.join(10)
    assert not t.is_alive()
    assert errors and errors[0].returncode != 0
    assert wait_until(lambda: not marked(marker), 5), marked(marker)


def test_a_waiter_names_the_lock_holder_and_gets_the_lock_when_it_is_released(
        tmp_path: Path) -> None:
    """Two real processes on one lock file: the second says whom it waits for (our pid), and
    takes the lock as soon as the first lets go."""
    from rocmbuild.core import lock

    path = tmp_path / "locks" / "k.lock"
    code = ("import sys; from pathlib import Path; from rocmbuild.core import lock, log; "
            "log.set_level(1)\n"
            f"with lock.held(Path({str(path)!r}), 'the test build'):\n    print('got it')")
    with lock.held(path, "the test build"):
        child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stderr is not None
        waiting = child.stderr.readline()
        assert f"waiting for the test build ({path}, held by pid {os.getpid()})" in waiting
        time.sleep(0.2)
        assert child.poll() is None, "the waiter did not wait"
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0 and out == "got it\n", err


HANGING_CLI = """
import sys, time
from rocmbuild import cli
from rocmbuild.commands import parser as cmdparser

def hang(args):
    ready = False
    while True:  # stands in for a cleanup that never ends (a leaked lock, a stuck pipe)
        try:  # "ready" inside: a signal right after it must not escape the loop
            if not ready:
                print("ready", flush=True)
                ready = True
            time.sleep(60)
        except KeyboardInterrupt:
            continue

parser = cmdparser.build_parser
def build_parser(only=None):
    p = parser(only)
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    sub.choices["doctor"].set_defaults(handler=hang)
    return p
cmdparser.build_parser = build_parser
sys.exit(cli.main(["doctor"]))
"""


def test_stop_signal_ends_rocmbuild_even_when_its_cleanup_hangs(tmp_path: Path) -> None:
    """The watchdog armed by a stop signal: rocmbuild's real CLI (cli.main, its signal handlers)
    with the doctor command's handler replaced by one that swallows KeyboardInterrupt forever
    (the stand-in for a hung cleanup) still exits 128+N within cli.STOP_GRACE_S, with the
    interrupted line and a hint."""
    from rocmbuild import cli

    proc = subprocess.Popen([sys.executable, "-c", HANGING_CLI], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=sigint_default)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "interrupted: stopped by SIGINT" in err and "hint:" in err, err
    assert "Traceback" not in err, err
    assert cli.STOP_GRACE_S - 1 < took < cli.STOP_GRACE_S + 5, took
