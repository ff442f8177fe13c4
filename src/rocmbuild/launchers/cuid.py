"""A HIP compiler launcher: ``python cuid.py --root TREE <compiler or next launcher> <args...>``.

clang names each translation unit's device-side registration symbol after a CUID, by default a
hash of the source's *absolute* path and the whole command line, so the same source built in
another directory gives another ``.so``. ``-fuse-cuid=none`` avoids that but gives every unit the
same ``__hip_cuid_`` symbol, and a library of two or more units then fails to link (multiple
definition). This launcher appends ``-cuid=<hash>`` where the hash is of the source's path
relative to ``--root`` (the source tree): unique per unit, the same in every
workspace. Without ``-c <source>`` (nothing to name), the command runs as
given. It runs inside the build (cmake's CMAKE_HIP_COMPILER_LAUNCHER) and imports nothing of
rocmbuild.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

CACHES = ("ccache", "sccache")
"""Launchers that may come next (a compile cache): ``-cuid`` goes after the compiler they run."""


def cuid_args(argv: list[str], root: str | None) -> list[str]:
    """argv with ``-cuid=<hash of the source relative to root>`` added after the compiler
    (after ``ccache <compiler>`` when a compile cache comes next)."""
    if not root or "-c" not in argv[1:-1] or any(a.startswith("-cuid=") for a in argv):
        return argv
    source = argv[argv.index("-c", 1) + 1]
    rel = os.path.relpath(os.path.realpath(source), os.path.realpath(root))
    at = 1
    while at < len(argv) and os.path.basename(argv[at - 1]) in CACHES:
        at += 1
    return [*argv[:at], f"-cuid={hashlib.sha256(rel.encode()).hexdigest()[:16]}", *argv[at:]]


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[0] != "--root":
        sys.stderr.write("usage: cuid.py --root TREE <compiler> <args...>\n")
        raise SystemExit(2)
    argv = cuid_args(argv[2:], argv[1])
    exe = shutil.which(argv[0]) or argv[0]
    os.execv(exe, argv)


if __name__ == "__main__":
    main()
