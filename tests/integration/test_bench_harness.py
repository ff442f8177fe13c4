"""benchmarks/run.py, the harness that refreshes docs/dev/benchmarks-notebook.md: real child
processes (tiny benchmark scripts written to a temp dir, run with this Python) against a temp
copy of a doc. Nothing is faked; the real benchmarks are not run here (minutes each), only
listed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

DOC = """# Benchmarks

Prose at the top, kept as it is.

## Fast

<!-- bench:fast -->
| old | table |
|---|---|
| 1 | 2 |
<!-- /bench:fast -->

Prose between blocks, with a figure: 0.28 s.

## Broken

<!-- bench:broken -->
| the broken one's old table |
<!-- /bench:broken -->

Prose at the end.
"""

FAST = """import sys
print("progress goes to stderr", file=sys.stderr)
print("| measurement | s |")
print("|---|---|")
print(f"| argv | {' '.join(sys.argv[1:])} |")
"""

BROKEN = """import sys
print("| half a table |")
sys.exit(3)
"""

SKIPS = """import sys
print("skipped: no such tool here")
sys.exit(77)
"""


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", REPO / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def setup(tmp_path: Path, harness: ModuleType) -> tuple[Path, dict[str, object]]:
    for name, text in (("fast.py", FAST), ("broken.py", BROKEN), ("skips.py", SKIPS)):
        (tmp_path / name).write_text(text)
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    b = harness.Bench
    registry = {"fast": b("fast.py", ("--n", "3"), "Fast"),
                "broken": b("broken.py", (), "Broken"),
                "new_one": b("fast.py", ("--new",), "A new benchmark"),
                "skips": b("skips.py", (), "Skips"),
                "on_gpu": b("fast.py", (), "GPU", gpu=True)}
    return doc, registry


def test_refresh_replaces_blocks_keeps_prose_and_failures(
        harness: ModuleType, setup: tuple[Path, dict[str, object]],
        capsys: pytest.CaptureFixture[str]) -> None:
    doc, registry = setup
    rc = harness.main(["--doc", str(doc)], registry=registry, bench_dir=doc.parent)
    err = capsys.readouterr().err
    text = doc.read_text()
    assert rc == 1
    assert "FAILED: broken" in err and "skipped: skips" in err
    # the fresh table replaced the old one, with the date and machine line under it
    fast = text.split("<!-- bench:fast -->\n")[1].split("<!-- /bench:fast -->")[0]
    assert "| old | table |" not in fast and "| argv | --n 3 |" in fast
    assert "Measured 20" in fast and " UTC on " in fast and "cpus" in fast and "GiB memory" in fast
    assert "`python benchmarks/fast.py --n 3`" in fast
    # prose untouched, the failed one's old block kept, the skipped one and the GPU one absent
    for prose in ("Prose at the top, kept as it is.\n", "Prose between blocks, with a figure: "
                  "0.28 s.\n", "Prose at the end.\n", "| the broken one's old table |\n"):
        assert text.count(prose) == 1
    assert "half a table" not in text and "bench:skips" not in text and "on_gpu" not in text
    # a benchmark without a block is appended at the end under its heading
    assert text.index("Prose at the end.") < text.index("## A new benchmark\n\n<!-- bench:new_one")
    assert text.rstrip().endswith("<!-- /bench:new_one -->")
    assert not [p for p in doc.parent.iterdir() if p.name.startswith(".")]  # no temp file left

    # a second run of one benchmark: same structure, only that block changes
    before = doc.read_text()
    assert harness.main(["fast", "--doc", str(doc)], registry=registry, bench_dir=doc.parent) == 0
    after = doc.read_text()
    cut = before.index("<!-- /bench:fast -->")
    assert after[after.index("<!-- /bench:fast -->"):] == before[cut:]


def test_bad_names_markers_and_gpu(harness: ModuleType, setup: tuple[Path, dict[str, object]],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    doc, registry = setup
    assert harness.main(["nope", "--doc", str(doc)], registry=registry) == 2
    assert harness.main(["on_gpu", "--doc", str(doc)], registry=registry) == 2
    doc.write_text(DOC.replace("<!-- /bench:fast -->\n", "", 1))
    assert harness.main(["fast", "--doc", str(doc)], registry=registry) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark nope" in err and "hint: choose from fast, broken" in err
    assert "on_gpu needs a GPU" in err and "hint: add --gpu" in err
    assert f"{doc}:16: block 'broken' opens inside block 'fast'" in err
    assert "Traceback" not in err


def test_registry_scripts_exist_and_cli_lists_them(tmp_path: Path, harness: ModuleType) -> None:
    for name, b in harness.BENCHMARKS.items():
        assert (REPO / "benchmarks" / b.script).is_file(), name
    doc = tmp_path / "benchmarks.md"
    doc.write_text((REPO / "docs" / "dev" / "benchmarks-notebook.md").read_text())
    out = subprocess.run([sys.executable, "benchmarks/run.py", "--dry-run", "--doc", str(doc)],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    # every CPU benchmark has its block in the real doc; the dry run changes nothing
    cpu = [n for n, b in harness.BENCHMARKS.items() if not b.gpu]
    assert [line.split(":")[0] for line in out.splitlines()] == cpu
    assert "append" not in out
    assert doc.read_text() == (REPO / "docs" / "dev" / "benchmarks-notebook.md").read_text()
    listed = subprocess.run([sys.executable, "benchmarks/run.py", "--list"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert "(no block yet)" not in listed and len(listed.splitlines()) == len(harness.BENCHMARKS)
