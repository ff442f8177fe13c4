"""Pipeline stages. Each is one module with one entry point, ``run(plan, ctx) -> StageResult``.
Stages do not import each other; they hand values on through ``ctx.artifacts`` (typed
``Artifacts``: each stage returns what it made and the pipeline merges it in)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rocmbuild.artifacts.results import Artifacts
from rocmbuild.core import hostenv, options
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import BuildError
from rocmbuild.host.detect import Host
from rocmbuild.plan.model import Plan

if TYPE_CHECKING:
    from rocmbuild.buildtools.compilecache import CompileCache

T = TypeVar("T")


@dataclass
class Context:
    ws: Workspace
    log_dir: Path
    wheel_dir: Path
    host: Host
    force: bool = False
    compile_cache: CompileCache | None = None
    """ccache/sccache in front of the build's compilers (None: compile without one)."""
    choose_compile_cache: Callable[[], CompileCache | None] | None = None
    """Sets ``compile_cache`` when a build runs (the pipeline calls it after a cache miss): a
    cache hit compiles nothing, so it neither looks for ccache/sccache nor fails without one."""
    artifacts: Artifacts = field(default_factory=Artifacts)
    timings: dict[str, float] = field(default_factory=dict)
    gate_needs_gpu: bool = False
    """A kernel gate that had kernels to check and could not run for want of a GPU is "cannot
    validate here" (ToolchainError, exit 10), not a pass: the nightly sets it, so such a wheel
    stays pending until a GPU host validates it (``build --validate`` leaves it False: the gate
    is SKIPPED, the report says so, and the cache entry records it: ``Validation.needs_gpu``)."""


ZIP_EPOCH = 315532800
"""1980-01-01T00:00:00Z: zip cannot store an earlier date."""


def source_date_epoch(artifacts: Artifacts) -> int:
    """The SOURCE_DATE_EPOCH of a build: the variable when the user sets it (the
    reproducible-builds convention), else the source's own time from fetch, else 1980-01-01;
    never before 1980 (zip's first date)."""
    given = options.env("SOURCE_DATE_EPOCH")
    value = int(given) if given else artifacts.source_date_epoch
    return max(value if value is not None else ZIP_EPOCH, ZIP_EPOCH)


def build_child(plan: Plan, ctx: Context, extra: Mapping[str, str] | None = None,
                ) -> tuple[str, dict[str, str]]:
    """The Python a build child runs and its environment, for every stage that runs the
    recipe's code (hipify, build): host variables only through the allow-list
    (``hostenv.PASS_ENV`` + build.pass_env), then ``extra``, then the plan's env. With the
    recipe's build env: its python and its bin/ first on PATH; else this interpreter's (its
    venv's cmake and ninja before the system's)."""
    benv = ctx.artifacts.build_env
    if benv is not None:
        from rocmbuild.artifacts import buildfacts  # not at the top: a cache hit needs none

        python, host_vars = str(benv.python), buildfacts.host_environ(os.environ)
        own = benv.overlay(os.environ)
    else:
        python, host_vars = sys.executable, dict(os.environ)
        own = {"PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                        os.environ.get("PATH", "")])}
    return python, hostenv.child_env(host_vars, {**own, **(extra or {}), **plan.env},
                                     plan.pass_env)


def need(value: T | None, what: str, stage: str) -> T:
    """An artifact an earlier stage must have made (a stage run out of order is a bug)."""
    if value is None:
        raise BuildError(f"{stage}: no {what} from an earlier stage",
                         hint="internal error, please report it with the command you ran")
    return value
