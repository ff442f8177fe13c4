"""Fetch and patch against real servers and tools: an HTTP server on 127.0.0.1 started here, real
git repositories (with a submodule) made here, real `git apply`."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.core.errors import FetchError, PatchError
from rocmbuild.sources.archive import extract
from rocmbuild.sources.download import download
from rocmbuild.sources.git import git_checkout, git_epoch, mirror_path


def make_tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Server:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.hits: dict[str, int] = {}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                code, body, headers = outer.routes.get(self.path, (404, b"", {}))
                self.send_response(code)
                self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(monkeypatch) -> Iterator[Server]:
    monkeypatch.setenv("ROCMBUILD_RETRY_BACKOFF", "0.01")
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


GOOD = make_tar({"demo-1.0/setup.py": b"print('hi')\n", "demo-1.0/pkg/__init__.py": b""})
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


def test_download_verify_extract_and_reuse(server: Server, tmp_path: Path) -> None:
    server.routes["/demo-1.0.tar.gz"] = (200, GOOD, {})
    archive = download(f"{server.url}/demo-1.0.tar.gz", GOOD_SHA, tmp_path / "cache")
    assert archive.read_bytes() == GOOD
    tree = extract(archive, tmp_path / "src")
    assert (tree / "setup.py").read_text() == "print('hi')\n"
    download(f"{server.url}/demo-1.0.tar.gz", GOOD_SHA, tmp_path / "cache")
    assert server.hits["/demo-1.0.tar.gz"] == 1, "a verified cached file is not fetched again"


def test_sha_mismatch_names_both_hashes_and_keeps_nothing(server: Server, tmp_path: Path) -> None:
    server.routes["/demo-1.0.tar.gz"] = (200, GOOD, {})
    want = "0" * 64
    with pytest.raises(FetchError, match=f"pins {want}, the download is {GOOD_SHA}"):
        download(f"{server.url}/demo-1.0.tar.gz", want, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_server_errors_retried_three_times(server: Server, tmp_path: Path) -> None:
    server.routes["/flaky.tar.gz"] = (503, b"busy", {})
    with pytest.raises(FetchError, match="failed 3 times; last error: HTTP 503"):
        download(f"{server.url}/flaky.tar.gz", GOOD_SHA, tmp_path / "cache")
    assert server.hits["/flaky.tar.gz"] == 3


def test_not_found_is_not_retried(server: Server, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="HTTP 404"):
        download(f"{server.url}/missing.tar.gz", GOOD_SHA, tmp_path / "cache")
    assert server.hits["/missing.tar.gz"] == 1


def test_truncated_download_never_lands_in_cache(server: Server, tmp_path: Path) -> None:
    server.routes["/short.tar.gz"] = (200, GOOD[:100], {"Content-Length": str(len(GOOD))})
    with pytest.raises(FetchError):
        download(f"{server.url}/short.tar.gz", GOOD_SHA, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_unsafe_archive_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "evil.tar.gz"
    bad.write_bytes(make_tar({"demo/../../escape.txt": b"x"}))
    (tmp_path / "src").mkdir()
    with pytest.raises(FetchError, match="unsafe member refused"):
        extract(bad, tmp_path / "src" / "tree")
    assert not (tmp_path / "escape.txt").exists()


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo_with_submodule(tmp_path: Path) -> tuple[Path, str]:
    sub = tmp_path / "ck"
    sub.mkdir()
    git("init", "-q", cwd=sub)
    (sub / "kernel.hpp").write_text("// ck\n")
    git("add", ".", cwd=sub)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ck", cwd=sub)
    main = tmp_path / "fa"
    main.mkdir()
    git("init", "-q", cwd=main)
    (main / "setup.py").write_text("v1\n")
    git("submodule", "add", "-q", str(sub), "csrc/composable_kernel", cwd=main)
    git("add", ".", cwd=main)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=main)
    pinned = git("rev-parse", "HEAD", cwd=main)
    (main / "setup.py").write_text("v2\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=main)
    return main, pinned


def test_git_checkout_pinned_commit_with_submodule(
    tmp_path: Path, repo_with_submodule: tuple[Path, str]
) -> None:
    repo, pinned = repo_with_submodule
    url = f"file://{repo}"
    dest = tmp_path / "out"
    git_checkout(
        url, pinned, ("csrc/composable_kernel",), tmp_path / "cache", dest, tmp_path / "fetch.log"
    )
    assert (dest / "setup.py").read_text() == "v1\n"
    assert (dest / "csrc/composable_kernel/kernel.hpp").read_text() == "// ck\n"
    # second checkout comes from the mirror
    dest2 = tmp_path / "out2"
    git_checkout(url, pinned, (), tmp_path / "cache", dest2, tmp_path / "fetch.log")
    assert (dest2 / "setup.py").read_text() == "v1\n"


def test_git_unknown_commit(tmp_path: Path, repo_with_submodule: tuple[Path, str]) -> None:
    repo, _ = repo_with_submodule
    with pytest.raises(FetchError, match="commit 0{40} not found"):
        git_checkout(
            f"file://{repo}",
            "0" * 40,
            (),
            tmp_path / "cache",
            tmp_path / "o",
            tmp_path / "fetch.log",
        )


def test_patches_apply_and_a_failing_one_names_file_and_hunk(tmp_path: Path) -> None:
    from rocmbuild.artifacts.results import Artifacts
    from rocmbuild.core import config
    from rocmbuild.host import detect as host
    from rocmbuild.plan.model import Plan
    from rocmbuild.recipe.tables import Patch, Source
    from rocmbuild.stages import patch
    from rocmbuild.stages.context import Context

    git("init", "-q", cwd=tmp_path)  # the workspace often sits inside a git checkout
    tree = tmp_path / "build" / "src" / "tree"
    tree.mkdir(parents=True)
    (tree / "setup.py").write_text("a\nb\nc\n")
    good = tmp_path / "good.patch"
    good.write_text("--- a/setup.py\n+++ b/setup.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/setup.py\n+++ b/setup.py\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n")
    fields = dict.fromkeys(Plan.__dataclass_fields__, None)

    def plan_with(files: list[Path]) -> Plan:
        return Plan(
            **{
                **fields,
                "recipe": "demo",
                "source_name": "default",  # type: ignore
                "source": Source("sdist", url="file:///x.tar.gz", sha256="ab" * 32),
                "patches": tuple(Patch(file=f, sha256="", reason="") for f in files),
            }
        )

    ctx = Context(
        ws=config.workspace(str(tmp_path / "w")),
        log_dir=tmp_path / "logs",
        wheel_dir=tmp_path / "wh",
        host=host.detect(want_compiler=False),
        artifacts=Artifacts(tree=tree),
    )
    patch.run(plan_with([good]), ctx)
    assert (tree / "setup.py").read_text() == "a\nB\nc\n"
    before = (tree / "setup.py").read_text()
    with pytest.raises(PatchError, match=r"bad.patch: hunk at setup.py:1 does not apply"):
        patch.run(plan_with([bad]), ctx)
    assert (tree / "setup.py").read_text() == before


def test_git_clone_of_a_missing_repo_is_not_retried_and_leaves_nothing(
        tmp_path: Path, monkeypatch) -> None:
    """A repository that does not exist is a permanent failure: one attempt, git's own words in
    the message, no "check the network" hint."""
    monkeypatch.setenv("ROCMBUILD_RETRY_BACKOFF", "0.01")
    url = f"file://{tmp_path / 'no-such-repo'}"
    with pytest.raises(FetchError, match=r"git clone .*: fatal: .*no-such-repo") as info:
        git_checkout(url, "0" * 40, (), tmp_path / "cache", tmp_path / "o",
                           tmp_path / "fetch.log")
    assert "network" not in (info.value.hint or "")
    assert (tmp_path / "fetch.log").read_text().count("git clone --mirror") == 1
    assert not list((tmp_path / "cache" / "git").iterdir())


def test_git_epoch_is_the_pinned_commits_committer_time(tmp_path: Path) -> None:
    """SOURCE_DATE_EPOCH of a git source: the pinned commit's committer time (a real repository
    with commits at fixed dates), not the newest commit and not the checkout's file times."""
    repo = tmp_path / "r"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    dates = {"1": "1600000000 +0000", "2": "1700000000 +0200"}
    for n, date in dates.items():
        (repo / "f").write_text(n)
        git("add", ".", cwd=repo)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", n],
                       cwd=repo, check=True, env={**os.environ, "GIT_COMMITTER_DATE": date,
                                                  "GIT_AUTHOR_DATE": "1000000000 +0000"})
        if n == "1":
            pinned = git("rev-parse", "HEAD", cwd=repo)
    dest = tmp_path / "out"
    git_checkout(f"file://{repo}", pinned, (), tmp_path / "cache", dest,
                       tmp_path / "fetch.log")
    assert not (dest / ".git").exists()  # the build tree is plain; the mirror knows the commit
    mirror = mirror_path(f"file://{repo}", tmp_path / "cache")
    assert git_epoch(mirror, pinned, tmp_path / "fetch.log") == 1600000000
