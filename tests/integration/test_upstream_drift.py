"""Upstream drift for real: `rocmbuild recipes --upstream` against LOCAL bare git repositories
(real git: branches, lightweight and annotated tags, a pre-release tag) and a PEP 691 JSON index
served by http.server on 127.0.0.1 in a thread of this test (ROCMBUILD_PYPI points there): a
release newer than the pin, a current pin, a 500, invalid JSON, wrong types, a reply over the
size cap and one slower than --upstream-timeout. The nightly's "Upstream drift" section is the
same report, written into report.json and summary.md."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocmbuild.nightly import drift as nightly_drift
from rocmbuild.nightly.model import RunReport
from rocmbuild.nightly.report.summary import render_summary
from rocmbuild.nightly.report.write import write as report_write
from rocmbuild.sources import upstream
from rocmbuild.sources.drift import Verdict
from tests.conftest import rocmbuild

SHA = "ab" * 32
NEW_SHA = "cd" * 32


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def _commit(work: Path, name: str) -> str:
    (work / f"{name}.txt").write_text(name)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", name)
    return _git(work, "rev-parse", "HEAD")


@dataclass
class Repo:
    bare: Path
    c1: str
    """main's first commit, tagged v1.0 (annotated)."""
    c2: str
    c3: str
    """main's head (c2, c3 carry no tag)."""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """main: c1 (v1.0) - c2 - c3; branch release from c1: v1.0.1, v1.1.0 (annotated),
    v2.0.0rc1 (a pre-release) and a tag that is no version."""
    d = tmp_path_factory.mktemp("drift-git")
    work = d / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    c1 = _commit(work, "one")
    _git(work, "tag", "-a", "v1.0", "-m", "1.0")
    c2, c3 = _commit(work, "two"), _commit(work, "three")
    _git(work, "checkout", "-q", "-b", "release", c1)
    _commit(work, "fix")
    _git(work, "tag", "v1.0.1")
    _commit(work, "feature")
    _git(work, "tag", "-a", "v1.1.0", "-m", "1.1.0")
    _commit(work, "next")
    _git(work, "tag", "v2.0.0rc1")
    _git(work, "tag", "nightly")
    bare = d / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    _git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    return Repo(bare, c1, c2, c3)


def _files(project: str, *versions: str, **extra: object) -> bytes:
    stem = project.replace("-", "_")
    files = [{"filename": f"{stem}-{v}.tar.gz", "url": f"/files/{stem}-{v}.tar.gz",
              "hashes": {"sha256": NEW_SHA}} for v in versions]
    return json.dumps({"meta": {"api-version": "1.1"}, "files": files, **extra}).encode()


class _Index(http.server.BaseHTTPRequestHandler):
    """/simple/<project>/ as PEP 691 JSON; each project's answer tests one case."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        self.asked.append(self.path)
        name = self.path.removeprefix("/simple/").rstrip("/")
        if name == "demo-500":
            self.send_error(500)
            return
        if name == "demo-slow":
            time.sleep(3)
        pages = {
            "demo-newer": json.dumps({"files": [
                {"filename": "demo_newer-1.0.tar.gz", "url": "/f/a", "hashes": {"sha256": SHA}},
                {"filename": "demo_newer-1.1.tar.gz", "url": "/f/b",
                 "hashes": {"sha256": NEW_SHA}},
                {"filename": "demo_newer-1.2.tar.gz", "url": "/f/c", "hashes": {"sha256": SHA},
                 "yanked": "broken"},
                {"filename": "demo_newer-1.3rc1.tar.gz", "url": "/f/d",
                 "hashes": {"sha256": SHA}},
                {"filename": "demo_newer-1.4.tar.gz", "url": "javascript:x",
                 "hashes": {"sha256": SHA}}]}).encode(),
            "demo-current": _files("demo-current", "0.9", "1.0"),
            "demo-slow": _files("demo-slow", "1.0"),
            "demo-badjson": b"{not json",
            "demo-types": json.dumps({"files": [
                {"filename": 1, "url": "/f", "hashes": {"sha256": SHA}},
                {"filename": "demo_types-2.0.tar.gz", "url": ["/f"], "hashes": {}},
                {"filename": "demo_types-3.0.tar.gz", "url": "/f", "hashes": {"sha256": 5}},
                "garbage", None]}).encode(),
            "gitproj": _files("gitproj", "1.0", "1.2"),
        }
        if name == "demo-huge":
            self.send_response(200)
            self.end_headers()
            chunk = b" " * (1 << 20)
            try:
                for _ in range(17):  # more than upstream.MAX_INDEX_BYTES
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        body = pages.get(name)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


HEAD = """schema_version = 1
[package]
name = "{name}"
[arch]
supported = ["gfx942"]
[build]
python_requires = ["setuptools"]
"""


def _git_recipe(d: Path, name: str, url: str, commit: str, ref: str, extra: str = "") -> Path:
    p = d / f"{name}.toml"
    p.write_text(HEAD.format(name=name)
                 + f'[source]\ngit = "{url}"\ncommit = "{commit}"\n'
                 + (f'ref = "{ref}"\n' if ref else "") + extra)
    return p


def _sdist_recipe(d: Path, name: str, version: str) -> Path:
    stem = name.replace("-", "_")
    p = d / f"{name}.toml"
    p.write_text(HEAD.format(name=name) + f'[source]\nsdist = {{ url = "https://files.invalid/'
                 f'{stem}-{version}.tar.gz", sha256 = "{SHA}" }}\n')
    return p


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def recipes(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("drift-recipes")
    rel = os.path.relpath(repo.bare, d)  # relative to the recipe file, as recipes may say
    _git_recipe(d, "current", rel, repo.c3, "main")
    _git_recipe(d, "moved", str(repo.bare), repo.c2, "main")
    _git_recipe(d, "tagged", f"file://{repo.bare}", repo.c1, "v1.0")
    _git_recipe(d, "headless", str(repo.bare), repo.c1, "")
    _git_recipe(d, "noref", str(repo.bare), repo.c1, "no-such-branch")
    _git_recipe(d, "refused", f"http://127.0.0.1:{_closed_port()}/x.git", repo.c1, "main")
    _git_recipe(d, "gitproj", str(repo.bare), repo.c3, "main", extra=(
        '[source.alternatives.pypi]\nsdist = { url = "https://files.invalid/gitproj-1.0.tar.gz"'
        f', sha256 = "{SHA}" }}\n'))
    for name, version in (("demo-newer", "1.0"), ("demo-current", "1.0"), ("demo-500", "1.0"),
                          ("demo-badjson", "1.0"), ("demo-huge", "1.0"), ("demo-types", "1.0"),
                          ("demo-slow", "1.0")):
        _sdist_recipe(d, name, version)
    return d


def _drift(recipes: Path, index: str, *names: str, timeout: str = "20"
           ) -> tuple[dict[tuple[str, str], dict[str, object]], subprocess.CompletedProcess[str]]:
    res = rocmbuild("recipes", "--upstream", "--json", "--upstream-timeout", timeout,
                    *(str(recipes / f"{n}.toml") for n in names),
                    env={"ROCMBUILD_PYPI": index})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    data = json.loads(res.stdout)
    return {(p["recipe"], p["line"]): p for p in data["pins"]}, res


def test_git_pins_current_moved_and_tagged(recipes: Path, repo: Repo, index: str) -> None:
    got, _ = _drift(recipes, index, "current", "moved", "tagged", "headless", "gitproj")
    cur = got[("current", "default")]
    assert cur["verdict"] == "current" and cur["follows"] == "branch" and cur["head"] == repo.c3
    assert cur["tags"] == ["v1.1.0"]  # no version tag on the pin: the newest, for information
    moved = got[("moved", "default")]
    assert moved["verdict"] == "behind" and moved["head"] == repo.c3
    assert moved["reason"] == f"main moved to {repo.c3[:12]}" and moved["newer"] is None
    tagged = got[("tagged", "default")]
    assert tagged["verdict"] == "behind" and tagged["follows"] == "tag"
    assert tagged["head"] == repo.c1  # the annotated tag, peeled
    assert tagged["newer"] == 2  # v1.0.1, v1.1.0; not the rc, not "nightly"
    assert tagged["tags"] == ["v1.0.1", "v1.1.0"]  # the newest of 1.0.x, the newest
    headless = got[("headless", "default")]  # no ref: HEAD; the pin carries v1.0
    assert headless["follows"] == "HEAD" and headless["verdict"] == "behind"
    assert headless["newer"] == 2 and headless["reason"].startswith("HEAD moved to")
    # a git line of a project with an sdist line: the index's newest beside it
    g = got[("gitproj", "default")]
    assert g["verdict"] == "current" and g["latest"] == "1.2"
    sd = got[("gitproj", "pypi")]
    assert sd["kind"] == "sdist" and sd["pinned"] == "1.0" and sd["verdict"] == "behind"
    assert sd["newer"] == 1 and sd["latest"] == "1.2"


def test_table_on_stdout(recipes: Path, index: str) -> None:
    res = rocmbuild("recipes", "--upstream", str(recipes / "current.toml"),
                    str(recipes / "tagged.toml"), str(recipes / "demo-newer.toml"),
                    env={"ROCMBUILD_PYPI": index})
    assert res.returncode == 0, res.stderr
    rows = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.strip()}
    assert rows["current"].split()[1] == "default" and rows["current"].rstrip().endswith(
        "current")
    assert "v1.0" in rows["tagged"] and "behind: 2 newer" in rows["tagged"]
    assert "pypi 1.1" in rows["demo-newer"] and "behind: 1 newer" in rows["demo-newer"]


def test_unreachable_and_missing_refs_are_unknown(recipes: Path, index: str) -> None:
    got, _ = _drift(recipes, index, "noref", "refused", "current")
    assert got[("noref", "default")]["verdict"] == "unknown"
    assert got[("noref", "default")]["reason"] == "no branch or tag 'no-such-branch' upstream"
    refused = got[("refused", "default")]
    assert refused["verdict"] == "unknown"
    reason = str(refused["reason"])
    assert reason.startswith("git ls-remote: ") and "127.0.0.1" in reason and "\n" not in reason
    assert got[("current", "default")]["verdict"] == "current"  # the others go on


def test_index_answers_are_untrusted(recipes: Path, index: str) -> None:
    got, _ = _drift(recipes, index, "demo-newer", "demo-current", "demo-500", "demo-badjson",
                    "demo-huge", "demo-types")
    newer = got[("demo-newer", "default")]
    # 1.2 is yanked, 1.3rc1 a pre-release, 1.4's url no http(s): newest release 1.1
    assert (newer["verdict"], newer["newer"], newer["latest"]) == ("behind", 1, "1.1")
    assert newer["reason"] == "1 newer release(s), newest 1.1"
    assert got[("demo-current", "default")]["verdict"] == "current"
    assert got[("demo-current", "default")]["newer"] == 0
    why = {n: str(got[(n, "default")]["reason"]) for n in
           ("demo-500", "demo-badjson", "demo-huge", "demo-types")}
    assert all(got[(n, "default")]["verdict"] == "unknown" for n in why)
    assert "Internal Server Error" in why["demo-500"]
    assert "not PEP 691 JSON" in why["demo-badjson"]
    assert f"larger than {upstream.MAX_INDEX_BYTES} bytes" in why["demo-huge"]
    assert why["demo-types"] == "no released sdist of demo-types on the index"


def test_timeout_per_query(recipes: Path, index: str) -> None:
    t0 = time.monotonic()
    got, _ = _drift(recipes, index, "demo-slow", "current", timeout="1")
    assert time.monotonic() - t0 < 15
    slow = got[("demo-slow", "default")]
    assert slow["verdict"] == "unknown" and "timed out" in str(slow["reason"])
    assert got[("current", "default")]["verdict"] == "current"


def test_bad_settings_are_usage_errors(recipes: Path) -> None:
    res = rocmbuild("recipes", "--upstream", str(recipes / "current.toml"),
                    env={"ROCMBUILD_PYPI": "ftp://x"})
    assert res.returncode == 2 and "ROCMBUILD_PYPI" in res.stderr and "Traceback" not in res.stderr
    res = rocmbuild("recipes", "current")
    assert res.returncode == 2 and "--upstream" in res.stderr


def test_nightly_report_has_the_drift_section(recipes: Path, index: str,
                                              tmp_path: Path) -> None:
    """The nightly's section: the lines its cells build (from the manifest), in report.json
    under upstream_drift and in summary.md as a table."""
    data = {"cells": [{"cell": {"recipe": str(recipes / n), "source": line}}
                      for n, line in (("moved.toml", "default"), ("current.toml", "default"),
                                      ("gitproj.toml", "pypi"), ("moved.toml", "default"))]}
    d = nightly_drift.for_manifest(data, index)
    assert [(e.recipe, e.line, e.verdict) for e in d.entries] == [
        ("moved", "default", Verdict.BEHIND), ("current", "default", Verdict.CURRENT),
        ("gitproj", "pypi", Verdict.BEHIND)]
    run = RunReport("20261130T020000Z", "2026-11-30T02:00:00Z", "2026-11-30T02:10:00Z",
                    "local", (), drift=d)
    files = report_write(tmp_path / "reports", run)
    saved = json.loads(files.report.read_text())
    assert saved["upstream_drift"]["behind"] == 2 and saved["upstream_drift"]["current"] == 1
    assert [p["verdict"] for p in saved["upstream_drift"]["pins"]] == [
        "behind", "current", "behind"]
    summary = files.summary.read_text()
    assert "Upstream drift (1 current, 2 behind, 0 unknown; index http://127.0.0.1:" in summary
    assert "| behind: main moved to " in summary and "| behind: 1 newer |" in summary
    # same report, same bytes
    assert render_summary(run) == summary
