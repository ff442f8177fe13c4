"""The one subprocess helper. Nothing else in rocmbuild calls ``subprocess``.

``run()`` logs the quoted command, cwd and environment diff, streams output to an optional line
callback, the console (at -v) and a log file, times the call, and raises ``CommandFailed`` (or the
error class given) carrying the log tail, the log path and the tool's own last meaningful error
line (``cause``).

Process tree. Every command starts as the leader of a new session and process group; what it
starts (pip -> setup.py -> ninja -> clang) stays in that group, so killing the group reaches the
grandchildren, which a signal to the direct child or PR_SET_PDEATHSIG (per direct child) would
not. When rocmbuild is interrupted (SIGINT, SIGTERM) or a timeout fires, ``run()`` kills the
group; when a command ends, members it left behind are killed before it is reaped. Against
SIGKILL of rocmbuild itself (no handler runs) a small supervisor, the *guardian* (``GUARDIAN``,
a few lines of Python, one per rocmbuild process, started with the first command), holds the
read end of a pipe and the list of groups running now; when rocmbuild dies by any means the pipe
ends and the guardian kills those groups. One guardian per process costs one interpreter start
per rocmbuild run instead of one per command.

Killing a command means its session, not only its group: ninja starts every job in a process
group of its own (so that a terminal's Ctrl-C reaches ninja alone), and a SIGKILL to ninja's
group would leave the compilers running. They stay in the command's session, whose id is the
command's pid, so both kills (here and in the guardian) also SIGKILL every process whose
``/proc/<pid>/stat`` names that session. A descendant that starts its own session (setsid, as
daemons such as sccache's server do) is out of reach, on purpose.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rocmbuild.core import log
from rocmbuild.core.errors import CommandFailed
from rocmbuild.core.log import redact

TAIL_LINES = 30
CAUSE_LINES = 300  # how far back the cause is looked for (a compiler error comes before
                   # pip's and ninja's summaries)
_POLL = 0.5  # seconds: how often a silent command is checked for its timeout and its end

GUARDIAN = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is rocmbuild's to handle
groups = set()
for line in sys.stdin:                          # "+pgid" when a command starts, "-pgid" after
    pgid = int(line[1:])
    groups.add(pgid) if line[0] == "+" else groups.discard(pgid)
for pgid in groups:                             # the pipe ended: rocmbuild is gone
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
for _ in range(3) if groups else ():            # ninja's jobs: own groups, same session
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[3]) in groups:
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
"""

# Process groups of commands running now (one per run() call in flight, any thread).
_live: set[int] = set()
_live_lock = threading.Lock()


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    duration: float
    output: str  # full output when capture=True, else the last TAIL_LINES lines
    log_path: Path | None
    timed_out: bool = False
    cause: str = ""
    """The tool's own last meaningful error line (``last_cause``), "" when it printed none."""


def quote(argv: Sequence[str]) -> str:
    return shlex.join(str(a) for a in argv)


def env_diff(env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables ``env`` sets or changes relative to this process's environment."""
    if env is None:
        return {}
    base = os.environ
    return {k: v for k, v in sorted(env.items()) if base.get(k) != v}


def env_withheld(env: Mapping[str, str] | None) -> list[str]:
    """Names of this process's variables that ``env`` leaves out (a build's allow-list)."""
    return [] if env is None else sorted(k for k in os.environ if k not in env)


_SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|API_?KEY|CREDENTIAL|AUTH", re.I)


def env_line(name: str, value: str) -> str:
    """``NAME=value`` for a log: a URL's user:password masked, the whole value when the name
    says it is a secret."""
    return f"{name}={'***' if _SECRET_NAME.search(name) else redact(value)}"


# What tools print when they say why they failed; the last such line is the cause.
_CAUSE = re.compile("|".join((
    r"^(fatal|FATAL): ",                                       # git
    r"^CMake Error\b",                                         # cmake
    r"^curl: \(\d+\)",                                         # curl
    r"^\S*:(\d+:){1,2} (fatal )?error: ",                      # clang/gcc: file:line:col: error:
    r"^(clang|hipcc|gcc|g\+\+|c\+\+|ld(\.lld)?|ninja|make)\S*: (fatal )?error\b",
    r"^([A-Za-z_][\w.]*(Error|Exception)): ",                  # a Python exception
    r"^(error|Error|ERROR)\b",                                 # pip, setuptools, the rest
)))
# Lines that say that something failed, not why (git's and pip's follow-ups, build drivers'
# summaries), and framing: an earlier line is the cause.
_GENERIC = re.compile("|".join((
    r"Could not read from remote repository|Please make sure you have the correct access",
    r"^and the repository exists", r"clone of '.*' into submodule path .* failed",
    r"^Failed to clone '", r"Failed to recurse into submodule",
    r"Build files have not been generated|Configuring incomplete|Generating done",
    r"Failed building wheel|Could not build wheels|subprocess-exited-with-error",
    r"metadata-generation-failed|^Failed to build |did not run successfully|^exit code: \d+$",
    r"Failed to build one or more wheels|CalledProcessError: Command|returned non-zero exit",
    r"\[end of output\]|^\[\d+ lines of output\]|lines of output\]$",
    r"^\d+ errors? generated\.|build stopped: subcommand failed|^make(\[\d+\])?: \*\*\*",
    r"^note: |^hint: |^See above|^\[notice\]|^Traceback \(most recent|^File \"|^\^+$",
    r"^[-=*#~│╰╭×─>\s]*$",
)))


def last_cause(text: str) -> str:
    """The tool's own last meaningful error line in ``text`` (its output): the last line that
    looks like an error (``fatal: ...``, ``CMake Error at ...``, ``ERROR: ...``, a compiler's
    ``file:1:2: error: ...``, a Python exception), skipping follow-ups that only repeat that
    something failed; failing that, the last line that is not such noise; "" for none. Stripped,
    a URL's user:password masked, cut to 300 characters."""
    lines = [ln.strip().lstrip("│╰─> ").strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not _GENERIC.search(ln)]
    causes = [i for i, ln in enumerate(lines) if _CAUSE.search(ln)]
    if causes:
        i = causes[-1]
        line = lines[i]
        if line.endswith(":") and i + 1 < len(lines):  # CMake Error at f:3 (project):\n  why
            line = f"{line} {lines[i + 1]}"
        return _cut(line)
    return _cut(lines[-1]) if lines else ""


def _cut(line: str, width: int = 300) -> str:
    line = redact(line)  # a URL's user:password never reaches a message
    return line if len(line) <= width else line[: width - 3] + "..."


def _kill_group(pgid: int, session: bool = True) -> None:
    """SIGKILL a command's group and, with ``session``, every other process of its session
    (``pgid`` is both: the command leads its own session), such as ninja's jobs in their own
    groups. The session takes a scan of /proc: a command that ended by itself (its output
    ended, its jobs waited for) needs only its group's leftovers killed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if not session:
        return
    for _ in range(3):  # again for what a member forked while it was being killed
        members = session_members(pgid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def session_members(sid: int) -> list[int]:
    """Live processes (not zombies) of session ``sid``, read from ``/proc/<pid>/stat``."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                # pid (comm) state ppid pgrp session ...; comm may hold ")" and spaces
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != b"Z":
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_all() -> None:
    """Kill the process group of every command running now (for the CLI's signal handling)."""
    with _live_lock:
        groups = list(_live)
    for pgid in groups:
        _kill_group(pgid)


_guardian: subprocess.Popen[str] | None = None


def _start_guardian() -> None:
    """Start the guardian when none runs (the first command, or it died), telling it the groups
    running now. Called before a command starts: a SIGKILL between the command's start and the
    guardian's start would leave that command's tree unguarded (a loaded machine can spend a
    second starting an interpreter); what is left is one pipe write after the start."""
    global _guardian
    with _live_lock:
        if _guardian is not None and _guardian.poll() is None:
            return
        try:
            _guardian = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARDIAN], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                start_new_session=True, env={}, cwd="/")
            atexit.register(_stop_guardian, _guardian)
            assert _guardian.stdin is not None
            for g in _live:
                _guardian.stdin.write(f"+{g}\n")
            _guardian.stdin.flush()
        except OSError as exc:  # cannot start python again
            log.debug(f"the process guardian is not available: {exc}")


def _guard(sign: str, pgid: int) -> None:
    """Tell the guardian that group ``pgid`` started (+) or ended (-)."""
    with _live_lock:
        if sign == "+":
            _live.add(pgid)
        else:
            _live.discard(pgid)
    if sign == "+":
        _start_guardian()  # normally a no-op: it was started before the command
    with _live_lock:
        try:
            if _guardian is not None and _guardian.poll() is None:
                assert _guardian.stdin is not None
                _guardian.stdin.write(f"{sign}{pgid}\n")
                _guardian.stdin.flush()
        except OSError as exc:  # the guardian is gone
            log.debug(f"the process guardian is not available: {exc}")


def _stop_guardian(guardian: subprocess.Popen[str]) -> None:
    """At a normal exit: end the guardian's pipe (it kills nothing: no group is registered)."""
    with contextlib.suppress(OSError):
        if guardian.stdin is not None:
            guardian.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        guardian.wait(timeout=5)


def _exited(pid: int, block: bool) -> bool:
    """Whether ``pid`` (our child) has exited, without reaping it: a zombie leader keeps its
    process group id reserved, so the group can still be killed safely."""
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    try:
        return os.waitid(os.P_PID, pid, flags) is not None
    except ChildProcessError:
        return True


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    on_line: Callable[[str], None] | None = None,
    capture: bool = False,
    check: bool = True,
    timeout: float | None = None,
    error: type[CommandFailed] = CommandFailed,
    hint: str | None = None,
    stdin: str | None = None,
    wrap: Sequence[str] = (),
) -> Completed:
    """Run ``argv``; stdout and stderr are merged. ``env`` is the *full* environment
    (None: inherit). ``timeout`` (seconds) kills the command and its descendants even when it
    prints nothing.

    Raises ``error`` (a CommandFailed subclass) when the command exits non-zero or times out and
    ``check``, or when the program is missing. Whatever ends ``run`` early (an exception, a
    signal turned into one) kills the command's whole process group first.

    ``wrap`` is put before ``argv`` when starting it (``no_network().prefix``); the log shows
    it, messages name the command itself.
    """
    args = tuple(str(a) for a in argv)
    started = (*wrap, *args)
    lp = Path(log_path) if log_path else None
    logf = _open_log(lp, started, cwd, env)
    log.debug(f"$ {redact(quote(started))}" + (f"  (in {cwd})" if cwd else ""))
    tail: collections.deque[str] = collections.deque(maxlen=CAUSE_LINES)
    lines: list[str] = []
    start = time.monotonic()
    timed_out = False
    _start_guardian()
    try:
        proc = _start(started, args[0], cwd, env, stdin is not None, error, hint, lp)
        pgid = proc.pid  # the command leads its own group
        _guard("+", pgid)
        lines_q: queue.SimpleQueue[str | None] = queue.SimpleQueue()

        def read() -> None:
            assert proc.stdout is not None
            with contextlib.suppress(ValueError, OSError):  # closed under us at the end
                for raw in proc.stdout:
                    lines_q.put(raw.rstrip("\n"))
            lines_q.put(None)

        reader = threading.Thread(target=read, name=f"run:{Path(args[0]).name}", daemon=True)
        outcome = "raised"  # until the loop below ends by the end of output or a timeout
        try:
            reader.start()
            if stdin is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(stdin)
                    proc.stdin.close()
            outcome = _pump(proc, lines_q, start + timeout if timeout else None, tail,
                            lines if capture else None, logf, on_line)
            timed_out = outcome == "timeout"
        finally:
            # However this ends (the end of output, a timeout, an exception such as a signal
            # turned into KeyboardInterrupt): nothing the command started outlives this call.
            # Kill first, then close the pipe: closing it while the reader blocks on it would
            # wait for the command.
            try:
                if outcome == "eof":
                    _exited(proc.pid, block=True)  # the end of output: the leader ends too
            finally:
                if outcome == "raised" and isinstance(sys.exc_info()[1], KeyboardInterrupt):
                    kill_all()  # rocmbuild is stopping: commands of other threads too (a
                    # probe that a `finally` would otherwise wait for)
                # the leader is not reaped yet: its group id is still ours
                _kill_group(pgid, session=outcome != "eof")
                rc = proc.wait()
                _guard("-", pgid)
            reader.join(timeout=5)
            if not reader.is_alive() and proc.stdout is not None:
                proc.stdout.close()
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
    finally:
        duration = time.monotonic() - start
        if logf is not None:
            if timed_out:
                logf.write(f"# killed: no end after {timeout:g}s\n")
            logf.write(f"# exit after {duration:.2f}s\n")
            logf.close()
    cause = last_cause("\n".join(tail))
    short = list(tail)[-TAIL_LINES:]
    result = Completed(args, rc, duration, "\n".join(lines if capture else short), lp,
                       timed_out, cause)
    if check and (rc != 0 or timed_out):
        name = Path(args[0]).name
        what = (f"{name} did not finish within {timeout:g}s and was killed with its children"
                if timed_out else f"{name} exited with code {rc} after {duration:.1f}s")
        raise error(
            what + (f": {cause}" if cause else "") + (f"; full log: {lp}" if lp else ""),
            hint=hint or (f"read {lp}" if lp else None),
            # indented: the tool's own "error: ..." lines are not rocmbuild's error line
            detail="\n".join(f"  {line}" for line in short),
            returncode=rc, log_path=str(lp) if lp else None)
    return result


def _open_log(lp: Path | None, started: tuple[str, ...], cwd: str | os.PathLike[str] | None,
              env: Mapping[str, str] | None) -> TextIO | None:
    """The command's log file, appended to, after its command line, cwd and environment."""
    if lp is None:
        return None
    lp.parent.mkdir(parents=True, exist_ok=True)
    logf = open(lp, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
    logf.write(f"$ {redact(quote(started))}\n# cwd: {Path(cwd or '.').resolve()}\n")
    for k, v in env_diff(env).items():
        logf.write(f"# env: {env_line(k, v)}\n")
    if withheld := env_withheld(env):
        logf.write(f"# env withheld: {' '.join(withheld)}\n")
    logf.flush()
    return logf


def _start(started: tuple[str, ...], name: str, cwd: str | os.PathLike[str] | None,
           env: Mapping[str, str] | None, stdin: bool, error: type[CommandFailed],
           hint: str | None, lp: Path | None) -> subprocess.Popen[str]:
    """``started`` in a new session, output in one pipe; ``error`` (127, 126) if it can't run."""
    try:
        return subprocess.Popen(
            started, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
            start_new_session=True)
    except FileNotFoundError as exc:
        missing = exc.filename is not None and str(exc.filename) != name
        raise error(
            f"{name}: " + (f"cannot run in {cwd}: no such directory" if missing
                           else "command not found"),
            hint=hint or ("check that the working directory exists" if missing
                          else f"install {Path(name).name} or put it on PATH"),
            returncode=127, log_path=str(lp) if lp else None) from exc
    except OSError as exc:  # not executable, not a program, cwd not a directory, ...
        raise error(f"{name}: cannot run: {exc.strerror or exc}",
                    hint=hint or f"check that {name} is an executable program",
                    returncode=126, log_path=str(lp) if lp else None) from exc


def _pump(proc: subprocess.Popen[str], lines_q: queue.SimpleQueue[str | None],
          deadline: float | None, tail: collections.deque[str], lines: list[str] | None,
          logf: TextIO | None, on_line: Callable[[str], None] | None) -> str:
    """Each output line to ``tail``, ``lines``, the log, ``on_line`` and (at -v) the console,
    until the output ends ("eof") or ``deadline`` passes ("timeout")."""
    ended = False
    while True:
        wait = _POLL if deadline is None else min(_POLL, max(0.0, deadline - time.monotonic()))
        try:
            line = lines_q.get(timeout=wait)
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            if not ended and _exited(proc.pid, block=False):
                # It exited, but something it left behind holds the pipe open: kill that
                # (the command leads its own group), then read what is left until the end.
                ended = True
                _kill_group(proc.pid)
            continue
        if line is None:
            return "eof"
        tail.append(line)
        if lines is not None:
            lines.append(line)
        if logf is not None:
            logf.write(redact(line) + "\n")
        if on_line is not None:
            on_line(line)
        if log.level() >= 2:
            log.console.print(line, markup=False, highlight=False)


@dataclass(frozen=True)
class NoNetwork:
    """How this machine runs a command without network (``no_network()``)."""

    prefix: tuple[str, ...]
    """Put before a command's argv; () when no way works here."""
    how: str
    """For people: which way (``unshare --net``, as root; or a user namespace)."""
    why_not: str = ""
    """When ``prefix`` is empty: what each way said."""


_no_network: NoNetwork | None = None
_no_network_lock = threading.Lock()


def no_network() -> NoNetwork:
    """A new network namespace for a command (only a loopback, down): ``unshare --net`` when
    running as root, else ``unshare --net --map-root-user`` (an unprivileged user namespace).
    Each way is tried once per process with ``true``; the first that works is kept."""
    global _no_network
    with _no_network_lock:
        if _no_network is not None:
            return _no_network
        ways: list[tuple[tuple[str, ...], str]] = []
        if os.geteuid() == 0:
            ways.append((("unshare", "--net"), "unshare --net (root)"))
        ways.append((("unshare", "--net", "--map-root-user"),
                     "unshare --net --map-root-user (user namespace)"))
        failed: list[str] = []
        for prefix, how in ways:
            try:
                res = run([*prefix, "true"], capture=True, check=False, timeout=30)
            except CommandFailed as exc:  # unshare is not installed
                failed.append(f"{quote(prefix)}: {exc.message}")
                continue
            if res.returncode == 0:
                _no_network = NoNetwork(prefix, how)
                return _no_network
            failed.append(f"{quote(prefix)}: {res.cause or res.output.strip() or res.returncode}")
        _no_network = NoNetwork((), "", "; ".join(failed))
        return _no_network
