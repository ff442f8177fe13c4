"""noop_memo's pure parts: which variables the inputs leave out, how it reads the locating flags
from a command line, and what a memo must look like (the real short path runs in
tests/integration/test_noop_memo.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import rocmbuild
from rocmbuild.commands import noop_memo
from rocmbuild.core import hostenv, options


def test_left_out_variables_are_never_read_or_passed_to_builds() -> None:
    assert not noop_memo.VOLATILE_ENV & set(options.ENV)
    assert not noop_memo.VOLATILE_ENV & set(hostenv.PASS_ENV)


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
    assert noop_memo._flags(argv) == want


def _memo(**change: object) -> dict[str, object]:
    memo: dict[str, object] = {
        "schema": noop_memo.SCHEMA, "cache_key": "a" * 64, "host": "b" * 64,
        "wheel_dir": "/w/wheels", "level": 1, "github": False, "want_compiler": True,
        "want_components": False, "dists": ["torch"], "files": [["/r/demo.toml", "c" * 64]],
        "absent": [], "dirs": ["/r"], "seal": "d" * 64,
    }
    memo.update(change)
    return memo


@pytest.mark.parametrize("change", [
    {"schema": "rocmbuild-memo/0"}, {"cache_key": "../x"}, {"host": "B" * 64},
    {"wheel_dir": "relative/wheels"}, {"level": True}, {"level": 10}, {"github": 0},
    {"want_compiler": "yes"}, {"dists": "torch"}, {"files": []},
    {"files": [["/r/demo.toml", "c" * 63]]}, {"files": [["/r/demo.toml"]]},
    {"absent": ["/a\0b"]}, {"dirs": None}, {"seal": None}, {"seal": "D" * 64},
    {"extra": 1},
])
def test_a_memo_with_a_bad_value_is_refused(change: dict[str, object]) -> None:
    assert noop_memo._valid(_memo())
    assert not noop_memo._valid(json.loads(json.dumps(_memo(**change))))


def test_the_code_stamp_covers_every_module_of_the_package() -> None:
    """A memo written by other code must be a miss: every module rocmbuild runs is stamped."""
    pkg = Path(rocmbuild.__file__).parent
    stamped = {Path(p).relative_to(pkg).as_posix() for p, _, _ in noop_memo._code()}
    assert stamped == {p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py")
                       if "__pycache__" not in p.parts}
    assert {"cli.py", "plan/render.py", "commands/noop_memo.py"} <= stamped


def _written(tmp_path: Path, digest: str = "e" * 64, **change: object) -> Path:
    """A memo as ``remember`` seals it for the inputs ``digest``, then ``change``d."""
    body = {k: v for k, v in _memo().items() if k != "seal"}
    memo = {**body, "seal": noop_memo.seal(digest, body), **change}
    path = tmp_path / f"{digest}.json"
    path.write_text(json.dumps(memo))
    return path


def test_a_sealed_memo_is_read_back_for_its_own_inputs(tmp_path: Path) -> None:
    path = _written(tmp_path)
    got = noop_memo._read(path, "e" * 64)
    assert got is not None and got["cache_key"] == "a" * 64 and "seal" not in got


def test_a_memo_whose_cache_key_was_swapped_does_not_match_its_seal(tmp_path: Path) -> None:
    """Another valid key (another entry of the cache, e.g. another arch's build): a miss."""
    assert noop_memo._read(_written(tmp_path, cache_key="f" * 64), "e" * 64) is None
    assert noop_memo._read(_written(tmp_path, host="f" * 64), "e" * 64) is None
    assert noop_memo._read(_written(tmp_path, files=[["/r/other.toml", "c" * 64]]),
                          "e" * 64) is None


def test_a_memo_copied_to_another_command_lines_name_is_a_miss(tmp_path: Path) -> None:
    path = _written(tmp_path)
    other = tmp_path / f"{'9' * 64}.json"
    other.write_bytes(path.read_bytes())
    assert noop_memo._read(other, "9" * 64) is None


@pytest.mark.parametrize("shape", ["fifo", "symlink", "deep", "random", "directory", "nan"])
def test_a_memo_that_is_not_a_memo_file_is_a_miss_at_once(tmp_path: Path, shape: str) -> None:
    """Read through core.untrusted: no FIFO waited on, no symlink followed, no RecursionError,
    no UnicodeDecodeError."""
    good = _written(tmp_path)
    path = tmp_path / "m.json"
    if shape == "fifo":
        os.mkfifo(path)
    elif shape == "symlink":
        path.symlink_to(good)
    elif shape == "deep":
        path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    elif shape == "random":
        path.write_bytes(bytes(range(256)) * 8)
    elif shape == "directory":
        path.mkdir()
    else:
        path.write_text(good.read_text().replace('"level": 1', '"level": NaN'))
    assert noop_memo._read(path, "e" * 64) is None
