"""The path launcher: ``python cuid.py --root TREE [--no-cuid] [--no-map] <compiler> <args...>``.

Every compile (a command with ``-c``) gets ``-ffile-prefix-map=TREE=.`` right after the compiler
(also for TREE's real path when a symlink leads to it): ``__FILE__``, debug info and coverage
name the tree as ``.``, so code that embeds its own path (every TORCH_CHECK, an assert) is the
same in every workspace. Right after the compiler, so that a map of the recipe's own (later on
the line) wins where both match: gcc takes the last matching map (clang 22 the longest). A
tree whose path holds ``=`` gets no map (the compilers split the option at the first ``=``).
``--no-cuid``: the host compilers' chains (gcc, clang), which take only the map. ``--no-map``:
a build through sccache (0.16 hashes the map's absolute path, so another workspace would never
hit; docs/reproducible.md).

For HIP compiles (without ``--no-cuid``), the CUID:

clang names each translation unit's device-side registration symbol after a CUID, by default a
hash of the source's *absolute* path and the whole command line, so the same source built in
another directory gives another ``.so``. ``-fuse-cuid=none`` avoids that but gives every unit the
same ``__hip_cuid_`` symbol, and a library of two or more units then fails to link (multiple
definition). This launcher appends ``-cuid=<hash>`` where the hash is of the source's path
relative to ``--root`` (the source tree): unique per unit, the same in every workspace.

The source is found wherever it stands: hipcc puts its own flags first and ``-x hip`` right
before each source (``clang-15 ... --offload-arch=gfx942 -O3 ... -c -x hip k.hip -o k.o``),
CMake writes ``-o k.o -c k.hip``. It is the one argument that names an existing file with a
C/C++/HIP/CUDA source suffix (not the value of ``-o``, ``-x``, ``-include``, ...), with ``-c``
on the line. Anything else (a link, ``--version``, two sources, a CUID already chosen) runs as
given: a wrong guess would give two units one CUID. It runs inside the build (cmake's
CMAKE_HIP_COMPILER_LAUNCHER; the pip-wheel backend's HIP_CLANG_PATH scripts, which hipcc calls)
and imports nothing of rocmbuild.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

CACHES = ("ccache", "sccache")
"""Launchers that may come next (a compile cache): ``-cuid`` goes after the compiler they run."""

SOURCE_SUFFIXES = (".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".C", ".CPP", ".hip", ".cu")
"""What clang compiles as C, C++, HIP or CUDA (hipcc adds ``-x hip`` before such a file)."""

TAKES_VALUE = frozenset(("-o", "-x", "-include", "-imacros", "-MF", "-MT", "-MQ", "-Xclang",
                         "-mllvm", "-Xlinker", "-Xoffload-linker"))
"""Options whose value is the next argument (which is then never the source); so are
``-Xarch_<target>``'s."""

OWN_CUID = ("-cuid=", "-fuse-cuid=")
"""The command already chooses its CUIDs: left as it is."""


def source_of(args: list[str]) -> str | None:
    """The one source a compile (``-c``) command compiles; None when there is no ``-c``, no
    such file, or more than one (``args``: the compiler's arguments, without the compiler)."""
    if "-c" not in args or any(a.startswith(OWN_CUID) for a in args):
        return None
    found: list[str] = []
    value = False
    for a in args:
        if value:
            value = False
        elif a in TAKES_VALUE or a.startswith("-Xarch_"):
            value = True
        elif not a.startswith("-") and a.endswith(SOURCE_SUFFIXES) and os.path.isfile(a):
            found.append(a)
    return found[0] if len(found) == 1 else None


def cuid_args(argv: list[str], root: str | None) -> list[str]:
    """argv with ``-cuid=<hash of the source relative to root>`` added after the compiler
    (after ``ccache <compiler>`` when a compile cache comes next); argv as it is when there is
    no one source to name."""
    at = _after_compiler(argv)
    source = source_of(argv[at:]) if root else None
    if source is None or root is None:
        return argv
    rel = os.path.relpath(os.path.realpath(source), os.path.realpath(root))
    return [*argv[:at], f"-cuid={hashlib.sha256(rel.encode()).hexdigest()[:16]}", *argv[at:]]


def _after_compiler(argv: list[str]) -> int:
    """Where the compiler's own arguments start: after the compiler a compile cache runs."""
    at = 1
    while at < len(argv) and os.path.basename(argv[at - 1]) in CACHES:
        at += 1
    return at


def prefix_map_args(argv: list[str], root: str) -> list[str]:
    """argv with ``-ffile-prefix-map=<root>=.`` (and one for root's real path, when it differs)
    right after the compiler, for a compile (``-c``); argv as it is for anything else (a link,
    ``--version``) or when the map is there already."""
    at = _after_compiler(argv)
    roots = [r for r in dict.fromkeys((os.path.abspath(root), os.path.realpath(root)))
             if "=" not in r]
    maps = [f"-ffile-prefix-map={r}=." for r in roots]
    if "-c" not in argv[at:] or not maps or maps[0] in argv[at:]:
        return argv
    return [*argv[:at], *maps, *argv[at:]]


USAGE = "usage: cuid.py --root TREE [--no-cuid] [--no-map] <compiler> <args...>\n"


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[0] != "--root":
        sys.stderr.write(USAGE)
        raise SystemExit(2)
    root, argv = argv[1], argv[2:]
    flags = set()
    while argv and argv[0] in ("--no-cuid", "--no-map"):
        flags.add(argv.pop(0))
    if not argv:
        sys.stderr.write(USAGE)
        raise SystemExit(2)
    if "--no-cuid" not in flags:
        argv = cuid_args(argv, root)
    if "--no-map" not in flags:
        argv = prefix_map_args(argv, root)
    exe = shutil.which(argv[0]) or argv[0]
    os.execv(exe, argv)


if __name__ == "__main__":
    main()
