"""The one subprocess helper. Nothing else in rocmbuild calls ``subprocess``.

``run()`` logs the quoted command, cwd and environment diff, streams output to an optional line
callback, the console (at -v) and a log file, times the call, and raises ``CommandFailed`` (or the
error class given) carrying the log tail and the log path.
"""

from __future__ import annotations

import collections
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmbuild import log
from rocmbuild.errors import CommandFailed

TAIL_LINES = 30


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    duration: float
    output: str  # full output when capture=True, else the last TAIL_LINES lines
    log_path: Path | None


def quote(argv: Sequence[str]) -> str:
    return shlex.join(str(a) for a in argv)


def env_diff(env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables ``env`` sets or changes relative to this process's environment."""
    if env is None:
        return {}
    base = os.environ
    return {k: v for k, v in sorted(env.items()) if base.get(k) != v}


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
) -> Completed:
    """Run ``argv``; stdout and stderr are merged. ``env`` is the *full* environment
    (None: inherit).

    Raises ``error`` (a CommandFailed subclass) when the command exits non-zero and ``check``,
    or when the program is missing.
    """
    args = tuple(str(a) for a in argv)
    logf = None
    lp = Path(log_path) if log_path else None
    if lp is not None:
        lp.parent.mkdir(parents=True, exist_ok=True)
        logf = open(lp, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        logf.write(f"$ {quote(args)}\n# cwd: {Path(cwd or '.').resolve()}\n")
        for k, v in env_diff(env).items():
            logf.write(f"# env: {k}={v}\n")
        logf.flush()
    log.debug(f"$ {quote(args)}" + (f"  (in {cwd})" if cwd else ""))
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    lines: list[str] = []
    start = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(
                args,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except FileNotFoundError as exc:
            raise error(
                f"{args[0]}: command not found",
                hint=hint or f"install {Path(args[0]).name} or put it on PATH",
                returncode=127,
                log_path=str(lp) if lp else None,
            ) from exc
        except OSError as exc:  # not executable, not a program, cwd missing, ...
            raise error(
                f"{args[0]}: cannot run: {exc.strerror or exc}",
                hint=hint or f"check that {args[0]} is an executable program",
                returncode=126,
                log_path=str(lp) if lp else None,
            ) from exc
        with proc:
            if stdin is not None and proc.stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.close()
            assert proc.stdout is not None
            deadline = start + timeout if timeout else None
            for line in proc.stdout:
                line = line.rstrip("\n")
                tail.append(line)
                if capture:
                    lines.append(line)
                if logf is not None:
                    logf.write(line + "\n")
                if on_line is not None:
                    on_line(line)
                if log.level() >= 2:
                    log.console.print(line, markup=False, highlight=False)
                if deadline and time.monotonic() > deadline:
                    proc.kill()
                    break
            rc = proc.wait()
    finally:
        duration = time.monotonic() - start
        if logf is not None:
            logf.write(f"# exit after {duration:.2f}s\n")
            logf.close()
    out = "\n".join(lines) if capture else "\n".join(tail)
    result = Completed(args, rc, duration, out, lp)
    if check and rc != 0:
        where = f"; full log: {lp}" if lp else ""
        raise error(
            f"{Path(args[0]).name} exited with code {rc} after {duration:.1f}s{where}",
            hint=hint or (f"read {lp}" if lp else None),
            detail="\n".join(tail),
            returncode=rc,
            log_path=str(lp) if lp else None,
        )
    return result
