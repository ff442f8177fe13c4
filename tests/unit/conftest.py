"""Unit tests run in this process only: starting a process (subprocess, os.system, fork, exec,
posix_spawn) fails the test that did it. Tests that need real tools live in tests/integration/.

The guard wraps each unit test's setup, call and teardown (not just its body), so a module- or
session-scoped fixture that starts a process is caught too: an autouse fixture would be set up
after the wider-scoped fixtures it is meant to watch.
"""

from __future__ import annotations

import _posixsubprocess  # the fork+exec under subprocess and multiprocessing
import os
import subprocess
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import NoReturn

import pytest

OS_FUNCTIONS = (
    "system", "fork", "forkpty", "posix_spawn", "posix_spawnp",
    "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
)  # os.popen and os.spawn* go through subprocess.Popen and os.fork/os.exec*


@contextmanager
def no_processes(nodeid: str) -> Iterator[None]:
    """Make every way of starting a process fail ``nodeid`` (pytest.fail raises a
    BaseException, so an ``except Exception`` in the code under test cannot swallow it)."""

    def refuse(what: str) -> Callable[..., NoReturn]:
        def refused(*args: object, **kwargs: object) -> NoReturn:
            given = args[1:] if what == "subprocess.Popen" else args  # drop Popen's self
            command = given[0] if given else kwargs.get("args")
            pytest.fail(
                f"{nodeid} started a process ({what} {command!r}): unit tests run in-process only; "
                "move the test to tests/integration/ or do the work without a process"
            )

        return refused

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", refuse("subprocess.Popen"))
        mp.setattr(_posixsubprocess, "fork_exec", refuse("_posixsubprocess.fork_exec"))
        for name in OS_FUNCTIONS:
            if hasattr(os, name):
                mp.setattr(os, name, refuse(f"os.{name}"))
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with no_processes(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with no_processes(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with no_processes(item.nodeid):
        return (yield)
