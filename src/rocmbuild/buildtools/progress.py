"""Live progress of a build from its output: ninja's ``[N/M]`` status lines (cmake builds, and
setup.py builds that use ninja through torch's cpp_extension), with the units running, the
elapsed time, an ETA and the peak memory of the build's processes.

- ``NINJA_STATUS``: the build stage sets it in the child's environment so ninja prints
  ``[finished/total running] `` (``parse`` also reads ninja's default ``[N/M] ``).
- ``Eta``: pure arithmetic. Once ``MIN_UNITS`` units finished: the measured rate (remaining units
  x seconds per unit since the first one finished). With a previous build's ``.ninja_log`` of
  the same recipe: the previous durations of the units not yet finished (matched by output path
  in ninja's lines) / jobs. With both, weighted by the fraction done.
- ``read_ninja_log``: a ``.ninja_log`` (v5/v6) -> output -> seconds (untrusted input: bad lines
  are skipped).
- ``Display``: one live line (rich) on a terminal; elsewhere (logs, CI, Slurm) a plain line every
  ROCMBUILD_PROGRESS_SECONDS (default 30) and at each 10 % of the units.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from rocmbuild.core import log, options

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

NINJA_STATUS = "[%f/%t %r] "
"""ninja's status prefix as rocmbuild asks for it: finished/total, then the edges running."""
STATUS = re.compile(r"^\s*\[(\d+)/(\d+)(?: (\d+))?\]")
MIN_UNITS = 3
"""Finished units before the measured rate gives an ETA."""
MAX_LOG = 64 << 20  # bytes of a .ninja_log read back
GiB = 1024**3


@dataclass(frozen=True)
class Status:
    done: int
    total: int
    running: int | None
    """Edges running (from ``%r``); None with ninja's default status."""


def parse(line: str) -> Status | None:
    m = STATUS.match(line)
    if not m:
        return None
    return Status(int(m[1]), int(m[2]), int(m[3]) if m[3] is not None else None)


def read_ninja_log(text: str) -> dict[str, float]:
    """output -> seconds from a ``.ninja_log`` (``# ninja log v5``/``v6``: start ms, end ms,
    mtime, output, command hash, tab-separated); the last entry of an output wins."""
    times: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 5:
            continue
        try:
            start, end = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        if 0 <= start <= end and parts[3]:
            times[parts[3]] = (end - start) / 1000
    return times


def load_ninja_log(path: Path) -> dict[str, float]:
    """``read_ninja_log`` of a file ({} when it is missing, unreadable or too large)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_LOG:
            return {}
        return read_ninja_log(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}


def duration(seconds: float) -> str:
    """``45s``, ``12m03s``, ``3h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Eta:
    """The ETA of one build from its status lines (pure: times are passed in)."""

    def __init__(self, jobs: int, previous: Mapping[str, float] | None = None) -> None:
        self.jobs = max(1, jobs)
        self.previous = dict(previous or {})
        self.previous_total = sum(self.previous.values())
        self.status: Status | None = None
        self.first: tuple[float, int] | None = None  # (time, done) at the first status line
        self.done_work = 0.0  # previous seconds of the units finished now
        self.matched: set[str] = set()

    def observe(self, now: float, status: Status, line: str = "") -> None:
        last = self.status
        if last is None or status.total != last.total or status.done < last.done:
            self.first = (now, status.done)  # a new ninja run (setup.py: one per extension)
        self.status = status
        if self.previous:
            for token in line.split()[1:]:
                out = token.strip("'\"")
                if out in self.previous and out not in self.matched:
                    self.matched.add(out)
                    self.done_work += self.previous[out]

    def rate_eta(self, now: float) -> float | None:
        """Remaining units x measured seconds per unit; None before MIN_UNITS finished."""
        s, first = self.status, self.first
        if s is None or first is None or s.done - first[1] < MIN_UNITS:
            return None
        return (s.total - s.done) * (now - first[0]) / (s.done - first[1])

    def previous_eta(self) -> float | None:
        """The previous build's durations of the units not finished yet / jobs."""
        s = self.status
        if not self.previous or s is None:
            return None
        total = self.previous_total
        if self.matched:
            left = max(0.0, total - self.done_work)
        else:  # ninja's lines name no output of the previous log: its mean unit time
            left = total / len(self.previous) * (s.total - s.done)
        return left / self.jobs

    def estimate(self, now: float) -> tuple[float | None, str]:
        """(seconds left, how: ``rate``, ``previous build`` or ``rate + previous build``)."""
        rate, prev = self.rate_eta(now), self.previous_eta()
        s = self.status
        if rate is not None and prev is not None and s is not None and s.total:
            f = s.done / s.total
            return f * rate + (1 - f) * prev, "rate + previous build"
        if rate is not None:
            return rate, "rate"
        if prev is not None:
            return prev, "previous build"
        return None, ""


def tree_rss(pid: int, proc: Path = Path("/proc")) -> int:
    """Resident bytes of ``pid``'s descendants (not ``pid`` itself), from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return 0
    for e in entries:
        try:
            stat = (proc / e / "stat").read_text()
            statm = (proc / e / "statm").read_text().split()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) < 2 or len(statm) < 2:
            continue
        children.setdefault(int(fields[1]), []).append(int(e))
        rss[int(e)] = int(statm[1]) * page
    total, todo = 0, list(children.get(pid, []))
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


class Display:
    """Turns a build's output lines into progress. On a terminal: one live line (a spinner and
    the line count until ninja's first status line, then a bar with N/M, running, elapsed, ETA
    and peak memory). Elsewhere: a plain line every ``every`` seconds and at each 10 % of the
    units (``every`` 0: no plain lines at all). ``emit`` and ``tty`` are for tests."""

    def __init__(self, label: str, jobs: int, previous: Mapping[str, float] | None = None, *,
                 emit: Callable[[str], None] | None = None, tty: bool | None = None,
                 every: float | None = None, sample: float = 2.0) -> None:
        self.label = label
        self.eta = Eta(jobs, previous)
        self.emit = emit or log.info
        self.every = options.env_float("ROCMBUILD_PROGRESS_SECONDS", 30.0) \
            if every is None else every
        self.sample = sample
        self.lines = 0
        self.peak = 0
        self.start = time.monotonic()
        self.tenth = 0  # the last 10 % step reported
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        live = log.level() == 1 and (log.is_tty() if tty is None else tty)
        if live:
            from rich.progress import (  # here: a build without a terminal never needs it
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
            )

            self.bar = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                TextColumn("{task.fields[count]}"), console=log.console, transient=True)
            self.task = self.bar.add_task(label, total=None, count="0 lines")
            self.bar.start()
        self.plain = not live and self.every > 0 and (log.level() == 1 or emit is not None)
        self.ticker = threading.Thread(target=self._tick, daemon=True, name="progress")
        self.ticker.start()

    def line(self, now: float | None = None) -> str:
        """The progress as one line: ``[412/2775] 14 %, 16 running, 12m03s elapsed, ETA 1h10m
        (rate), peak 23.4 GiB`` (before ninja's first status line: the output's line count)."""
        now = time.monotonic() if now is None else now
        s = self.eta.status
        parts = [f"{self.lines} lines" if s is None else
                 f"[{s.done}/{s.total}] {100 * s.done // max(1, s.total)} %"]
        if s is not None and s.running is not None:
            parts.append(f"{s.running} running")
        parts.append(f"{duration(now - self.start)} elapsed")
        if s is not None:
            left, how = self.eta.estimate(now)
            if left is not None:
                parts.append(f"ETA {duration(left)} ({how})")
        if self.peak:
            parts.append(f"peak {self.peak / GiB:.1f} GiB")
        return ", ".join(parts)

    def _say(self) -> None:
        self.emit(f"  {escape(self.label)}: {escape(self.line())}")

    def _tick(self) -> None:
        """Samples memory every ``sample`` seconds; a plain line every ``every`` seconds, also
        while a long compile step prints nothing."""
        last = time.monotonic()
        step = min(self.sample, self.every) if self.plain else self.sample
        while not self.done.wait(step):
            rss = tree_rss(os.getpid())
            with self.lock:
                self.peak = max(self.peak, rss)
                if self.bar is not None and self.task is not None:
                    self.bar.update(self.task, count=self.line())
                elif self.plain and time.monotonic() - last >= self.every:
                    last = time.monotonic()
                    self._say()

    def __call__(self, line: str) -> None:
        with self.lock:
            self.lines += 1
            s = parse(line)
            if s is not None:
                self.eta.observe(time.monotonic(), s, line)
            if self.bar is not None and self.task is not None:
                if s is not None:
                    self.bar.update(self.task, completed=s.done, total=s.total, count=self.line())
                elif self.eta.status is None:
                    self.bar.update(self.task, count=f"{self.lines} lines")
            elif s is not None and self.plain and s.total:
                tenth = 10 * s.done // s.total
                if tenth > self.tenth and s.done < s.total:
                    self.tenth = tenth
                    self._say()
                elif tenth < self.tenth:  # a new ninja run
                    self.tenth = tenth

    def stop(self) -> None:
        self.done.set()
        self.ticker.join()
        if self.bar is not None:
            self.bar.stop()
