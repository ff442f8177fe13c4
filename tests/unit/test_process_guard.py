"""The guard in tests/unit/conftest.py, run for real in an inner pytest session (in this process):
every way of starting a process fails the test that did it and names that test, also when the
code under test swallows the error or a module-scoped fixture starts the process."""

from __future__ import annotations

from pathlib import Path

import pytest

INNER = """
import _posixsubprocess
import os
import subprocess

import pytest

WAYS = {
    "subprocess.Popen": lambda: subprocess.run(["true"]),
    "os.popen": lambda: os.popen("true"),
    "os.spawnv": lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"]),
    "_posixsubprocess.fork_exec": lambda: _posixsubprocess.fork_exec(),
    **{
        f"os.{name}": (lambda name=name: getattr(os, name)("/bin/true", ["true"]))
        for name in ("system", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl",
                     "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")
    },
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_way(way):
    WAYS[way]()


def test_swallowed():
    try:
        subprocess.check_output(["true"])
    except Exception:
        pass


@pytest.fixture(scope="module")
def built():
    return subprocess.check_output(["true"])


def test_module_fixture(built):
    pass


def test_in_process():
    assert sum([1, 2]) == 3
"""

WAYS = ["_posixsubprocess.fork_exec", "os.popen", "os.spawnv", "subprocess.Popen"] + [
    f"os.{name}" for name in (
        "system", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl", "execle", "execlp",
        "execlpe", "execv", "execve", "execvp", "execvpe")
]


def test_guard_fails_and_names_each_test_that_starts_a_process(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    pytester.makepyfile(test_inner=INNER)
    rec = pytester.inline_run("-p", "no:cacheprovider")
    reports = rec.getreports("pytest_runtest_logreport")
    failed = {r.nodeid: r.longreprtext for r in reports if r.failed}
    expected = {f"test_inner.py::test_way[{way}]" for way in WAYS} | {
        "test_inner.py::test_swallowed", "test_inner.py::test_module_fixture"}
    assert set(failed) == expected
    for nodeid, text in failed.items():
        # the inner guard's message (were it missing, this test's own guard would name this test)
        assert f"{nodeid} started a process" in text, text
        assert "move the test to tests/integration/" in text
    passed = [r.nodeid for r in reports if r.when == "call" and r.passed]
    assert passed == ["test_inner.py::test_in_process"]
