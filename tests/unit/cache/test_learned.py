"""learned.py and launchers/memlog.py's record format: per-unit peak memory merged per recipe +
variant + archs + compiler, read back as untrusted, and a plan that sizes MAX_JOBS by the
measured p95 (+15 %) and says so, with the cache key unchanged. The units files here are written
by the test in memlog's format (tests/integration/test_learned_build.py runs the real launcher
in a real cmake build)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocmbuild.cache import learned
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan.render import Target, render
from rocmbuild.programs.launchers.memlog import output_of, record
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe

GiB = 1024**3
HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=58 * GiB, memory_source="MemAvailable")


def _units(path: Path, rss_gib: list[float], rc: int = 0) -> Path:
    with open(path, "a") as f:
        for i, g in enumerate(rss_gib):
            f.write(record(["c++", "-c", f"u{i}.cpp", "-o", f"u{i}.o"], int(g * GiB) // 1024,
                           1.5, rc))
    return path


def test_memlog_record_and_output() -> None:
    assert output_of(["clang++", "-c", "a.cpp", "-o", "obj/a.o"]) == "obj/a.o"
    assert output_of(["clang++", "-c", "a.cpp", "-oobj/a.o"]) == "obj/a.o"
    assert output_of(["clang++", "-c", "a.cpp"]) == ""
    assert output_of(["clang++", "-E", "-dM", "a.cpp", "-o", "-"]) == ""
    rec = json.loads(record(["c++", "-c", "a.cpp", "-o", "a.o"], 2048, 1.23456, -9))
    assert rec == {"out": "a.o", "unit": True, "rss": 2048 * 1024, "s": 1.235, "rc": -9}
    assert json.loads(record(["c++", "a.o", "-o", "a.so"], 1, 1, 0))["unit"] is False


def test_only_compile_units_are_learned(tmp_path: Path) -> None:
    """The pip-wheel backend's wrappers see links too (setuptools links with CC/CXX): memlog
    records them, learned memory counts only the compiles."""
    units = _units(tmp_path / "units.jsonl", [1.0, 1.0, 2.0])
    with open(units, "a") as f:
        f.write(record(["c++", "-shared", "u0.o", "u1.o", "-o", "_C.so"], 8 * GiB // 1024, 3, 0))
        f.write('{"out": "old.o", "rss": 5, "s": 1, "rc": 0}\n')  # no "unit": not counted
    assert learned.read_units(units) == {"u0.o": GiB, "u1.o": GiB, "u2.o": 2 * GiB}


def test_absolute_outputs_are_named_inside_the_tree(tmp_path: Path) -> None:
    """torch's cpp_extension writes absolute object paths, and the tree's path has the cache
    key in it: the same unit of two builds (two keys) is one unit."""
    for key, rss in (("k1", 1 << 20), ("k2", 2 << 20)):
        tree = tmp_path / "src/ext" / key
        log = tmp_path / f"{key}.jsonl"
        log.write_text(
            record(["c++", "-c", "u.cpp", "-o", str(tree / "build/temp/u.o")], rss, 1, 0) +
            record(["c++", "-c", "v.cpp", "-o", "/elsewhere/v.o"], rss, 1, 0))
        got = learned.record(tmp_path / "cache", log, "ext", "v", ("gfx942",), "", tree)
    assert got is not None and got.count == 2 and got.max == 2 << 30
    data = json.loads(Path(got.path).read_text())
    assert data["units"] == {"/elsewhere/v.o": 2 << 30, "build/temp/u.o": 2 << 30}


def test_percentiles() -> None:
    values = list(range(1, 101))
    assert learned.percentile(values, 0.5) == 50
    assert learned.percentile(values, 0.95) == 95
    assert learned.percentile([7], 0.95) == 7


def test_record_load_pick_roundtrip(tmp_path: Path) -> None:
    units = _units(tmp_path / "units.jsonl", [1.0] * 18 + [9.0, 10.0])
    _units(units, [50.0], rc=-9)  # an OOM-killed unit: not a measurement of a finished compile
    got = learned.record(tmp_path / "cache", units, "flash-attn", "ck", ("gfx942",), "22.0")
    assert got is not None and got.count == 20
    assert got.p50 == GiB and got.p95 == 9 * GiB and got.max == 10 * GiB
    loaded = learned.load(tmp_path / "cache", "flash-attn")
    assert [(m.count, m.p95) for m in loaded] == [(20, 9 * GiB)]
    assert learned.pick(loaded, "flash-attn", "ck", ["gfx942"], "22.0") == loaded[0]
    for other in (("flash-attn", "triton", ["gfx942"], "22.0"),
                  ("flash-attn", "ck", ["gfx942", "gfx90a"], "22.0"),
                  ("flash-attn", "ck", ["gfx942"], "19.1")):
        assert learned.pick(loaded, *other) is None
    assert loaded[0].why() == "9 GiB p95 measured over 20 units + 15 %"


def test_record_keeps_each_units_largest_peak(tmp_path: Path) -> None:
    """A rebuild from a compile cache takes little memory per unit: it must not lower what was
    learned."""
    cache = tmp_path / "cache"
    learned.record(cache, _units(tmp_path / "a.jsonl", [4.0, 4.0, 4.0]), "r", "v", ("gfx942",), "")
    got = learned.record(cache, _units(tmp_path / "b.jsonl", [0.1, 0.1, 0.1, 2.0]), "r", "v",
                         ("gfx942",), "")
    assert got is not None and got.count == 4 and got.p50 == 4 * GiB
    assert learned.record(cache, tmp_path / "missing.jsonl", "r", "v", ("gfx942",), "") is None


@pytest.mark.parametrize("content", [
    "not json", "[]", '{"schema": "other"}',
    '{"schema": "rocmbuild-learned/1", "recipe": "r", "variant": "v", "archs": ["gfx942"], '
    '"compiler": "", "units": {"a.o": -5}}',
    '{"schema": "rocmbuild-learned/1", "recipe": "r", "variant": "v", "archs": "gfx942", '
    '"compiler": "", "units": {"a.o": 5}}',
    # round two: core.untrusted refuses these before the checks above look
    "[" * 100_000, '{"schema": NaN}', '{"units": {"a.o": ' + "9" * 400 + "}}",
    '{"schema": "rocmbuild-learned/1", "recipe": "r", "variant": "v", "archs": ["gfx942"], '
    '"compiler": "", "units": {"a.o": 9000000000000000000}}',  # 8 EiB for one compile: no
])
def test_a_broken_learned_file_is_ignored_with_a_warning(
        tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "learned" / "r"
    d.mkdir(parents=True)
    (d / "0123456789abcdef.json").write_text(content)
    assert learned.load(tmp_path, "r") == ()
    err = capsys.readouterr().err
    assert "0123456789abcdef.json: ignored (" in err and "delete the file" in err
    assert "Traceback" not in err


def test_recipe_names_never_leave_the_cache(tmp_path: Path) -> None:
    assert learned.file_for(tmp_path, "../x", "v", ("gfx942",), "") is None
    assert learned.load(tmp_path, "../x") == ()


def test_plan_uses_the_measured_p95_and_keeps_its_cache_key(tmp_path: Path) -> None:
    recipe = load(find_recipe("flash-attn")).on_line("2.8-fork")
    target = Target(arch="gfx942")
    before = render(recipe, target, HOST)
    units = _units(tmp_path / "u.jsonl", [1.0] * 18 + [9.1, 9.5])
    learned.record(tmp_path, units, "flash-attn", before.variant, before.archs, "")
    after = render(recipe, target, HOST, learned.load(tmp_path, "flash-attn"))
    # 58 GiB / (9.1 GiB x 1.15 = 10.5 GiB) = 5 jobs, instead of min(16 cpus, 58 / 1.5 (the
    # recipe)) = 16
    assert (before.jobs, after.jobs) == (16, 5)
    assert "9.1 GiB p95 measured over 20 units + 15 %" in after.jobs_reason, after.jobs_reason
    assert after.jobs_reason.startswith("min(16 cpus, floor(58.0 GiB usable (MemAvailable) / "
                                        "10.5 GiB per job (9.1 GiB p95 measured over 20 units")
    assert after.cache_key == before.cache_key
    assert after.mem_per_job_gb == before.mem_per_job_gb == 1.5  # the recipe's, as keyed
    # --jobs still wins; another arch set learns on its own
    assert render(recipe, Target(arch="gfx942", jobs=3), HOST,
                  learned.load(tmp_path, "flash-attn")).jobs == 3
    assert render(recipe, Target(arch="gfx90a"), HOST,
                  learned.load(tmp_path, "flash-attn")).jobs == 16


def test_learned_files_that_are_not_files_are_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO (never opened to block) and a directory where a learned file belongs."""
    d = tmp_path / "learned" / "r"
    d.mkdir(parents=True)
    os.mkfifo(d / "0123456789abcdef.json")
    (d / "fedcba9876543210.json").mkdir()
    assert learned.load(tmp_path, "r") == ()
    err = capsys.readouterr().err
    assert err.count("is not a regular file") == 2 and "Traceback" not in err


def test_units_log_lines_that_are_not_records_are_skipped(tmp_path: Path) -> None:
    log = _units(tmp_path / "units.jsonl", [1.0])
    with log.open("ab") as f:
        f.write(b"[" * 100_000 + b"\n" + bytes(range(128, 256)) + b"\n"
                + b'{"out": "x.o", "unit": true, "rc": 0, "rss": ' + b"9" * 400 + b"}\n"
                + b'{"out": "y.o", "unit": true, "rc": 0, "rss": 9000000000000000000}\n')
    assert len(learned.read_units(log)) == 1  # the good record only
