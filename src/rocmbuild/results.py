"""Results are values: stages return them, the pipeline and nightly collect them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Status(enum.Enum):
    """The one status vocabulary: pipeline stages, validation steps, kernel cases and reports.

    SUCCESS: it ran and passed. WARNING: it ran and passed, with something the user should read
    (a validation step: e.g. a pure-Python wheel built against another torch). FAILED: it ran and
    failed. SKIPPED: it did not run; the reason says why (never counted as a pass). CACHED: a
    stage's work was found in the cache.
    """

    SUCCESS = "success"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"
    CACHED = "cached"

    @property
    def failed(self) -> bool:
        return self is Status.FAILED

    @classmethod
    def parse(cls, text: object) -> Status:
        """Read a status from JSON: our own values, and the kernel gate's (and reports written
        before there was one vocabulary) ``passed``. Anything else is a ValueError."""
        if text == "passed":
            return cls.SUCCESS
        return cls(text)


@dataclass(frozen=True)
class StageResult:
    status: Status
    duration: float = 0.0
    reason: str = ""
    log_path: Path | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "duration_s": round(self.duration, 3),
            "reason": self.reason,
            "log": str(self.log_path) if self.log_path else None,
        }
