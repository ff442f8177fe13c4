"""`rocmbuild nightly` for real on a small matrix: a recipe that follows a LOCAL git repository
(which gets a new commit between runs), a pinned recipe with a patch (which changes), a cell whose
build fails and one that outlives its timeout. Real git, pip, setuptools, the validate stage (an
isolated venv; the kernel gate is SKIPPED: no GPU here, as `build --validate` records it), a
static index with a staging and a stable stage, the lock.

One session-scoped workspace: run 1 builds, run 2 (nothing changed) skips, run 3 (a new commit)
rebuilds only the following cell; the patch change is checked with --dry-run (same decision
code, no build).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocmbuild.nightly import lock
from tests.conftest import rocmbuild

SETUP = 'from setuptools import setup\nsetup(name="{name}", version="1.0", packages=["demo"])\n'
PATCH = "--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = {v}\n"
A = "follow.default.default.gfx942"
B = "pinned.default.default.gfx90a"
F = "fails.default.default.gfx942"
T = "slow.default.default.gfx942"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def _path_recipe(d: Path, name: str, step: str) -> None:
    """A path-source recipe whose hipify step (a command, before pip starts) runs ``step``."""
    src = d / f"{name}-src"
    (src / "demo").mkdir(parents=True)
    (src / "demo/__init__.py").write_text("VALUE = 1\n")
    (src / "setup.py").write_text(SETUP.format(name=f"nightly-{name}"))
    (d / f"{name}.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-{name}"
[source]
path = "{name}-src"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
hipify = ["python", "-c", {json.dumps(step)}]
""")


def write_pinned(d: Path, commit: str, value: int) -> None:
    patch = PATCH.format(v=value)
    (d / "fix.patch").write_text(patch)
    sha = hashlib.sha256(patch.encode()).hexdigest()
    (d / "pinned.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-pinned"
[source]
git = "upstream-pinned"
commit = "{commit}"
ref = "main"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
[[patches]]
file = "fix.patch"
sha256 = "{sha}"
reason = "the nightly test's patch"
[validate]
imports = ["demo"]
""")


@dataclass
class World:
    d: Path
    config: Path
    runs: list[tuple[int, str, str, float]]
    pinned_commit: str = ""

    def nightly(self, *args: str) -> subprocess.CompletedProcess[str]:
        t0 = time.monotonic()
        res = rocmbuild("nightly", "--config", str(self.config), *args, cwd=self.d)
        self.runs.append((res.returncode, res.stdout, res.stderr, time.monotonic() - t0))
        return res

    def report(self, res: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
        data = json.loads(res.stdout)
        return {c["cell"]: c for c in data["cells"]}

    def stage(self, stage: str) -> set[str]:
        p = self.d / "index" / stage / "simple"
        return {f["filename"] for j in p.glob("*/index.json")
                for f in json.loads(j.read_text())["files"]}


def _repo(d: Path, name: str) -> str:
    repo = d / name
    (repo / "demo").mkdir(parents=True)
    (repo / "setup.py").write_text(SETUP.format(name=name.replace("upstream", "nightly")))
    (repo / "demo/__init__.py").write_text("VALUE = 1\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    d = tmp_path_factory.mktemp("nightly")
    head = _repo(d, "upstream-follow")
    (d / "follow.toml").write_text(f"""schema_version = 1
[package]
name = "nightly-follow"
[source]
git = "upstream-follow"
commit = "{head}"
ref = "main"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
[validate]
imports = ["demo"]
""")
    pinned = _repo(d, "upstream-pinned")
    write_pinned(d, pinned, 2)
    _path_recipe(d, "fails", "raise SystemExit('boom: this cell fails on purpose')")
    _path_recipe(d, "slow", f"import os, time; open({str(d / 'slow.pid')!r}, 'w')"
                 ".write(str(os.getpid())); time.sleep(600)")
    config = d / "nightly.toml"
    config.write_text("""# the failing and the timed-out cell first: they must not stop the others
[[matrix]]
recipes = ["fails.toml"]
archs = ["gfx942"]
[[matrix]]
recipes = ["slow.toml"]
archs = ["gfx942"]
timeout = "10s"
[[matrix]]
recipes = ["follow.toml"]
archs = ["gfx942"]
follow = true
[[matrix]]
recipes = ["pinned.toml"]
archs = ["gfx90a"]
[publish]
index = "index"
[reports]
dir = "reports"
history = 5
""")
    w = World(d, config, [], pinned)
    first = w.nightly("--json")
    assert first.returncode == 14, first.stderr
    return w


def test_first_run_builds_stages_promotes_and_survives_failures(world: World) -> None:
    code, out, err, _ = world.runs[0]
    cells = {c["cell"]: c for c in json.loads(out)["cells"]}
    assert [c for c in cells] == [F, T, A, B]  # the matrix's order
    assert cells[F]["status"] == "failed" and cells[F]["end"] == "failed"
    assert cells[F]["exit_code"] == 6 and "build error" in cells[F]["reason"]
    assert cells[T]["status"] == "failed" and cells[T]["end"] == "timeout"
    for c in (A, B):
        assert cells[c]["status"] == "success" and cells[c]["promoted"] is True, cells[c]
        assert cells[c]["peak_rss_bytes"] > 0 and cells[c]["disk_bytes"] > 0
    assert not cells[F]["promoted"] and not cells[T]["promoted"]
    # logs of every cell, the killed one too
    run_dir = next(p for p in (world.d / "reports").iterdir() if p.is_dir())
    for c in (A, B, F, T):
        assert (run_dir / "cells" / c / "log.txt").stat().st_size > 0
    assert "boom: this cell fails on purpose" in (run_dir / "cells" / F / "log.txt").read_text()
    with pytest.raises(ProcessLookupError):  # the cell's whole process group was killed
        os.kill(int((world.d / "slow.pid").read_text()), 0)
    wheels = {cells[A]["wheel"], cells[B]["wheel"]}
    assert world.stage("staging") == wheels and world.stage("stable") == wheels
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pins = {c["cell"]["id"]: c["pin"] for c in manifest["cells"]}
    assert pins[A]["kind"] == "git" and len(pins[A]["value"]) == 40
    assert pins[B]["kind"] == "recipe"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["ok"] is False
    # the lines built, against upstream now: both pins are their branch's head (path recipes
    # have no upstream)
    assert [(p["recipe"], p["verdict"]) for p in report["upstream_drift"]["pins"]] == [
        ("follow", "current"), ("pinned", "current")]
    assert "Upstream drift (2 current, 0 behind, 0 unknown" in (run_dir / "summary.md").read_text()
    assert "cells failed: nightly" in err and F in err and T in err


def test_unchanged_run_skips_everything_and_takes_over_a_stale_lock(world: World) -> None:
    """Run 2, nothing changed: every cell SKIPPED (recorded time in
    docs/dev/benchmarks-notebook.md). Before it, a lock record of a dead nightly is left in the
    workspace: it is taken over and the report says so."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    (world.d / "build" / lock.NAME).write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "started": "2026-11-29T03:00:00Z"}))
    res = world.nightly("--only", A, "--only", B, "--json")
    assert res.returncode == 0, res.stderr
    cells = world.report(res)
    assert {c: v["status"] for c, v in cells.items()} == {A: "skipped", B: "skipped"}
    assert all("validated wheel for key" in str(v["reason"]) for v in cells.values())
    data = json.loads(res.stdout)
    assert f"pid {dead.pid}" in data["lock_note"] and "took over" in data["lock_note"]
    print(f"no-change nightly of 2 cells: {world.runs[-1][3]:.2f}s")


def test_second_start_exits_at_once_naming_the_holder(world: World) -> None:
    with lock.held(world.d / "build", "test-holder"):
        t0 = time.monotonic()
        res = rocmbuild("nightly", "--config", str(world.config), cwd=world.d)
        took = time.monotonic() - t0
    assert res.returncode == 15, res.stderr
    line = next(x for x in res.stderr.splitlines() if x.startswith("busy:"))
    assert f"pid {os.getpid()}" in line and socket.gethostname() in line and "since " in line
    assert "hint:" in res.stderr and took < 5  # the interpreter's start is most of it


def test_new_commit_rebuilds_only_the_following_cell(world: World) -> None:
    repo = world.d / "upstream-follow"
    (repo / "demo/extra.py").write_text("X = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two")
    head = _git(repo, "rev-parse", "HEAD")
    dry = world.nightly("--dry-run", "--only", A, "--only", B)
    assert dry.returncode == 0, dry.stderr
    lines = {ln.split()[0]: ln for ln in dry.stdout.splitlines()}
    assert " BUILD " in lines[A] and f"new upstream commit {head[:12]}" in lines[A]
    assert " SKIP " in lines[B]
    res = world.nightly("--only", A, "--only", B, "--json")
    assert res.returncode == 0, res.stderr
    cells = world.report(res)
    assert cells[A]["status"] == "success" and cells[A]["promoted"] is True
    assert cells[B]["status"] == "skipped"
    # the same version with new bytes: the next build tag, so the immutable index takes it
    assert str(cells[A]["wheel"]).endswith("-1.0+rocm6.2.gfx942-1-py3-none-any.whl")
    assert cells[A]["wheel"] in world.stage("stable")
    run_dir = sorted(p for p in (world.d / "reports").iterdir() if p.is_dir())[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {c["cell"]["id"]: c["pin"]["value"] for c in manifest["cells"]}[A] == head
    # the recipe's own pin is stale now: the report says so the night upstream moved
    drift = {p["recipe"]: p for p in json.loads(res.stdout)["upstream_drift"]["pins"]}
    assert drift["follow"]["verdict"] == "behind" and drift["follow"]["head"] == head
    assert drift["pinned"]["verdict"] == "current"


def test_changed_patch_rebuilds_only_its_cell(world: World) -> None:
    write_pinned(world.d, world.pinned_commit, 3)
    res = world.nightly("--dry-run", "--json", "--only", A, "--only", B)
    assert res.returncode == 0, res.stderr
    got = {c["cell"]: c for c in json.loads(res.stdout)}
    assert got[A]["decision"] == "skip"
    assert got[B]["decision"] == "build"
    assert "patch changed: fix.patch" in got[B]["reasons"]
    assert "recipe changed" in got[B]["reasons"]


def test_unreachable_upstream_fails_its_cell_only(world: World) -> None:
    """A followed ref that upstream does not have: that cell fails (exit 14, the reason in the
    report), the run goes on and writes its manifest and report."""
    d = world.d / "badref"
    d.mkdir()
    (d / "gone.toml").write_text((world.d / "follow.toml").read_text().replace(
        'git = "upstream-follow"', f'git = "{world.d / "upstream-follow"}"').replace(
        'ref = "main"', 'ref = "no-such-branch"'))
    (d / "nightly.toml").write_text('[[matrix]]\nrecipes = ["gone.toml"]\narchs = ["gfx942"]\n'
                                    'follow = true\n[publish]\nindex = "index"\n')
    dry = rocmbuild("nightly", "--config", str(d / "nightly.toml"), "--dry-run", cwd=d)
    assert dry.returncode == 0, dry.stderr
    assert "gone.default.default.gfx942  ERROR" in dry.stdout and "no-such-branch" in dry.stdout
    res = rocmbuild("nightly", "--config", str(d / "nightly.toml"), "--json", cwd=d)
    assert res.returncode == 14, res.stderr
    (cell,) = json.loads(res.stdout)["cells"]
    assert cell["status"] == "failed" and "no ref 'no-such-branch'" in cell["reason"]


def test_follow_sdist_resolves_the_newest_release_from_pep691(tmp_path: Path) -> None:
    """The flash-attn Triton variant from PyPI with follow = true, against a PEP 691 index on
    127.0.0.1 (a thread of this test; the real PyPI is not reachable from CI): --dry-run takes
    the newest released sdist (not the pre-release, not the yanked one) and its sha256, and the
    pinned cell keeps the recipe's sdist."""
    import http.server
    import threading

    new_sha = "cd" * 32
    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": s}, **extra}
             for n, s, extra in (
                 ("flash_attn-2.8.3.post1.tar.gz", "55" * 32, {}),
                 ("flash_attn-2.8.4.tar.gz", new_sha, {}),
                 ("flash_attn-2.9.0rc1.tar.gz", "ab" * 32, {}),
                 ("flash_attn-2.9.0.tar.gz", "ef" * 32, {"yanked": "bad build"}))]
    page = json.dumps({"meta": {"api-version": "1.1"}, "files": files}).encode()

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            ok = self.path == "/simple/flash-attn/" and "pypi.simple.v1+json" in self.headers.get(
                "Accept", "")
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(page if ok else b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "nightly.toml").write_text(
            f'pypi = "http://127.0.0.1:{server.server_address[1]}/simple/"\n'
            '[[matrix]]\nrecipes = ["flash-attn"]\nvariants = ["triton"]\nsources = ["pypi"]\n'
            'archs = ["gfx942"]\nfollow = true\n'
            '[[matrix]]\nrecipes = ["flash-attn"]\nvariants = ["triton"]\nsources = ["pypi"]\n'
            'archs = ["gfx90a"]\n[publish]\nindex = "index"\n')
        res = rocmbuild("nightly", "--config", str(tmp_path / "nightly.toml"), "--dry-run",
                        "--json", cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert res.returncode == 0, res.stderr
    got = {c["cell"]: c for c in json.loads(res.stdout)}
    follow = got["flash-attn.triton.pypi.gfx942"]
    assert follow["decision"] == "build" and follow["reasons"] == ["never built"]
    assert follow["pin"]["kind"] == "sdist" and follow["pin"]["value"] == "2.8.4"
    assert follow["pin"]["sha256"] == new_sha
    assert follow["pin"]["url"].endswith("/files/flash_attn-2.8.4.tar.gz")
    pinned = got["flash-attn.triton.pypi.gfx90a"]
    assert pinned["pin"]["kind"] == "recipe" and pinned["pin"]["url"].endswith(
        "flash_attn-2.8.3.post1.tar.gz")
    assert follow["cache_key"] != pinned["cache_key"]
