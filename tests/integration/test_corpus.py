"""The bad-input corpus runner: every ``CASES`` entry of every ``tests/corpus/case_*.py`` runs
through the real CLI (``python -m rocmbuild --workdir {dir}/build ...``) in a fresh directory,
and is checked against the contract in ``tests/corpus/__init__.py``. No network, no GPU: the
cases are bad inputs that must be refused before any real work starts."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from rocmbuild.cli import INTERNAL_ERROR_LINE
from rocmbuild.core.errors import RocmbuildError
from tests.conftest import REPO
from tests.corpus import Case

CORPUS = REPO / "tests" / "corpus"
CORPUS_MIN = 900
"""The goal for the whole corpus (issue 34: at least 900 cases, every part's module merged)."""
"""The lead sets this (or flips the default) once every part's case module has landed."""


def modules() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("case_*.py"))


def all_cases() -> list[Case]:
    out: list[Case] = []
    for name in modules():
        out += importlib.import_module(f"tests.corpus.{name}").CASES
    return out


CASES = all_cases()

def _error_kinds() -> set[str]:
    """Every error kind rocmbuild prints ("usage error", "recipe error", ...), and the guard's."""
    seen: set[str] = set()
    todo: list[type[RocmbuildError]] = [RocmbuildError]
    while todo:
        cls = todo.pop()
        seen.add(cls.kind)
        todo += cls.__subclasses__()
    return seen | {"internal error"}


ERROR_LINE = re.compile(r"^(" + "|".join(map(re.escape, sorted(_error_kinds()))) + r"): ")
# Variables of the caller that would change what a case sees.
_SCRUB = re.compile(r"^(ROCMBUILD_|TWINE_|ROCM_PATH$|HIP_PATH$|PIP_)")


def _subst(text: str, d: Path, wheel: Path) -> str:
    return text.replace("{dir}", str(d)).replace("{wheel}", str(wheel))


def small_wheel(dest: Path) -> Path:
    """A small valid pure-Python wheel (okpkg 1.0), written by hand as a wheel builder would."""
    import base64
    import hashlib

    path = dest / "okpkg-1.0-py3-none-any.whl"
    files = {
        "okpkg/__init__.py": b"VALUE = 1\n",
        "okpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: okpkg\nVersion: 1.0\n",
        "okpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: corpus\n"
                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        record.append("okpkg-1.0.dist-info/RECORD,,")
        zf.writestr("okpkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_wheel(tmp_path_factory.mktemp("corpus-wheel"))


def run_case(case: Case, d: Path, wheel: Path) -> subprocess.CompletedProcess[str]:
    for rel, content in case.files.items():
        f = d / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            f.write_bytes(content)
        else:
            f.write_text(_subst(content, d, wheel), encoding="utf-8")
    for rel in case.fifos:
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(d / rel)
    for rel, target in case.links.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).symlink_to(_subst(target, d, wheel))
    env = {k: v for k, v in os.environ.items() if not _SCRUB.match(k)}
    env.update(COLUMNS="1000", PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO / "src")))
    env.update({k: _subst(v, d, wheel) for k, v in case.env.items()})
    argv = [_subst(a, d, wheel) for a in case.argv]
    return subprocess.run(
        [sys.executable, "-m", "rocmbuild", "--workdir", str(d / "build"), *argv],
        capture_output=True, text=True, env=env, cwd=d, timeout=case.timeout,
        stdin=subprocess.DEVNULL)


def check(case: Case, res: subprocess.CompletedProcess[str], d: Path) -> None:
    shown = f"rocmbuild {' '.join(case.argv)}\n--- stderr:\n{res.stderr}\n--- stdout:\n{res.stdout}"
    both = res.stdout + res.stderr
    assert "Traceback" not in both, shown
    assert INTERNAL_ERROR_LINE not in both, shown
    assert res.returncode == case.code, f"exit {res.returncode}, want {case.code}\n{shown}"
    lines = res.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if ERROR_LINE.match(line)]
    assert len(errors) == 1, f"want exactly one error line\n{shown}"
    line = lines[errors[0]]
    assert case.needle in line, f"{case.needle!r} not in the error line\n{shown}"
    assert any(x.startswith("hint: ") for x in lines[errors[0] + 1:]), f"no hint:\n{shown}"
    if case.secret:
        assert case.secret not in both, shown
        for root, dirs, files in os.walk(d):
            for name in dirs + files:
                assert case.secret not in name, f"secret in a file name: {root}/{name}"
            for name in files:
                p = Path(root) / name
                if p.is_file() and not p.is_symlink():
                    data = p.read_bytes()
                    written = any(data == (c.encode() if isinstance(c, str) else c)
                                  for c in case.files.values())
                    if not written:  # the case's own input files may carry it
                        assert case.secret.encode() not in data, f"secret in {p}"
    if case.writes_nothing:
        build = d / "build"
        for sub in ("wheels", "index", "cache"):
            made = [p for p in (build / sub).rglob("*") if p.is_file()] if (
                build / sub).is_dir() else []
            assert not made, f"{case.id} wrote {made}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, tmp_path: Path, wheel: Path) -> None:
    """One bad input through the real CLI: its class's exit code, one error line naming the
    file / key / flag / variable, a hint, no traceback, the guard never reached."""
    res = run_case(case, tmp_path, wheel)
    check(case, res, tmp_path)


def test_ids_unique_and_wellformed() -> None:
    counts = Counter(c.id for c in CASES)
    assert not [i for i, n in counts.items() if n > 1], counts.most_common(5)
    bad = [c.id for c in CASES if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c.id)]
    assert not bad


def test_classes_are_the_issues() -> None:
    """Each case names one of the issue's classes (or a part's own, lower-case, short)."""
    assert all(re.fullmatch(r"[a-z]{3,12}", c.klass) for c in CASES)


def test_corpus_size() -> None:
    assert len(CASES) >= CORPUS_MIN, f"{len(CASES)} cases over {modules()}"


def test_corpus_size_so_far() -> None:
    """What exists now: every module has cases, and the inputs part at least 60."""
    for name in modules():
        assert importlib.import_module(f"tests.corpus.{name}").CASES, name
    if "case_inputs" in modules():
        assert len(importlib.import_module("tests.corpus.case_inputs").CASES) >= 60


def class_counts() -> dict[str, int]:
    """Cases per class, as docs/dev/reliability.md's table shows them."""
    return dict(sorted(Counter(c.klass for c in CASES).items()))


def test_reliability_doc_counts() -> None:
    """docs/dev/reliability.md's class table matches the corpus (regenerate with
    `python -m tests.integration.test_corpus` when it does not)."""
    doc = (REPO / "docs" / "dev" / "reliability.md").read_text(encoding="utf-8")
    assert render_counts() in doc, "docs/dev/reliability.md is stale:\n" + render_counts()


CLASS_DOC = {
    "secrets": "1. secrets: credentials in index URLs never shown or stored",
    "cache": "2. cache integrity: hits prove their bytes, entries stay inside",
    "identity": "3. immutability by identity (name, version, tags)",
    "tracebacks": "4. no tracebacks: OS errors, archives, variables, numbers, malformed wheels",
    "processes": "5. processes: signals, timeouts, process trees",
    "inputs": "6. bad inputs refused before anything is written",
    "causes": "7. errors that name the real cause",
    "paths": "recipes outside this repo: relative paths resolve against the recipe file",
    "submodules": "recipes outside this repo: submodules narrowed per variant",
    "cmake": "recipes outside this repo: cmake source_dir and cmake_args",
    "hostdeps": "recipes outside this repo: validation requirements (requires, --with)",
    "bundle": "ROCm runtime: build.rocm_runtime and [bundle] (mode, keys, globs inside the "
    "ROCm root)",
    "rocmcheck": "host check: SDK / torch version ranges, ROCm components, saved hosts",
    "hipify": "recipes: the [hipify] table (tool, keys per tool, paths) and a missing hipify-perl",
    "envlabel": "build environment and labels: pass_env, label_torch, rocm_from, arch names",
    "offline": "offline builds: [[downloads]] pins, build.offline, ROCMBUILD_OFFLINE",
    "gate": "kernel gate: upstream tests, floors, faults, baseline store",
    "tool": "your own recipe directories (--recipes, ROCMBUILD_RECIPE_PATH) and completion",
    "verify": "verify and --build-tag: damaged provenance, recipe paths, build tags",
    "buildenv": "build venv: build requirements (build_requires, requirements files)",
    "preflight": "resource preflight: disk, memory for one job, compile cache dir, link line",
    "prune": "cache prune: sizes, day counts, a prune without a rule",
    "options": "recipe options: --opt, [options] tables, plan --units",
    "nightly": "nightly: nightly.toml keys, --only/--cell, the webhook URL kept secret",
    "integrity": "memo and lock integrity: a memo proves its entry, no symlink followed",
    "json": "untrusted JSON and numbers: size, depth, types, finite, in range",
    "files": "files that are not what they should be: FIFOs, directories, read once",
    "config": "the nightly config checked as a whole before anything runs",
    "leaks": "secrets and terminal escapes from files never echoed",
    "exits": "exit codes of promote, --stage, audit of a .o, forged provenance",
    "preproc": "hipify strict judges only code the build compiles",
    "delivery": "delivery: a view prefers its arch's build; --json-file always written",
    "credentials": "credentials in any key, table name, value or flag: refused, never shown",
    "bignumbers": "numbers of 4,300 digits and more in any TOML or JSON file",
    "longnames": "names too long to be a path: one line",
    "notfiles": "FIFOs, directories, symlinks where a config file belongs",
    "blame": "the error names the file and key the user wrote",
    "promises": "what cannot be delivered is refused before anything is built",
}


def render_counts() -> str:
    counts = class_counts()
    rows = ["| class | cases |", "|---|---|"]
    for k in [*CLASS_DOC, *sorted(set(counts) - set(CLASS_DOC))]:
        rows.append(f"| {CLASS_DOC.get(k, k)} | {counts.get(k, 0)} |")
    rows.append(f"| **total** | **{sum(counts.values())}** |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(render_counts())
