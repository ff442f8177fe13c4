"""A compiler launcher that measures each unit: ``python memlog.py --out FILE <next> <args...>``.

It runs ``<next> <args...>`` (the compiler, or the next launcher: cuid.py, ccache) as its child,
waits for it with ``os.wait4`` and appends one JSON line to FILE: the command's output (the
argument after ``-o``), whether it is a compile unit (``-c``: one source to one object; a link
through the same compiler is not), its peak resident memory (``ru_maxrss``: the largest of the
child and the descendants it waited for, so a clang driver's ``-cc1`` counts), its wall time and
its exit status. A call that names no output (``-v``, ``-dumpversion``: a build's compiler
checks) writes nothing. Then it exits as the child did (the same code, or the same signal: an
OOM kill still reads as SIGKILL to ninja and to rocmbuild). It comes first in the launcher chain,
so it measures what the launchers after it start. It runs inside the build (cmake's
CMAKE_<LANG>_COMPILER_LAUNCHER; the pip-wheel backend's CC/CXX and HIP_CLANG_PATH wrapper
scripts) and imports nothing of rocmbuild.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def output_of(argv: list[str]) -> str:
    """The file the command writes (``-o FILE`` or ``-oFILE``); "" when it names none (or
    ``-o -``: standard output, as CMake's compiler checks write)."""
    for i, a in enumerate(argv[1:], 1):
        if a == "-o" and i + 1 < len(argv):
            return "" if argv[i + 1] == "-" else argv[i + 1]
        if a.startswith("-o") and len(a) > 2 and not a.startswith("-o-"):
            return a[2:]
    return ""


def is_unit(argv: list[str]) -> bool:
    """A compile unit: ``-c`` (compile, do not link). A link through the compiler driver is
    recorded too, but is not a unit."""
    return "-c" in argv[1:]


def record(argv: list[str], maxrss_kib: int, seconds: float, status: int) -> str:
    """The JSON line for one command (``status``: exit code, or minus the signal number)."""
    return json.dumps({"out": output_of(argv), "unit": is_unit(argv), "rss": maxrss_kib * 1024,
                       "s": round(seconds, 3), "rc": status}, sort_keys=True) + "\n"


def append(path: str, line: str) -> None:
    """One write of one short line with O_APPEND: lines of parallel units never mix."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # measuring must never fail a compile


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[0] != "--out":
        sys.stderr.write("usage: memlog.py --out FILE <compiler> <args...>\n")
        raise SystemExit(2)
    out, cmd = argv[1], argv[2:]
    start = time.monotonic()
    try:
        pid = os.posix_spawnp(cmd[0], cmd, os.environ)
    except OSError as exc:
        sys.stderr.write(f"memlog.py: cannot run {cmd[0]}: {exc.strerror or exc}\n")
        raise SystemExit(127) from None
    # ninja interrupts a unit's whole process group: the compiler gets the signal too, and its
    # end decides (passed on below); the child was started with the default handlers
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    _, wstatus, usage = os.wait4(pid, 0)  # retried after a handled signal (PEP 475)
    status = os.waitstatus_to_exitcode(wstatus)
    if output_of(cmd):  # else a compiler check (-v, -dumpversion): nothing to record
        append(out, record(cmd, usage.ru_maxrss, time.monotonic() - start, status))
    if status < 0:  # die of the same signal
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be caught anyway
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    raise SystemExit(status)


if __name__ == "__main__":
    main()
