"""Which lines of a C/C++/HIP tree the build compiles: the real preprocessor decides.

``judge`` mirrors the tree into a scratch directory (hard links) and writes, for each file it is
asked about, a copy with one ``#pragma rocmbuild_live <n>`` line at the top and after each
conditional directive (``#if``, ``#ifdef``, ``#ifndef``, ``#elif``, ``#else``). It then runs the
HIP compiler's preprocessor (``-E``) over every compilation unit given, with the build's
defines: a ``.cu``/``.hip`` unit once for the host and once for the device code of every target
arch, a ``.c`` unit as C, the rest as C++. A pragma reaches the output only from a group the
preprocessor kept, in any unit, pass or inclusion, so a line is compiled when the innermost
group around it printed its pragma. A file no unit reached (its top pragma never printed) is
not judged: a unit we were not given may include it. We parse only the nesting
of the directives; which groups are on is the compiler's answer, with the macros of the headers
really included (HIP's, the project's) and those the compiler predefines (``__HIP__``,
``__HIP_DEVICE_COMPILE__``, ``__gfx942__``).

When a unit cannot be preprocessed (a header it includes is not found here) nothing is judged:
``Live.unknown`` says why and every line counts as compiled, as without the preprocessor."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocmbuild.core.errors import CommandFailed
from rocmbuild.core.run import run as sh

UNIT_SUFFIXES = (".cu", ".hip", ".c", ".cc", ".cpp", ".cxx")
"""What is compiled on its own; headers are reached through the units' includes."""
PRAGMA = "rocmbuild_live"
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")
_OUT = re.compile(rf"^#pragma {PRAGMA} (\d+)$", re.M)
_ERROR = re.compile(r"\b(?:fatal )?error: [^\n]*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


@dataclass(frozen=True)
class Group:
    first: int
    last: int
    """The body's lines (1-based, inclusive); the directive lines belong to the outer group."""
    mark: int | None
    """Its pragma's number; None where no pragma could be put (then it counts as on)."""


@dataclass(frozen=True)
class Live:
    """The judgement: ``compiled(file, line)`` (files relative to the tree's top)."""

    groups: dict[str, tuple[Group, ...]] = field(default_factory=dict)
    top: dict[str, int] = field(default_factory=dict)
    conditions: dict[str, frozenset[int]] = field(default_factory=dict)
    """The lines of each file's ``#if``/``#elif`` conditions: a name there is tested by the
    preprocessor, never compiled."""
    seen: frozenset[int] = frozenset()
    unknown: str = ""
    """Why the blocks could not be judged ("" when the preprocessor ran over every unit)."""

    def compiled(self, rel: str, line: int) -> bool:
        if line in self.conditions.get(rel, frozenset()):
            return False
        if self.unknown or self.top.get(rel) not in self.seen:
            return True  # no unit given reached the file: one we do not know of may
        inner = [g for g in self.groups[rel] if g.first <= line <= g.last]
        return not inner or inner[-1].mark is None or inner[-1].mark in self.seen


def groups(text: str) -> tuple[tuple[Group, ...], list[int], frozenset[int]]:
    """The conditional groups of ``text`` (innermost last among those holding a line), the
    lines after which a pragma goes (0: the top; the groups' marks index it) and the lines of
    the ``#if``/``#elif`` conditions."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    lines, raw = code.split("\n"), text.split("\n")
    out: list[tuple[int, int, int | None]] = []
    after: list[int] = [0]
    stack: list[tuple[int, int | None]] = []
    conditions: set[int] = set()
    i = 0
    while i < len(lines):
        start = i
        while lines[i].endswith("\\") and i + 1 < len(lines):  # a directive's continuations
            i += 1
        m = _DIRECTIVE.match(lines[start])
        end = i + 1  # the 1-based number of the directive's last line
        i += 1
        if m is None:
            continue
        word = m.group(1)
        if word.startswith(("if", "elif")):
            conditions.update(range(start + 1, end + 1))
        if word not in ("if", "ifdef", "ifndef") and stack:
            first, mark = stack.pop()
            out.append((first, start, mark))  # the body ends the line before (start is 0-based)
        if word == "endif":
            continue
        # a comment left open on the directive line would swallow the pragma: no mark there
        closed = raw[end - 1].count("/*") <= raw[end - 1].count("*/")
        mark = None
        if closed:
            after.append(end)
            mark = len(after) - 1
        stack.append((end + 1, mark))
    out += [(first, len(lines), mark) for first, mark in stack]  # unterminated: to the end
    ordered = sorted(out, key=lambda g: (g[0], -g[1]))
    return tuple(Group(f, la, mk) for f, la, mk in ordered), after, frozenset(conditions)


def _instrument(text: str, after: list[int], base: int) -> str:
    lines = text.split("\n")
    put = {n: f"#pragma {PRAGMA} {base + k}" for k, n in enumerate(after)}
    out = [put[0]] if 0 in put else []
    for n, line in enumerate(lines, 1):
        out.append(line)
        if n in put and n != 0:
            out.append(put[n])
    return "\n".join(out)


def _mirror(tree: Path, dest: Path, skip: Sequence[str]) -> None:
    for dirpath, dirs, names in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in skip]
        rel = Path(dirpath).relative_to(tree)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            src, dst = Path(dirpath) / name, dest / rel / name
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)


def judge(tree: Path, files: Sequence[str], units: Sequence[str], *, compiler: str | None,
          flags: Sequence[str], archs: Sequence[str], defines: Sequence[str],
          include_dirs: Sequence[str], scratch: Path, log_path: Path,
          skip: Sequence[str] = (".git",)) -> Live:
    """Which lines of ``files`` (relative to ``tree``) the ``units`` compile (see the module
    docstring). ``include_dirs`` are relative to ``tree``; ``scratch`` holds the mirror while
    it runs (removed after). Without a ``compiler`` only the conditions are known."""
    found: dict[str, tuple[Group, ...]] = {}
    top: dict[str, int] = {}
    conditions: dict[str, frozenset[int]] = {}
    texts: dict[str, tuple[str, list[int]]] = {}
    base = 1
    for rel in dict.fromkeys(files):
        text = (tree / rel).read_text("utf-8", "replace")
        gs, after, conditions[rel] = groups(text)
        found[rel] = tuple(Group(g.first, g.last, None if g.mark is None else base + g.mark)
                           for g in gs)
        top[rel], texts[rel] = base, (text, after)
        base += len(after)
    if compiler is None:
        return Live(found, top, conditions, unknown="no HIP compiler found to preprocess with")
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="preprocessed-", dir=scratch))
    try:
        mirror = work / "tree"
        _mirror(tree, mirror, skip)
        for rel, (text, after) in texts.items():
            (mirror / rel).unlink()  # a hard link to the tree's file: never write through it
            (mirror / rel).write_text(_instrument(text, after, top[rel]), encoding="utf-8")
        common = ["-E", "-w", *flags, *(f"-D{d}" for d in defines),
                  *(f"-I{mirror / d}" for d in include_dirs)]
        seen: set[int] = set()
        for unit in units:
            path = str(mirror / unit)
            if unit.endswith((".cu", ".hip")):
                passes = [["-x", "hip", "--offload-host-only"],
                          ["-x", "hip", "--offload-device-only", "-nogpulib",
                           *(f"--offload-arch={a}" for a in archs)]]
            else:
                passes = [["-x", "c" if unit.endswith(".c") else "c++"]]
            for extra in passes:
                try:
                    res = sh([compiler, *extra, *common, path], cwd=mirror, capture=True,
                             check=False, timeout=300)
                    why = "" if res.returncode == 0 else _one_line(res.output, str(mirror))
                except CommandFailed as exc:  # not found, or past the timeout
                    why = exc.message
                if why:
                    with open(log_path, "a", encoding="utf-8") as f:
                        f.write(f"preprocessor: {unit}: {why}\n")
                    return Live(found, top, conditions,
                                unknown=f"{unit} could not be preprocessed here ({why})")
                seen.update(int(n) for n in _OUT.findall(res.output))
        return Live(found, top, conditions, frozenset(seen))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _one_line(text: str, mirror: str) -> str:
    m = _ERROR.search(text)
    line = m.group(0) if m else "the preprocessor failed"
    return line.replace(mirror + "/", "").strip()[:200]
