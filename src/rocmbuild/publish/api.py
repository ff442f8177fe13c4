"""Publishing: ``rocmbuild publish`` and ``rocmbuild promote``.

The index is a directory (a static PEP 503/691 index, see ``static_index``) or an http(s) URL
of an index server (twine upload, see ``upload``).

Domain API: ``publish(wheels, PublishOptions) -> PublishResult`` and
``promote(PromoteOptions) -> PublishResult``. They take plain values and read no environment;
``rocmbuild.commands.publish`` / ``.promote`` turn the command line (and ROCMBUILD_INDEX, the
credentials variables and the test pause hook) into those values and print the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, log
from rocmbuild.core.errors import PublishError, UsageError
from rocmbuild.publish import upload as _upload
from rocmbuild.publish.checks import (
    check_not_broken,
    check_project_name,
    check_publishable,
    read_wheel_for_publish,
)
from rocmbuild.publish.static_index import DEFAULT_STAGE, Change, StaticIndex, check_stage_name
from rocmbuild.publish.target import IndexTarget, parse_index, parse_server_url
from rocmbuild.publish.upload import Credentials, UploadResult

__all__ = ["IndexTarget", "PromoteOptions", "PublishOptions", "PublishResult", "is_url",
           "parse_index", "parse_pin", "promote", "publish"]


def is_url(index: str) -> bool:
    """True when ``index`` is a server URL (http/https, any case); False for a directory.
    Raises UsageError (value redacted) for anything else: see ``target.parse_index``."""
    return parse_index(index).is_server


@dataclass(frozen=True)
class PublishOptions:
    index: str  # a directory, or the upload URL of an index server
    stage: str | None = None  # directory index only; None: DEFAULT_STAGE
    simple_url: str | None = None  # server only: its simple index, when not <index>/simple/
    dry_run: bool = False
    verbose: bool = False  # server only: twine's verbose output
    broken_dir: Path | None = None  # wheels in (or byte-identical to one in) it are refused
    credentials: Credentials | None = None  # server only; None: the URL's user:password, if any
    on_step: Callable[[str], None] | None = None  # directory only: called at each STEPS name
    index_from: str = "--index"  # the flag, variable or config key it came from (named in errors)
    simple_url_from: str = "--simple-url"
    build_only_scratch: bool = False
    """Only the stack's scratch index in its workspace (``pipeline.stack``): wheels that are
    never published (``checks.check_publishable``) are let in; the index is marked BUILD-ONLY."""

    def __repr__(self) -> str:  # index may carry user:password@
        return (f"PublishOptions(index={log.redact(self.index, strict=True)!r}, "
                f"stage={self.stage!r}, ...)")


@dataclass(frozen=True)
class PromoteOptions:
    index: str  # a directory index
    project: str
    version: str
    from_stage: str = "staging"
    to_stage: str = DEFAULT_STAGE
    dry_run: bool = False
    broken_dir: Path | None = None
    on_step: Callable[[str], None] | None = None
    index_from: str = "--index"

    def __repr__(self) -> str:
        return (f"PromoteOptions(index={log.redact(self.index, strict=True)!r}, "
                f"project={self.project!r}, ...)")


@dataclass(frozen=True)
class PublishResult:
    """What publish/promote did (or would do). Exactly one of ``change`` (directory index) and
    ``upload`` (server) is set."""

    index: str  # the directory, or the server URL without credentials
    dry_run: bool
    change: Change | None = None
    upload: UploadResult | None = None

    def to_json(self) -> dict[str, Any]:
        detail = self.change or self.upload
        assert detail is not None
        return {"index": self.index, "dry_run": self.dry_run, **detail.to_json()}


OS_HINT = ("check that the index directory (--index) is a writable directory with free space, "
           "and move away a file that stands where one of its directories belongs")


def publish(wheels: Sequence[Path], options: PublishOptions,
            extra: Mapping[str, bytes] | None = None) -> PublishResult:
    """Publish ``wheels`` to ``options.index``: one atomic transaction into a directory index, or
    an upload to a server after checking it holds no different bytes under the same names.
    ``extra``: files written in the same transaction (stage-relative path -> bytes: a stack's
    lock files); a directory index only."""
    if options.stage is not None:  # given: checked first; --stage '' is not "the default stage"
        check_stage_name(options.stage)
    target = parse_index(options.index, options.index_from)
    simple = (
        parse_server_url(options.simple_url, options.simple_url_from).url
        if options.simple_url else None
    )
    infos = [read_wheel_for_publish(Path(w)) for w in wheels]
    if not options.build_only_scratch:
        check_publishable(infos)
    if options.broken_dir is not None:
        check_not_broken(infos, options.broken_dir)
    if target.url is not None:
        if extra:
            raise UsageError(f"{options.index_from}: a stack is published to a directory index "
                             "(its lock files are written in the same transaction)",
                             hint="give a directory, served by any web server")
        if options.stage is not None:
            raise UsageError(
                "--stage: applies to a directory index only",
                hint="for a server, give the stage's own upload URL as --index",
            )
        res = _upload.upload(
            infos,
            target.url,
            options.credentials or Credentials(target.username, target.password),
            simple_url=simple,
            dry_run=options.dry_run,
            verbose=options.verbose,
        )
        return PublishResult(target.url, options.dry_run, upload=res)
    if options.simple_url:
        raise UsageError(
            f"{options.simple_url_from}: applies to a server URL index only",
            hint="drop it for a directory index",
        )
    assert target.path is not None
    with fsutil.os_errors(PublishError, "publish", target.path, OS_HINT):
        idx = StaticIndex(target.path, on_step=options.on_step)
        stage = DEFAULT_STAGE if options.stage is None else options.stage
        change = idx.publish(infos, stage=stage,
                             dry_run=options.dry_run, extra=extra)
    return PublishResult(str(idx.root), options.dry_run, change=change)


def parse_pin(spec: str) -> tuple[str, str]:
    """``NAME==VERSION`` -> (name, version): one ``==``, a valid project name and a PEP 440
    version, else a UsageError (``a==``, ``a==1==2`` are the command line's mistakes)."""
    from packaging.version import InvalidVersion, Version

    hint = "e.g. rocmbuild promote flash-attn==2.8.3+rocm6.2 --from staging"
    name, _, version = (part.strip() for part in spec.partition("=="))
    if spec.count("==") != 1 or not version:
        raise UsageError(f"promote: {spec!r} is not NAME==VERSION", hint=hint)
    check_project_name(name, "promote NAME==VERSION")
    try:
        Version(version)
    except InvalidVersion:
        raise UsageError(f"promote: {version!r} in {spec!r} is not a valid version (PEP 440)",
                         hint=hint) from None
    return name, version


def promote(options: PromoteOptions) -> PublishResult:
    """Copy every file of project==version from one stage of a directory index to another."""
    target = parse_index(options.index, options.index_from)
    if target.path is None:
        raise UsageError(
            f"{options.index_from}: {target.shown}: promote works on a directory index only",
            hint="promote on a server with its own tool (e.g. devpi push)",
        )
    with fsutil.os_errors(PublishError, "promote", target.path, OS_HINT):
        idx = StaticIndex(target.path, on_step=options.on_step)
        change = idx.promote(
            options.project,
            options.version,
            options.from_stage,
            options.to_stage,
            dry_run=options.dry_run,
            broken_dir=options.broken_dir,
        )
    if not change.added and not change.unchanged:
        raise PublishError(f"promote: nothing found for {options.project}=={options.version}")
    return PublishResult(str(idx.root), options.dry_run, change=change)


def pause_hook(env: Mapping[str, str]) -> Callable[[str], None] | None:
    """The test hook: ROCMBUILD_PUBLISH_PAUSE_AT=<step> writes ROCMBUILD_PUBLISH_PAUSE_MARKER (a
    path) and sleeps ROCMBUILD_PUBLISH_PAUSE_SECONDS (60) at that step, so a test can kill -9
    the publisher there."""
    at = env.get("ROCMBUILD_PUBLISH_PAUSE_AT")
    if not at:
        return None
    marker = env.get("ROCMBUILD_PUBLISH_PAUSE_MARKER")
    seconds = float(env.get("ROCMBUILD_PUBLISH_PAUSE_SECONDS", "60"))

    def pause(step: str) -> None:
        if step != at:
            return
        if marker:  # whole or absent: a test polls for it
            tmp = Path(f"{marker}.tmp")
            tmp.write_text(step)
            tmp.replace(marker)
        time.sleep(seconds)

    return pause
