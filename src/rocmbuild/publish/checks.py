"""What may be published: readable wheels (their errors as PublishError) with valid project
names that did not fail validation; and the identity pip gives a file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import BuildTag, NormalizedName
from packaging.version import Version

from rocmbuild.artifacts.wheel import (
    WheelFormatError,
    WheelInfo,
    parse_wheel_name,
    read_wheel,
    unpublishable,
)
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import PublishError, UsageError

# PEP 508 / core metadata: a project name starts and ends with a letter or digit
_VALID_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)


def valid_project_name(name: str) -> bool:
    return _VALID_NAME.match(name) is not None


def check_project_name(name: str, where: str) -> None:
    """Refuse ``..``, ``_``, ``-``, names with ``/`` and every other invalid name (UsageError)."""
    if not valid_project_name(name):
        raise UsageError(
            f"{where}: {name!r} is not a valid project name",
            hint="a name is letters, digits, '.', '_' and '-', starting and ending with a letter "
            "or digit (PEP 508)",
        )


@dataclass(frozen=True)
class Identity:
    """What pip sees of a wheel file: one release is (PEP 503 name, PEP 440 version, build tag);
    two files of one release clash when their tag sets overlap (pip could pick either)."""

    name: NormalizedName
    version: Version
    build: BuildTag
    tags: frozenset[Tag]

    def clashes(self, other: Identity) -> bool:
        return (
            (self.name, self.version, self.build) == (other.name, other.version, other.build)
            and bool(self.tags & other.tags)
        )

    @staticmethod
    def of(w: WheelInfo) -> Identity:
        return Identity(w.name, w.version, w.build, w.tags)

    @staticmethod
    def of_filename(filename: str) -> Identity | None:
        """The identity of a published file name; None when it is not a wheel name."""
        try:
            w = parse_wheel_name(filename)
        except WheelFormatError:
            return None
        return Identity(w.name, w.version, w.build, w.tags)


def read_wheel_for_publish(path: Path) -> WheelInfo:
    """``wheel.read_wheel`` with its error as a PublishError; the project name must be valid."""
    try:
        info = read_wheel(path)
    except WheelFormatError as exc:
        raise PublishError(exc.message, hint=exc.hint) from None
    dist = parse_wheel_name(info.filename).distribution
    for name in (dist, info.display_name):
        if not valid_project_name(name):
            raise PublishError(
                f"{path}: {name!r} is not a valid project name",
                hint="a name is letters, digits, '.', '_' and '-', starting and ending with a "
                "letter or digit (PEP 508); rebuild the wheel under a valid name",
            )
    return info


def check_not_broken(wheels: Sequence[WheelInfo], broken_dir: Path) -> None:
    """Refuse wheels that failed validation.

    Rule: a wheel is broken when its path is inside ``broken_dir``, or when a ``*.whl`` anywhere
    under ``broken_dir`` has the same sha256 (same bytes copied elsewhere).
    """
    broken_dir = broken_dir.resolve()
    for w in wheels:
        if w.path.resolve().is_relative_to(broken_dir):
            raise PublishError(
                f"{w.path}: failed validation (it is in {broken_dir})",
                hint="fix and rebuild it; wheels in the broken dir are never published",
            )
    if not broken_dir.is_dir():
        return
    by_size: dict[int, list[WheelInfo]] = {}
    for w in wheels:
        by_size.setdefault(w.size, []).append(w)
    for bad in broken_dir.rglob("*.whl"):
        try:
            size = bad.stat().st_size
        except OSError:
            continue
        if size not in by_size:  # cheap prefilter: only hash same-size files
            continue
        digest = sha256_file(bad)
        for w in by_size[size]:
            if w.sha256 == digest:
                raise PublishError(
                    f"{w.path}: failed validation (same sha256 {digest} as {bad})",
                    hint="fix and rebuild it; wheels in the broken dir are never published",
                )


def check_publishable(wheels: Sequence[WheelInfo]) -> None:
    """Refuse a wheel that must never reach a user (``wheel.unpublishable``: built against a
    build-only ROCm torch, a partial build), one line with the first reason."""
    for w in wheels:
        why = unpublishable(w)
        if why:
            raise PublishError(
                f"{w.path.name}: never published: {why[0]}",
                hint="build it on a ROCm host with a real ROCm torch (and without a partial "
                "option) to publish it",
            )
