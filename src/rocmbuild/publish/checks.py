"""What may be published: readable wheels (their errors as PublishError) that did not fail
validation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocmbuild.digest import sha256_file
from rocmbuild.errors import PublishError
from rocmbuild.wheel import WheelFormatError, WheelInfo, read_wheel


def read_wheel_for_publish(path: Path) -> WheelInfo:
    """``wheel.read_wheel`` with its error as a PublishError."""
    try:
        return read_wheel(path)
    except WheelFormatError as exc:
        raise PublishError(exc.message, hint=exc.hint) from exc


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
