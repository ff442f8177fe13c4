"""One error hierarchy. Each error has a one-line message, a hint and a distinct exit code.

Only ``cli.main`` turns these into exit codes; everything else raises.
"""

from __future__ import annotations


class RocmbuildError(Exception):
    """Base class. ``message`` is one line; ``hint`` says what to do; ``detail`` is optional
    multi-line context (a log tail) printed before the message."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, hint: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class UsageError(RocmbuildError):
    """A bad command-line flag or argument."""

    exit_code = 2
    kind = "usage error"


class RecipeError(RocmbuildError):
    """A recipe file is invalid. ``problems`` holds every problem found, one line each."""

    exit_code = 3
    kind = "recipe error"

    def __init__(self, problems: list[str], hint: str | None = None) -> None:
        self.problems = problems
        super().__init__("\n".join(problems), hint)


class FetchError(RocmbuildError):
    exit_code = 4
    kind = "fetch error"


class PatchError(RocmbuildError):
    exit_code = 5
    kind = "patch error"


class BuildError(RocmbuildError):
    exit_code = 6
    kind = "build error"


class AuditError(RocmbuildError):
    exit_code = 7
    kind = "audit error"


class ValidationError(RocmbuildError):
    exit_code = 8
    kind = "validation error"


class PublishError(RocmbuildError):
    exit_code = 9
    kind = "publish error"


class ToolchainError(RocmbuildError):
    """The host lacks something the build needs (ROCm torch, a HIP compiler, a GPU, ...)."""

    exit_code = 10
    kind = "toolchain error"


class CacheError(RocmbuildError):
    exit_code = 11
    kind = "cache error"


class CommandFailed(RocmbuildError):
    """A subprocess failed. Carries the log tail (``detail``) and the log path."""

    exit_code = 12
    kind = "command failed"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        detail: str | None = None,
        returncode: int | None = None,
        log_path: str | None = None,
    ) -> None:
        super().__init__(message, hint, detail)
        self.returncode = returncode
        self.log_path = log_path


class NotReproduced(RocmbuildError):
    """``rocmbuild verify``: the rebuild of a wheel from its provenance gave other bytes."""

    exit_code = 13
    kind = "not reproduced"


INTERNAL_ERROR_EXIT = 70
"""What ``cli.main`` returns when an exception that is not a RocmbuildError reaches it (a bug):
one line "internal error, please report" and the path of the saved traceback."""


class CellsFailed(RocmbuildError):
    """``rocmbuild nightly``: the run finished, but at least one cell that was to be built
    failed, timed out or was killed (the report names them)."""

    exit_code = 14
    kind = "cells failed"


class Busy(RocmbuildError):
    """``rocmbuild nightly``: another nightly holds this workspace's lock."""

    exit_code = 15
    kind = "busy"
