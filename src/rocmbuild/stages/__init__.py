"""Pipeline stages. Each is one module with one entry point, ``run(plan, ctx) -> StageResult``.
Stages do not import each other; they talk through ``ctx.artifacts``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.config import Workspace


@dataclass
class Context:
    ws: Workspace
    log_dir: Path
    wheel_dir: Path
    force: bool = False
    artifacts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
