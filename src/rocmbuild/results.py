"""Results are values: stages return them, the pipeline and nightly collect them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Status(enum.Enum):
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    CACHED = "cached"


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
