"""A pytest plugin for the upstream-test step (``-p <gate>.upstream_plugin``): writes one JSON
line per test outcome to ``--rb-log`` as it happens, and stops the session once ``--rb-deadline``
(a time.time() value) has passed, so a time-capped run still says what it reached. It runs inside
the validation venv; module level imports only the standard library."""

from __future__ import annotations

import json
import time
from typing import Any


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--rb-log", default="", help="rocmbuild: JSON lines of test outcomes")
    parser.addoption("--rb-deadline", type=float, default=0.0,
                     help="rocmbuild: stop starting tests after this time.time()")


def _write(config: Any, rec: dict[str, Any]) -> None:
    path = config.getoption("--rb-log")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


def pytest_runtest_logreport(report: Any) -> None:
    config = getattr(report, "config", None) or _CONFIG[0]
    outcome = report.outcome  # passed | failed | skipped
    if report.when == "call" or (report.when == "setup" and outcome != "passed") or (
            report.when == "teardown" and outcome == "failed"):
        msg = ""
        if outcome == "skipped" and isinstance(report.longrepr, tuple):
            msg = str(report.longrepr[2])
        elif outcome == "failed":
            lines = str(getattr(report, "longreprtext", "") or "").strip().splitlines()
            msg = lines[-1] if lines else ""
        _write(config, {"id": report.nodeid, "outcome": outcome, "when": report.when,
                        "duration": round(report.duration, 3), "message": msg[:300]})


_CONFIG: list[Any] = []


def pytest_configure(config: Any) -> None:
    _CONFIG[:] = [config]


def pytest_runtest_protocol(item: Any, nextitem: Any) -> bool | None:
    deadline = item.config.getoption("--rb-deadline")
    if deadline and time.time() > deadline:
        item.session.shouldstop = "rocmbuild: time cap reached"
        return True  # not run: reported as not reached
    return None
