"""The stack lock files (publish/lockfile.py): byte-identical to the golden files for the same
inputs (tests/golden/stack-*.toml / .txt; ROCMBUILD_UPDATE_GOLDEN=1 rewrites them after an
intended change), in a fixed order whatever the order of the wheels, and a valid PEP 751 lock."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from rocmbuild.publish import lockfile
from rocmbuild.publish.lockfile import Locked, StackLock

GOLDEN = Path(__file__).parents[2] / "golden"
EXT = Locked("stack-ext", "1.0+rocm7.2.torch2.13.cxx11abitrue.gfx942",
             "stack_ext-1.0+rocm7.2.torch2.13.cxx11abitrue.gfx942-cp311-cp311-linux_x86_64.whl",
             49862, "ab" * 32)
PURE = Locked("stack-pure", "1.0+rocm7.2.gfx942", "stack_pure-1.0+rocm7.2.gfx942-py3-none-any.whl",
              2701, "cd" * 32, ">=3.9")
LOCK = StackLock("small", "gfx942", "https://wheels.example/stable/", (PURE, EXT),
                 "2.13.0+rocm7.2", "host")


def _golden(name: str, data: bytes) -> None:
    path = GOLDEN / name
    if os.environ.get("ROCMBUILD_UPDATE_GOLDEN") == "1":
        path.write_bytes(data)
    assert data == path.read_bytes(), f"{name} changed; ROCMBUILD_UPDATE_GOLDEN=1 to accept"


def test_same_inputs_same_bytes_as_the_golden_files() -> None:
    files = lockfile.files([LOCK])
    assert sorted(files) == ["gfx942/stacks/small/constraints.txt",
                             "gfx942/stacks/small/pylock.toml"]
    _golden("stack-small-gfx942.pylock.toml", files["gfx942/stacks/small/pylock.toml"])
    _golden("stack-small-gfx942.constraints.txt", files["gfx942/stacks/small/constraints.txt"])
    swapped = StackLock(*[(EXT, PURE) if f == "wheels" else getattr(LOCK, f)
                          for f in LOCK.__dataclass_fields__])
    assert lockfile.files([swapped]) == files


def test_pylock_is_pep_751() -> None:
    data = tomllib.loads(lockfile.pylock(LOCK))
    assert data["lock-version"] == "1.0" and data["created-by"] == "rocmbuild"
    assert [p["name"] for p in data["packages"]] == ["stack-ext", "stack-pure"]
    (wheel,) = data["packages"][0]["wheels"]
    assert wheel["url"] == ("https://wheels.example/stable/files/stack_ext-1.0%2Brocm7.2.torch2.13"
                            ".cxx11abitrue.gfx942-cp311-cp311-linux_x86_64.whl")
    assert wheel["hashes"] == {"sha256": "ab" * 32} and wheel["size"] == 49862
    assert data["packages"][0]["index"] == "https://wheels.example/stable/gfx942/simple/"
    assert data["packages"][1]["requires-python"] == ">=3.9"
    assert data["tool"]["rocmbuild"] == {"stack": "small", "view": "gfx942",
                                         "torch": "2.13.0+rocm7.2", "torch-from": "host",
                                         "torch-requires": "torch==2.13.*"}
    # as the ABI-bound wheels' METADATA says (the tag stage's Requires-Dist), and none without
    # a torch
    bare = StackLock("small", "gfx942", LOCK.stage_url, (PURE,), "", "host")
    assert "torch-requires" not in tomllib.loads(lockfile.pylock(bare))["tool"]["rocmbuild"]


def test_constraints_pin_the_set_and_its_torch() -> None:
    lines = [ln for ln in lockfile.constraints(LOCK).splitlines() if not ln.startswith("#")]
    assert lines == ["stack-ext==1.0+rocm7.2.torch2.13.cxx11abitrue.gfx942",
                     "stack-pure==1.0+rocm7.2.gfx942", "torch==2.13.0+rocm7.2"]
