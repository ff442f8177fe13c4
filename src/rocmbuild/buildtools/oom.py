"""A compile killed by the OOM killer: detect it, and the job count to retry with.

A build child that failed is called OOM-killed when the kernel's OOM kill counter of the build's
memory cgroup rose while it ran (cgroup v1 ``memory.oom_control``, v2 ``memory.events``: the
``oom_kill`` line of the process's own cgroup, which counts its kills whichever parent's limit
was hit; a parent's would also count a sibling's), or when its output says a compiler died of
SIGKILL (gcc's "Killed signal terminated program", a shell's "Killed", "signal 9", Python's
``Signals.SIGKILL``, exit status 137 or -9) or it exited 137 itself. Ninja's last ``FAILED:``
line names the unit. The build stage then re-runs the failing command once at half the jobs in
the same tree (ninja and torch's cpp_extension resume: finished units are not compiled again);
see docs/long-builds.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.host import cgroups

_KILLED = re.compile(
    r"\bKilled\b|\bSIGKILL\b|\bsignal 9\b|\[code=(?:137|-9)\]|"
    r"(?:exit(?:ed)?(?: with)?|status|code)[ =:]*(?:137|-9)\b")
_FAILED = re.compile(r"^FAILED: (?:\[code=-?\d+\] )?(\S.*)$")  # ninja >= 1.12 shows the code
JOB_VARS = ("MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL")
"""Set to the halved count on a retry, whether the recipe set them or not (MAX_JOBS: torch's
cpp_extension and the setup.py builds that follow it; CMake's ``--build``)."""


@dataclass(frozen=True)
class OomKill:
    unit: str
    """The unit ninja reported as FAILED ("" when the output names none)."""
    evidence: str
    """Why this is an OOM kill, for messages."""


def oom_kills(root: Path = Path("/")) -> int:
    """The ``oom_kill`` counter of this process's own memory cgroup (v1 and v2 each, where both
    are mounted; only a change of it means something). 0 where none can be read.

    The kernel counts a kill in the killed task's own cgroup whichever limit was hit (v2 also
    adds it to every parent), so the own cgroup sees every kill of a build child, and a parent's
    counter would also rise for a sibling's kill (another job of the same Slurm node or slice)."""
    total = 0
    seen: set[int] = set()
    for cg in cgroups.cgroup_dirs("memory", root):
        if cg.version in seen:  # own first, then the parents
            continue
        seen.add(cg.version)
        name = "memory.oom_control" if cg.version == 1 else "memory.events"
        try:
            text = (cg.path / name).read_text()
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                total += int(value)
    return total


def detect(output: str, returncode: int | None, kills_before: int, kills_after: int,
           tree: Path | None = None) -> OomKill | None:
    """An ``OomKill`` when a failed command's ``output`` (only that command's), exit code or the
    cgroups' OOM kill counter say a process was OOM-killed; None otherwise. ``tree``: shown
    unit paths are made relative to it."""
    lines = output.splitlines()
    failed = [m.group(1).strip() for ln in lines if (m := _FAILED.match(ln.strip()))]
    unit = failed[-1] if failed else ""
    if tree is not None and unit.startswith(str(tree) + "/"):
        unit = unit[len(str(tree)) + 1:]
    if kills_after > kills_before:
        n = kills_after - kills_before
        return OomKill(unit, f"the memory cgroup's oom_kill counter rose by {n}")
    said = next((ln.strip() for ln in reversed(lines) if _KILLED.search(ln)), None)
    if said is not None:
        return OomKill(unit, f"the build said {said[:160]!r}")
    if returncode in (137, -9):
        return OomKill(unit, f"the build exited with {returncode} (SIGKILL)")
    return None


def half(n: int) -> int:
    return max(1, n // 2)


def env_with_jobs(env: Mapping[str, str], old: int, new: int) -> dict[str, str]:
    """``env`` with ``JOB_VARS`` set to ``new``, and every other variable whose name says jobs
    or parallel and whose value is ``old`` (the plan's ``{jobs}``) too."""
    out = dict(env)
    for name, value in env.items():
        if value.strip() == str(old) and re.search(r"JOBS|PARALLEL", name):
            out[name] = str(new)
    for name in JOB_VARS:
        out[name] = str(new)
    return out


def argv_with_jobs(argv: Sequence[str], old: int, new: int) -> list[str]:
    """``argv`` with ``-j<old>``, ``-j <old>``, ``--parallel <old>`` and ``--parallel=<old>``
    rewritten to ``new``."""
    out = list(argv)
    for i, a in enumerate(out):
        if a in (f"-j{old}", f"--parallel={old}", f"--jobs={old}"):
            out[i] = a[: -len(str(old))] + str(new)
        elif a == str(old) and i > 0 and out[i - 1] in ("-j", "--parallel", "--jobs"):
            out[i] = str(new)
    return out
