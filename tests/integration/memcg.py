"""Real memory cgroups for tests and benchmarks (needs root): find a writable memory controller,
make a cgroup v1 child (or, with ``cgroup``, a v2 one where the host has no v1 memory controller)
with swap off, run a command inside it, read its OOM kill counter, and remove it (killing what is
left in it: the cgroup is ours alone)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path


def memory_mount() -> tuple[int, Path] | None:
    """(version, mount point) of a memory controller this process can write to."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    for want in ("cgroup", "cgroup2"):
        for line in mounts:
            left, _, right = line.partition(" - ")
            tail = right.split()
            if len(tail) < 3 or tail[0] != want:
                continue
            mnt = Path(left.split()[4])
            if want == "cgroup" and "memory" in tail[2].split(","):
                ok = os.access(mnt, os.W_OK) and (mnt / "memory.limit_in_bytes").exists()
                return (1, mnt) if ok else None
            if want == "cgroup2":
                ctl = mnt / "cgroup.subtree_control"
                if os.access(ctl, os.W_OK) and "memory" in ctl.read_text().split():
                    return 2, mnt
    return None


def v1_unavailable() -> str | None:
    """Why a cgroup v1 memory cgroup cannot be made here; None when it can."""
    if os.geteuid() != 0:
        return "needs root to create memory cgroups"
    found = memory_mount()
    if found is None or found[0] != 1:
        return "no writable cgroup v1 memory controller on this host"
    return None


def unavailable() -> str | None:
    """Why no memory cgroup (v1 or v2) can be made here; None when one can."""
    if os.geteuid() != 0:
        return "needs root to create memory cgroups"
    if memory_mount() is None:
        return "no writable memory controller (cgroup v1 or v2) on this host"
    return None


@contextlib.contextmanager
def v1_cgroup(prefix: str) -> Iterator[Path]:
    """A new cgroup v1 memory cgroup (no swap for it, no limit yet); removed afterwards. Check
    ``v1_unavailable()`` first."""
    found = memory_mount()
    assert found is not None and found[0] == 1, v1_unavailable()
    with _made(found, prefix) as cg:
        yield cg


@contextlib.contextmanager
def cgroup(prefix: str) -> Iterator[Path]:
    """A new memory cgroup of the host's kind, v1 or v2 (no swap for it, no limit yet); removed
    afterwards. Check ``unavailable()`` first."""
    found = memory_mount()
    assert found is not None, unavailable()
    with _made(found, prefix) as cg:
        yield cg


@contextlib.contextmanager
def _made(found: tuple[int, Path], prefix: str) -> Iterator[Path]:
    cg = found[1] / f"{prefix}-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        swap = cg / ("memory.swappiness" if found[0] == 1 else "memory.swap.max")
        if swap.exists():
            swap.write_text("0")
        yield cg
    finally:
        for _ in range(50):  # what a failed run left (ours alone: the cgroup is ours)
            for pid in (cg / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            try:
                cg.rmdir()
                break
            except OSError:  # busy until the killed processes are gone
                time.sleep(0.1)


def set_limit(cg: Path, limit: int) -> None:
    v1 = cg / "memory.limit_in_bytes"
    (v1 if v1.exists() else cg / "memory.max").write_text(str(limit))


def oom_kills(cg: Path) -> int:
    """The cgroup's ``oom_kill`` counter (v1 ``memory.oom_control``, v2 ``memory.events``)."""
    v1 = cg / "memory.oom_control"
    line = next(x for x in (v1 if v1.exists() else cg / "memory.events").read_text().splitlines()
                if x.startswith("oom_kill "))
    return int(line.split()[1])


def anon_bytes(cg: Path) -> int:
    """The cgroup's anonymous memory now (``memory.stat``: v1 ``total_rss``, v2 ``anon``)."""
    for line in (cg / "memory.stat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name in ("total_rss", "anon"):
            return int(value)
    return 0


def inside(cg: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` as a command that first moves itself into ``cg`` (its children follow)."""
    return ["sh", "-c", f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))} && exec "
            + " ".join(shlex.quote(a) for a in argv)]
