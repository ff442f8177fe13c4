"""quickhit's pure parts: which variables the inputs leave out, how it reads the locating flags
from a command line, and what a memo must look like (the real short path runs in
tests/integration/test_quickhit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rocmbuild
from rocmbuild.commands import quickhit
from rocmbuild.core import hostenv, options


def test_left_out_variables_are_never_read_or_passed_to_builds() -> None:
    assert not quickhit.VOLATILE_ENV & set(options.ENV)
    assert not quickhit.VOLATILE_ENV & set(hostenv.PASS_ENV)


@pytest.mark.parametrize(("argv", "want"), [
    (["demo", "--arch", "gfx942"], {}),
    (["--workdir", "w", "demo", "--cache-dir=c"], {"workdir": "w", "cache_dir": "c"}),
    (["demo", "-w", "out", "--wheel-dir", "out2"], {"wheel_dir": "out2"}),
    (["demo", "-wout"], {"wheel_dir": "out"}),
    (["demo", "--rocm-path", "/opt/rocm", "--hip-compiler=/x/clang"],
     {"rocm_path": "/opt/rocm", "hip_compiler": "/x/clang"}),
    (["demo", "--work", "w"], None),  # argparse takes it as --workdir: not read here
    (["demo", "--cache", "c"], None),
    (["demo", "--workdir"], None),  # no value: argparse reports it
])
def test_locating_flags(argv: list[str], want: dict[str, str] | None) -> None:
    assert quickhit._flags(argv) == want


def _memo(**change: object) -> dict[str, object]:
    memo: dict[str, object] = {
        "schema": quickhit.SCHEMA, "cache_key": "a" * 64, "host": "b" * 64,
        "wheel_dir": "/w/wheels", "level": 1, "github": False, "want_compiler": True,
        "want_components": False, "dists": ["torch"], "files": [["/r/demo.toml", "c" * 64]],
        "absent": [], "dirs": ["/r"],
    }
    memo.update(change)
    return memo


@pytest.mark.parametrize("change", [
    {"schema": "rocmbuild-memo/0"}, {"cache_key": "../x"}, {"host": "B" * 64},
    {"wheel_dir": "relative/wheels"}, {"level": True}, {"level": 10}, {"github": 0},
    {"want_compiler": "yes"}, {"dists": "torch"}, {"files": []},
    {"files": [["/r/demo.toml", "c" * 63]]}, {"files": [["/r/demo.toml"]]},
    {"absent": ["/a\0b"]}, {"dirs": None},
])
def test_a_memo_with_a_bad_value_is_refused(change: dict[str, object]) -> None:
    assert quickhit._valid(_memo())
    assert not quickhit._valid(json.loads(json.dumps(_memo(**change))))


def test_the_code_stamp_covers_every_module_of_the_package() -> None:
    """A memo written by other code must be a miss: every module rocmbuild runs is stamped."""
    pkg = Path(rocmbuild.__file__).parent
    stamped = {Path(p).relative_to(pkg).as_posix() for p, _, _ in quickhit._code()}
    assert stamped == {p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py")
                       if "__pycache__" not in p.parts}
    assert {"cli.py", "recipe/render.py", "commands/quickhit.py"} <= stamped
