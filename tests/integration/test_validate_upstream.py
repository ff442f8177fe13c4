"""The upstream-test step on the CPU: the real pytest in a real validation venv, a real wheel
built here, and a small fixture test file of our own (tests/fixtures/upstream) standing in for a
project's suite. What cannot run here is the real suite on a GPU (flash-attn's: see
docs/dev/validate-runs.md for the H200 run); the wheel's rocmbuild.json therefore says the tests
need no GPU ("gpu": false). One venv serves the step's mechanics; one `rocmbuild validate` run
proves the failure path end to end (exit 8, the test id)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from rocmbuild.artifacts.results import Status
from rocmbuild.core.errors import UsageError
from rocmbuild.core.run import run
from rocmbuild.validate import install as inst
from rocmbuild.validate import upstream
from tests.integration.test_validate_wheels import _add_to_wheel

FIXTURE = Path(__file__).parents[1] / "fixtures" / "upstream"
TEST_FILE = "tests/test_tiny_upstream.py"


def _wheel(tmp: Path, env: dict[str, str]) -> Path:
    """A pure-Python wheel (rbtiny) whose rocmbuild.json names the fixture's tests."""
    src = tmp / "src"
    (src / "rbtiny").mkdir(parents=True)
    (src / "rbtiny" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (src / "setup.py").write_text(textwrap.dedent("""
        from setuptools import setup
        setup(name="rbtiny", version="1.0", packages=["rbtiny"])
    """))
    out = tmp / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
         "-w", out, src])
    whl = next(out.glob("rbtiny-1.0-*.whl"))
    meta = {"rocmbuild_version": "0.1.0", "recipe": "rbtiny", "variant": "default",
            "archs": [], "validate_upstream": {"tests": [TEST_FILE], "env": env, "gpu": False}}
    _add_to_wheel(whl, "rocmbuild.json", json.dumps(meta).encode())
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("upstream")
    v = inst.create_venv(tmp / "venv", tmp / "venv.log", None)
    ok, out = inst.install(v, [inst.read_wheel(_wheel(tmp, {}))])
    assert ok, out
    return v


def _step(venv, tmp, per_function, env=None, cap=120.0, tests=(TEST_FILE,)):
    spec = upstream.UpstreamSpec(tuple(tests), env or {}, gpu=False)
    return upstream.run_upstream(venv, FIXTURE, spec, per_function, cap, tmp, {}, seed=7)


def _functions(detail: dict) -> dict[str, dict]:
    return {f["function"].split("::")[1]: f for f in detail["functions"]}


def test_sample_per_function_passes_and_reports(venv, tmp_path):
    status, reason, detail = _step(venv, tmp_path, 3)
    assert status is Status.SUCCESS, reason
    fns = _functions(detail)
    assert {k: (v["cases"], v["sampled"]) for k, v in fns.items()} == {
        "test_add": (30, 3), "test_square": (12, 3), "test_skipped_upstream": (4, 3),
        "test_slow": (8, 3)}
    assert fns["test_add"]["passed"] == 3 and fns["test_skipped_upstream"]["skipped"] == 3
    assert detail["collected"] == 54 and detail["sampled"] == 12
    assert "9 passed, 0 failed, 3 skipped, 0 not reached of 12 sampled (54 cases, seed 7)" in (
        reason)


def test_time_cap_reports_not_reached(venv, tmp_path):
    status, reason, detail = _step(venv, tmp_path, 8, {"RB_TINY_SLEEP": "1"}, cap=3.0)
    assert status is Status.SUCCESS, reason  # nothing failed; what the cap cut is no pass
    fns = _functions(detail)
    assert 0 < fns["test_slow"]["not_reached"] < 8
    assert detail["not_reached"] == sum(f["not_reached"] for f in fns.values())
    assert f"{detail['not_reached']} not reached" in reason


def test_a_missing_test_file_is_named(venv, tmp_path):
    with pytest.raises(UsageError, match="tests/nope.py not found in the source tree"):
        _step(venv, tmp_path, 3, tests=("tests/nope.py",))
    with pytest.raises(UsageError, match="is not a file inside the source tree"):
        _step(venv, tmp_path, 3, tests=("../outside.py",))


def test_step_skips_with_reasons(venv, tmp_path):
    prov = {"validate_upstream": {"tests": [TEST_FILE]}}  # gpu: true by default
    assert upstream.step(venv, prov, FIXTURE, 0, 60, tmp_path, {}, True)[:2] == (
        Status.SKIPPED, "--upstream-tests 0")
    assert upstream.step(venv, prov, FIXTURE, 3, 60, tmp_path, {}, False)[:2] == (
        Status.SKIPPED, "no GPU: the upstream tests need one")
    assert upstream.step(venv, {}, FIXTURE, 3, 60, tmp_path, {}, True)[0] is Status.SKIPPED
    assert "source tree is not here" in upstream.step(
        venv, prov, tmp_path / "none", 3, 60, tmp_path, {}, True)[1]


def test_a_failing_case_fails_validate_with_its_test_id(tmp_path):
    """Every case of test_square is sampled, so the deliberately failing one runs: exit 8, one
    error line naming the id to rerun, and the HTML report shows that command as the fix."""
    whl = _wheel(tmp_path, {"RB_TINY_FAIL": "1"})
    j = tmp_path / "r.json"
    r = run([sys.executable, "-m", "rocmbuild", "--workdir", tmp_path / "work", "validate", whl,
             "--no-kernels", "--keep-broken", "--upstream-src", FIXTURE, "--upstream-tests",
             "12", "--json-file", j, "--html", tmp_path / "r.html"],
            check=False, capture=True, timeout=600)
    assert r.returncode == 8, r.output
    bad = "tests/test_tiny_upstream.py::test_square[7]"
    assert bad in r.output and "Traceback" not in r.output
    step = json.loads(j.read_text())["wheels"][0]["steps"]["upstream"]
    assert _functions(step["detail"])["test_square"]["failures"][0].startswith(bad)
    assert f"python -m pytest '{bad}'" in step["reason"]
    assert f"python -m pytest &#x27;{bad}&#x27;" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("seed", [1, 2])
def test_same_seed_same_sample(seed):
    ids = [f"t.py::test_{f}[{i}]" for f in "abc" for i in range(20)]
    one, two = upstream.sample(ids, 4, seed), upstream.sample(ids, 4, seed)
    assert one == two and len(one) == 12
    assert [upstream.function_of(i) for i in one[:3]] == ["t.py::test_a", "t.py::test_b",
                                                           "t.py::test_c"]  # interleaved
