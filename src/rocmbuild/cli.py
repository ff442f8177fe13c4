"""Command line: the one place that turns errors into exit codes.

    rocmbuild <recipe> [--arch ...]          same as `rocmbuild build <recipe> ...`
    rocmbuild build|plan|recipes|doctor|audit|validate|publish|promote|cache|completion ...

Each command is one module in ``rocmbuild.commands``: the route from here into the house is the
``COMMANDS`` tuple there, and its parser is built by ``rocmbuild.commands.parser``. A command
line that repeats a build whose wheel is cached is served first by
``rocmbuild.commands.noop_memo``, which needs neither the parser nor the recipe model.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from rocmbuild.core import log
from rocmbuild.core.errors import INTERNAL_ERROR_EXIT, RocmbuildError
from rocmbuild.core.log import escape


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread like SIGINT's KeyboardInterrupt, so every
    ``finally`` (locks, temp files, the running command's process group) runs on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


STOP_GRACE_S = 8.0
"""After a stop signal rocmbuild ends its commands and reports within this many seconds; if a
cleanup hangs (a lock, a pipe, a thread), the watchdog armed by the signal ends the process
anyway. The process guardian (core/run.py) kills the commands' groups when rocmbuild is gone,
and the kernel drops its flocks."""

_watchdog: list[threading.Timer] = []


def _arm_watchdog(signum: int) -> None:
    if _watchdog:
        return
    name = signal.Signals(signum).name

    def fire() -> None:
        with contextlib.suppress(OSError):
            os.write(2, f"interrupted: stopped by {name}; stopping took over {STOP_GRACE_S:g}s, "
                     "so rocmbuild exits now\nhint: its commands are ended by the process "
                     "guardian and its locks are released; run the same command again\n"
                     .encode())
        running = sys.modules.get("rocmbuild.core.run")
        if running is not None:
            with contextlib.suppress(Exception):
                running.kill_all()
        os._exit(128 + signum)

    timer = threading.Timer(STOP_GRACE_S, fire)
    timer.daemon = True
    _watchdog.append(timer)
    timer.start()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _arm_watchdog(signum)
    raise KeyboardInterrupt


def _terminate(signum: int, frame: FrameType | None) -> None:
    _arm_watchdog(signum)
    raise Terminated(signum)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _ignore_stop_signals() -> None:
    """While rocmbuild reports an interruption, a second signal must not cut the report."""
    with contextlib.suppress(ValueError):
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end rocmbuild like SIGINT does, for the time of ``main``; each of the
    three arms a watchdog (``STOP_GRACE_S``)."""
    old: dict[signal.Signals, object] = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        for sig in _STOP_SIGNALS:
            old[sig] = signal.getsignal(sig)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _terminate)
        if old[signal.SIGINT] is signal.default_int_handler:  # started with SIGINT ignored
            # (`cmd &` in a script, nohup): it stays ignored
            signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        while _watchdog:  # main returned: it stopped in time
            _watchdog.pop().cancel()
        for sig, handler in old.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    with _signals():
        return _main(list(sys.argv[1:] if argv is None else argv))


def _main(raw: list[str]) -> int:
    try:
        from rocmbuild.commands import noop_memo

        served, inputs = noop_memo.serve(raw)
        if served is not None:
            return served
        from rocmbuild.commands import parser
        from rocmbuild.commands.registry import COMMANDS, command_of, insert_build
        from rocmbuild.core import config, options
        from rocmbuild.core.errors import UsageError

        args_list = insert_build(raw, COMMANDS)
        whole = parser.build_parser(command_of(args_list))
        try:
            args = whole.parse_args(args_list)
        except UsageError:
            whole = parser.build_parser()  # its message names every command (an invalid choice)
            args = whole.parse_args(args_list)
        base = options.env_int("ROCMBUILD_VERBOSITY", minimum=0)
        log.set_level(max(0, (1 if base is None else base) + args.verbose - args.quiet))
        log.set_github(options.github_actions())
        options.check_env()
        config.use_recipe_dirs(args.recipes)
        args.quick_inputs = inputs  # for build's memo
        if not getattr(args, "handler", None):
            whole.print_help(sys.stderr)
            return 2
        return int(args.handler(args))
    except RocmbuildError as exc:
        _report(exc)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        _ignore_stop_signals()
        running = sys.modules.get("rocmbuild.core.run")  # not imported: nothing was started
        if running is not None:
            running.kill_all()  # commands started from other threads (the pipeline kills its own)
        signum = exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT)
        name = signal.Signals(signum).name
        log.console.print(f"[bold red]interrupted:[/bold red] stopped by {name}; the running "
                          "command and all its children were ended", highlight=False)
        log.console.print("[cyan]hint:[/cyan] locks are released and nothing partial was kept "
                          "in the cache or the wheel dir; run the same command again",
                          highlight=False)
        return 128 + signum
    except Exception:  # the last-resort guard: a bug, never a user's mistake
        return _internal_error(raw)


INTERNAL_ERROR_LINE = "internal error, please report"
"""The guard's line; the corpus test asserts no bad input reaches it."""


def _internal_error(argv: list[str]) -> int:
    """One line and the path of the saved traceback (under the workdir's logs/, else a temp
    dir), never the traceback itself."""
    import tempfile
    import time
    import traceback

    from rocmbuild.core import config

    text = log.redact(traceback.format_exc())  # a URL's user:password never reaches the file
    name = f"internal-error-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
    saved: Path | None = None
    dirs: list[Path] = []
    try:
        dirs.append(config.workspace(_workdir_arg(argv)).logs)
    except Exception:  # noqa: BLE001 - a bad workdir setting must not hide the original error
        pass
    dirs.append(Path(tempfile.gettempdir()))
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text, encoding="utf-8")
            saved = d / name
            break
        except OSError:
            continue
    log.console.print(f"[bold red]internal error:[/bold red] {INTERNAL_ERROR_LINE}"
                      + (f"; traceback saved to {escape(str(saved))}" if saved else ""),
                      highlight=False)
    log.console.print("[cyan]hint:[/cyan] file an issue with that file and the command line",
                      highlight=False)
    return INTERNAL_ERROR_EXIT


def _workdir_arg(argv: list[str]) -> str | None:
    """--workdir from the command line, read without the parser (which may be what failed)."""
    for i, a in enumerate(argv):
        if a == "--workdir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--workdir="):
            return a.split("=", 1)[1]
    return None


def _report(exc: RocmbuildError) -> None:
    if exc.detail:
        log.console.print(exc.detail, markup=False, highlight=False)
    for line in exc.message.splitlines() or [""]:
        log.console.print(f"[bold red]{exc.kind}:[/bold red] {escape(line)}", highlight=False)
    if exc.hint:
        log.console.print(f"[cyan]hint:[/cyan] {escape(exc.hint)}", highlight=False)
