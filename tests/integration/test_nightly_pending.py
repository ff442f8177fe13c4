"""Build and validate as two steps, for real: a local nightly of a small path recipe whose
validation needs a runtime module this host's validation environment cannot get
(``[validate] requires = ["nightly-helper"]``, with pip told to use only an empty find-links
directory: pip's real "no matching distribution", exit 10 ToolchainError, which is how validate
says "cannot run here", as it does for triton on a CPU host). The cell's wheel is built, goes to
staging marked pending, is not promoted, and the report says where and how it will be validated.
Then ``nightly --validate-pending`` with the requirement satisfied (the helper's wheel, built by
real pip, in the find-links directory: the GPU host's environment) validates it from the cache
and promotes it; the report, page and .prom are written again. No GPU here (the kernel gate is
SKIPPED either way, as ``build --validate`` records it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import rocmbuild

CELL = "needy.default.default.gfx942"
PLAIN = "plain.default.default.gfx942"
SETUP = 'from setuptools import setup\nsetup(name="{name}", version="1.0", packages=["{pkg}"])\n'


def _recipe(d: Path, name: str, validate: str, imports: str = '"demo"') -> None:
    src = d / f"{name}-src"
    (src / "demo").mkdir(parents=True)
    (src / "demo/__init__.py").write_text("VALUE = 1\n")
    (src / "setup.py").write_text(SETUP.format(name=f"nightly-{name}", pkg="demo"))
    (d / f"{name}.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-{name}"
[source]
path = "{name}-src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
[validate]
imports = [{imports}]
{validate}
""")


def _helper_wheel(d: Path, out: Path, name: str = "nightly-helper") -> None:
    """The validation's runtime dependency, a real wheel built by pip."""
    pkg = name.replace("-", "_")
    src = d / f"{pkg}-src"
    (src / pkg).mkdir(parents=True)
    (src / pkg / "__init__.py").write_text("")
    (src / "setup.py").write_text(SETUP.format(name=name, pkg=pkg))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)], check=True)


def _stage(d: Path, stage: str) -> set[str]:
    p = d / "index" / stage / "simple"
    return {f["filename"] for j in p.glob("*/index.json")
            for f in json.loads(j.read_text())["files"]}


def test_pending_then_validated_elsewhere(tmp_path: Path) -> None:
    d = tmp_path
    _recipe(d, "needy", 'requires = ["nightly-helper"]')
    _recipe(d, "plain", "")
    links = d / "links"
    links.mkdir()
    config = d / "nightly.toml"
    config.write_text("""[[matrix]]
recipes = ["needy.toml", "plain.toml"]
archs = ["gfx942"]
[publish]
index = "index"
[reports]
dir = "reports"
""")
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert first.returncode == 0, first.stderr  # built, pending: not a failed cell
    cells = {c["cell"]: c for c in json.loads(first.stdout)["cells"]}
    needy, plain = cells[CELL], cells[PLAIN]
    assert needy["status"] == "success" and needy["validation"] == "pending", needy
    assert needy["promoted"] is False
    assert "NOT VALIDATED" in needy["reason"] and "--validate-pending" in needy["reason"]
    assert "nightly-helper" in needy["reason"]
    assert plain["validation"] == "passed" and plain["promoted"] is True
    assert _stage(d, "staging") == {needy["wheel"], plain["wheel"]}
    assert _stage(d, "stable") == {plain["wheel"]}  # the pending wheel is never promoted
    rec = json.loads(next(d.rglob(f"pending/{CELL}.json")).read_text())
    assert rec["cell"] == CELL and rec["wheel"] == needy["wheel"]
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    summary = (run_dir / "summary.md").read_text()
    assert "built, pending validation" in summary and "--validate-pending" in summary
    prom = (d / "reports" / "rocmbuild.prom").read_text()
    assert f'rocmbuild_nightly_cell_validation_pending{{cell="{CELL}"}} 1' in prom
    assert f'rocmbuild_nightly_cell_validated{{cell="{CELL}"}} 0' in prom
    assert f'rocmbuild_nightly_cell_built{{cell="{CELL}"}} 1' in prom

    # this host still cannot: it stays pending, exit 10, nothing promoted
    again = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert again.returncode == 10, again.stderr
    assert "still pending" in again.stdout and _stage(d, "stable") == {plain["wheel"]}

    # the validation host: the requirement is there now
    _helper_wheel(d, links)
    # a record edited to name another cell's cache key (plain's validated wheel): refused
    # before anything is validated or promoted; the record stays, the wheel stays pending
    rec_path = next(d.rglob(f"pending/{CELL}.json"))
    original = rec_path.read_text()
    keys = {Path(json.loads(e.read_text())["wheel"]).name: e.parent.name
            for e in d.rglob("cache/wheels/*/entry.json")}
    rec_path.write_text(json.dumps({**json.loads(original), "cache_key": keys[plain["wheel"]]}))
    forged = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert forged.returncode != 0, forged.stderr
    assert f"the cache key holds {plain['wheel']}, not the record's" in forged.stderr
    assert _stage(d, "stable") == {plain["wheel"]} and rec_path.exists()
    rec_path.write_text(original)
    done = rocmbuild("nightly", "--config", str(config), "--validate-pending", "--json",
                     cwd=d, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert [(r["cell"], r["validation"], r["promoted"]) for r in got] == [(CELL, "passed", True)]
    assert _stage(d, "stable") == {needy["wheel"], plain["wheel"]}
    assert not list(d.rglob(f"pending/{CELL}.json"))
    report = json.loads((run_dir / "report.json").read_text())
    after = {c["cell"]: c for c in report["cells"]}[CELL]
    assert after["validation"] == "passed" and after["promoted"] is True
    assert "then validation passed on" in after["reason"], after
    prom = (d / "reports" / "rocmbuild.prom").read_text()
    assert f'rocmbuild_nightly_cell_validation_pending{{cell="{CELL}"}} 0' in prom
    assert f'rocmbuild_nightly_cell_validated{{cell="{CELL}"}} 1' in prom
    assert "built, validated" in (run_dir / "summary.md").read_text()
    # nothing left: a second call has nothing to do
    idle = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert idle.returncode == 0 and "no pending wheels" in idle.stderr
    # the next night: the cell's wheel is validated now, so it is skipped
    night2 = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert night2.returncode == 0, night2.stderr
    assert {c["cell"]: c["status"] for c in json.loads(night2.stdout)["cells"]} == {
        CELL: "skipped", PLAIN: "skipped"}


NEEDY, BLOCKED = CELL, "blocked.default.default.gfx942"


def test_a_stack_is_promoted_by_validate_pending_only_when_all_its_members_are_green(
        tmp_path: Path) -> None:
    """A stack group (``stacks = [...]``) of three path recipes: plain validates at once,
    needy and blocked are pending. ``--validate-pending`` with only needy's requirement there:
    needy passes but stays in staging, held back by blocked (still pending); nothing of the
    stack is served (the code before promoted needy alone). With blocked's requirement too:
    blocked passes, the group is green, and all three are promoted, the held ones with it."""
    d = tmp_path
    _recipe(d, "needy", 'requires = ["nightly-helper"]')
    _recipe(d, "plain", "")
    _recipe(d, "blocked", 'requires = ["nightly-absent"]')
    (d / "trio.toml").write_text("schema_version = 1\n" + "".join(
        f'[[members]]\nrecipe = "{d / n}.toml"\n' for n in ("needy", "plain", "blocked")))
    links = d / "links"
    links.mkdir()
    config = d / "nightly.toml"
    config.write_text('[[matrix]]\nstacks = ["trio.toml"]\narchs = ["gfx942"]\n'
                      '[publish]\nindex = "index"\n[reports]\ndir = "reports"\n')
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert first.returncode == 0, first.stderr
    cells = {c["cell"]: c for c in json.loads(first.stdout)["cells"]}
    assert {c: (v["validation"], v["promoted"]) for c, v in cells.items()} == {
        NEEDY: ("pending", False), PLAIN: ("passed", False), BLOCKED: ("pending", False)}
    assert cells[PLAIN]["reason"].endswith(
        f"not promoted: stack trio.gfx942 is not green ({NEEDY}, {BLOCKED} not)")
    wheels = {c["wheel"] for c in cells.values()}
    assert _stage(d, "staging") == wheels and _stage(d, "stable") == set()

    _helper_wheel(d, links)  # needy can be validated now, blocked not yet
    held = rocmbuild("nightly", "--config", str(config), "--validate-pending", "--json",
                     cwd=d, env=env)
    assert held.returncode == 10, held.stderr  # blocked is still pending
    got = {r["cell"]: r for r in json.loads(held.stdout)}
    assert {c: (r["validation"], r["promoted"]) for c, r in got.items()} == {
        BLOCKED: ("pending", False), NEEDY: ("passed", False)}
    assert got[NEEDY]["reason"].endswith(
        f"; not promoted: stack trio.gfx942 is not green ({BLOCKED} not)"), got[NEEDY]
    assert _stage(d, "stable") == set()  # no member of the stack is served alone
    run_dir = next(p for p in (d / "reports").iterdir() if p.is_dir())
    after = {c["cell"]: c for c in json.loads((run_dir / "report.json").read_text())["cells"]}
    assert (after[NEEDY]["validation"], after[NEEDY]["promoted"]) == ("passed", False)
    assert f"not green ({BLOCKED} not)" in after[NEEDY]["reason"]

    _helper_wheel(d, links, "nightly-absent")  # blocked too: the stack is green
    done = rocmbuild("nightly", "--config", str(config), "--validate-pending", "--json",
                     cwd=d, env=env)
    assert done.returncode == 0, done.stderr
    assert [(r["cell"], r["validation"], r["promoted"]) for r in json.loads(done.stdout)] == [
        (BLOCKED, "passed", True), (NEEDY, "passed", True), (PLAIN, "passed", True)]
    assert _stage(d, "stable") == wheels
    after = {c["cell"]: c for c in json.loads((run_dir / "report.json").read_text())["cells"]}
    assert all(c["promoted"] and c["validation"] == "passed" and c["status"] == "success"
               for c in after.values()), after
    assert after[PLAIN]["reason"] == "built, validation passed, then stack trio.gfx942 is " \
        "green, promoted", after[PLAIN]


def test_a_kernel_gate_without_a_gpu_is_pending_not_passed(tmp_path: Path) -> None:
    """A recipe whose validation checks an attention kernel (``[validate] kernel = "sdpa"``)
    built on this GPU-less host: the gate cannot run, so the wheel is pending (staged, not
    promoted) and ``--validate-pending`` here keeps it so (exit 10); ``build --validate`` of the
    same recipe still passes with the gate SKIPPED, as a user's build says. (The GPU side ran on
    an H200: docs/dev/nightly.md.)"""
    import torch
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the gate runs here")
    d = tmp_path
    _recipe(d, "attn", 'kernel = "sdpa"')
    config = d / "nightly.toml"
    config.write_text('[[matrix]]\nrecipes = ["attn.toml"]\narchs = ["gfx942"]\n'
                      '[publish]\nindex = "index"\n[reports]\ndir = "reports"\n')
    env = {"PIP_NO_INDEX": "1"}
    first = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
    assert first.returncode == 0, first.stderr
    (cell,) = json.loads(first.stdout)["cells"]
    assert (cell["validation"], cell["promoted"]) == ("pending", False), cell
    assert "the kernel gate (sdpa) cannot run on this host: no GPU" in cell["reason"], cell
    assert _stage(d, "stable") == set() and _stage(d, "staging") == {cell["wheel"]}
    again = rocmbuild("nightly", "--config", str(config), "--validate-pending", cwd=d, env=env)
    assert again.returncode == 10, again.stderr
    assert _stage(d, "stable") == set()
    built = rocmbuild("--workdir", str(d / "user"), "build", str(d / "attn.toml"), "--arch",
                      "gfx942", "--validate", cwd=d, env=env)
    assert built.returncode == 0, built.stderr


def test_a_wheel_passed_without_its_kernel_gate_is_not_skipped_by_the_nightly(
        tmp_path: Path) -> None:
    """A user's ``rocmbuild build --validate`` of a recipe with an attention kernel to check
    (``[validate] kernel = "sdpa"``), in the nightly's own workspace and cache (``--workdir
    build``: the config's default workdir, its cache under it), on this GPU-less host: it
    passes with the gate SKIPPED, and the cache records that the gate could not run. Night 1
    takes the wheel from the cache, cannot validate it: pending, staged, not promoted. Night 2:
    the cache says passed and staging has the wheel, but its kernels were never checked, so the
    cell is not SKIPPED (the code before SKIPPED it and promoted it unchecked): a cache hit,
    pending again, never promoted. (No GPU here; the GPU side is ``--validate-pending``.)"""
    import torch
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the gate runs here")
    d = tmp_path
    _recipe(d, "attn", 'kernel = "sdpa"')
    config = d / "nightly.toml"
    config.write_text('[[matrix]]\nrecipes = ["attn.toml"]\narchs = ["gfx942"]\n'
                      '[publish]\nindex = "index"\n[reports]\ndir = "reports"\n')
    env = {"PIP_NO_INDEX": "1"}
    built = rocmbuild("--workdir", str(d / "build"), "build", str(d / "attn.toml"), "--arch",
                      "gfx942", "--validate", cwd=d, env=env)
    assert built.returncode == 0, built.stderr  # the user's build passes, as before
    (entry,) = (d / "build/cache/wheels").glob("*/entry.json")
    validation = json.loads(entry.read_text())["validation"]
    assert validation["status"] == "passed", validation
    assert validation["needs_gpu"].startswith("no GPU"), validation
    for night in (1, 2):
        r = rocmbuild("nightly", "--config", str(config), "--json", cwd=d, env=env)
        assert r.returncode == 0, r.stderr
        (cell,) = json.loads(r.stdout)["cells"]
        assert (cell["status"], cell["validation"], cell["promoted"]) == (
            "success", "pending", False), (night, cell)
        assert cell["reason"].startswith("cached, NOT VALIDATED"), (night, cell)
        assert _stage(d, "staging") == {cell["wheel"]} and _stage(d, "stable") == set()
    last = sorted(p for p in (d / "reports").iterdir() if p.is_dir())[-1]
    (planned,) = json.loads((last / "manifest.json").read_text())["cells"]
    assert planned["decision"] == "build", planned
    assert any("its kernel gate did not run" in w for w in planned["reasons"]), planned


LEFT, RIGHT = "left.default.default.gfx942", "right.default.default.gfx942"
HELD = "not promoted: stack duo.gfx942 is not green ({} not)"


def _duo(d: Path, first: str, second: str) -> Path:
    """A stack group of two path recipes, ``duo.gfx942``, and its nightly.toml."""
    (d / "duo.toml").write_text("schema_version = 1\n" + "".join(
        f'[[members]]\nrecipe = "{d / n}.toml"\n' for n in (first, second)))
    (d / "links").mkdir()
    config = d / "nightly.toml"
    config.write_text('[[matrix]]\nstacks = ["duo.toml"]\narchs = ["gfx942"]\n'
                      '[publish]\nindex = "index"\n[reports]\ndir = "reports"\n')
    return config


def _night(d: Path, config: Path) -> tuple[int, dict[str, dict[str, object]]]:
    r = rocmbuild("nightly", "--config", str(config), "--json", cwd=d,
                  env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(d / "links")})
    return r.returncode, {c["cell"]: c for c in json.loads(r.stdout)["cells"]}


def test_a_skipped_stack_member_stays_held_while_its_partner_fails(tmp_path: Path) -> None:
    """Three real nights of a stack of two path recipes. Night 1: left passes, right fails
    its validation (it imports ``demo.extra``, which its source lacks): left is held in
    staging. Night 2: left is unchanged (SKIP) and right fails again: left is still held, not
    served alone (the code before promoted a SKIP cell whatever its group). Night 3: right's
    source gets the module: right is rebuilt and passes, the group is green, both are served."""
    d = tmp_path
    _recipe(d, "left", "")
    _recipe(d, "right", "", imports='"demo", "demo.extra"')
    config = _duo(d, "left", "right")
    code, cells = _night(d, config)
    assert code != 0 and cells[RIGHT]["status"] == "failed", cells
    left = cells[LEFT]
    assert (left["status"], left["validation"], left["promoted"]) == ("success", "passed", False)
    assert str(left["reason"]).endswith(HELD.format(RIGHT)), left
    assert _stage(d, "staging") == {left["wheel"]} and _stage(d, "stable") == set()

    code, cells = _night(d, config)
    assert code != 0 and cells[RIGHT]["status"] == "failed", cells
    assert (cells[LEFT]["status"], cells[LEFT]["promoted"]) == ("skipped", False), cells[LEFT]
    assert cells[LEFT]["wheel"] == left["wheel"]
    why = str(cells[LEFT]["reason"])
    assert why.startswith("validated wheel for key ") and why.endswith(
        " in stage staging; " + HELD.format(RIGHT)), why
    assert _stage(d, "stable") == set()  # left is not served while right fails

    (d / "right-src/demo/extra.py").write_text("")  # right is fixed
    code, cells = _night(d, config)
    assert code == 0, cells
    assert (cells[LEFT]["status"], cells[LEFT]["promoted"]) == ("skipped", True), cells[LEFT]
    assert (cells[RIGHT]["status"], cells[RIGHT]["promoted"]) == ("success", True)
    assert _stage(d, "stable") == {left["wheel"], cells[RIGHT]["wheel"]}


def test_validate_pending_releases_a_held_member_that_was_skipped(tmp_path: Path) -> None:
    """A stack of needy (pending: its validation's requirement is not here) and plain. Night 1:
    plain passes and is held. Night 2: plain is unchanged (SKIP) and still held, needy is
    pending again. ``--validate-pending`` where needy's requirement is there: needy passes,
    the group is green, and plain, SKIPPED in that run, is promoted with it."""
    d = tmp_path
    _recipe(d, "needy", 'requires = ["nightly-helper"]')
    _recipe(d, "plain", "")
    config = _duo(d, "needy", "plain")
    _night(d, config)
    code, cells = _night(d, config)
    assert code == 0, cells
    assert (cells[NEEDY]["validation"], cells[NEEDY]["promoted"]) == ("pending", False)
    plain = cells[PLAIN]
    assert (plain["status"], plain["promoted"]) == ("skipped", False), plain
    assert str(plain["reason"]).endswith(" in stage staging; " + HELD.format(NEEDY)), plain
    assert _stage(d, "stable") == set()

    _helper_wheel(d, d / "links")
    done = rocmbuild("nightly", "--config", str(config), "--validate-pending", "--json", cwd=d,
                     env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(d / "links")})
    assert done.returncode == 0, done.stderr
    assert [(r["cell"], r["validation"], r["promoted"]) for r in json.loads(done.stdout)] == [
        (NEEDY, "passed", True), (PLAIN, "passed", True)]
    assert _stage(d, "stable") == {cells[NEEDY]["wheel"], plain["wheel"]}
    run2 = sorted(p for p in (d / "reports").iterdir() if p.is_dir())[-1]
    after = {c["cell"]: c for c in json.loads((run2 / "report.json").read_text())["cells"]}
    assert (after[PLAIN]["status"], after[PLAIN]["promoted"]) == ("skipped", True), after
    assert after[PLAIN]["reason"].endswith(
        " in stage staging, then stack duo.gfx942 is green, promoted"), after[PLAIN]
