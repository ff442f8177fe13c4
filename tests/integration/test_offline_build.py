"""Offline builds for real: the real CLI, real `unshare --net` (as root, else a user namespace),
real pip, git and urllib against an http.server on 127.0.0.1 started here (reachable from this
process, not from the build's namespace), real git repositories with nested submodules made
here, and the flash-attn Triton variant from a local git repository made from the pinned PyPI
sdist. Nothing is faked. Skipped, with the reason, where no network namespace can be made."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.core.run import no_network
from tests.conftest import REPO, rocmbuild
from tests.integration.conftest import serve_files

pytestmark = pytest.mark.skipif(not no_network().prefix,
                                reason=f"no network namespace here: {no_network().why_not}")


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, int]]]:
    """(base URL, hits per path) of an HTTP server on 127.0.0.1 serving ``x.bin``."""
    with serve_files({"/x.bin": b"payload"}) as served:
        yield served


SETUP = """\
import os, subprocess, sys, urllib.request
import setuptools
{body}
setuptools.setup(name="netdemo", version="1.0", py_modules=["netdemo"])
"""


def _recipe(tmp_path: Path, body: str, offline: bool, source: str = 'path = "proj"') -> Path:
    proj = tmp_path / "proj"
    if not proj.exists():
        proj.mkdir()
        (proj / "netdemo.py").write_text("X = 1\n")
        (proj / "setup.py").write_text(SETUP.format(body=body))
    r = tmp_path / "netdemo.toml"
    r.write_text(f'schema_version = 1\n[package]\nname = "netdemo"\n[source]\n{source}\n'
                 f'[build]\noffline = {str(offline).lower()}\n[validate]\nkernel = "none"\n')
    return r


def _build(tmp_path: Path, recipe: Path, name: str = "w", cache: str = "cache",
           *more: str) -> subprocess.CompletedProcess[str]:
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / name), "ROCMBUILD_CACHE_DIR": str(tmp_path / cache),
           "ROCMBUILD_RETRY_BACKOFF": "0.01"}
    return rocmbuild("build", str(recipe), "--arch", "gfx942", *more, env=env)


def _error_line(stderr: str) -> str:
    return next(ln for ln in stderr.splitlines() if ln.startswith("build error:"))


# --isolated: this machine's pip config adds local indexes; netdemo-dep exists on none of them
PIP = ('subprocess.run([sys.executable, "-m", "pip", "--isolated", "download", "--no-deps", '
       '"--retries", "1", "--timeout", "5", "--index-url", "{url}/simple/", "-d", "dl", '
       '"netdemo-dep"], check=True)')
GIT = 'subprocess.run(["git", "clone", "-q", "{url}/repo.git", "dl"], check=True)'
URLLIB = ('print("fetching {url}/x.bin", flush=True)\n'
          'open("got.bin", "wb").write(urllib.request.urlopen("{url}/x.bin", timeout=5).read())')


@pytest.mark.parametrize(("how", "host"), [(PIP, "localhost"), (GIT, "localhost"),
                                           (URLLIB, "127.0.0.1")], ids=["pip", "git", "urllib"])
def test_a_build_that_downloads_fails_naming_the_host(
    tmp_path: Path, server: tuple[str, dict[str, int]], how: str, host: str
) -> None:
    url, hits = server
    if host == "localhost":
        url = url.replace("127.0.0.1", "localhost")
    res = _build(tmp_path, _recipe(tmp_path, how.replace("{url}", url), offline=True))
    assert res.returncode == 6, res.stderr
    line = _error_line(res.stderr)
    assert f"it tried to reach {host}, but the build runs offline" in line, res.stderr
    assert "hint: " in res.stderr and "[[downloads]]" in res.stderr
    assert "offline = false" in res.stderr
    assert not hits, "the namespace reached the server"
    log = next((tmp_path / "w" / "logs" / "netdemo").glob("*/build.log")).read_text()
    assert log.startswith("$ unshare --net ")


def test_the_same_build_with_network_reaches_the_server(
    tmp_path: Path, server: tuple[str, dict[str, int]]
) -> None:
    """The control: offline = false, same download, it works (so the namespace cut it above)."""
    url, hits = server
    res = _build(tmp_path, _recipe(tmp_path, URLLIB.replace("{url}", url), offline=False))
    assert res.returncode == 0, res.stderr
    assert hits.get("/x.bin", 0) >= 1  # setup.py runs for the metadata and for the wheel


def test_offline_off_require_and_the_fallback(
    tmp_path: Path, server: tuple[str, dict[str, int]]
) -> None:
    """ROCMBUILD_OFFLINE=off builds with network. Where no namespace can be made (here: a PATH
    without unshare) the build warns once and runs with network; =require makes it an error."""
    url, hits = server
    recipe = _recipe(tmp_path, URLLIB.replace("{url}", url), offline=True)
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_OFFLINE": "off"}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--force", env=env)
    assert res.returncode == 0 and hits.get("/x.bin", 0) >= 1, res.stderr
    no_unshare = tmp_path / "bin"
    no_unshare.mkdir()
    env = {**env, "ROCMBUILD_OFFLINE": "require", "PATH": str(no_unshare)}
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--force", env=env)
    assert res.returncode == 6, res.stderr
    assert _error_line(res.stderr).startswith(
        "build error: netdemo.toml: build.offline = true, but this machine cannot make a network "
        "namespace (unshare --net: unshare: command not found"), res.stderr
    assert "hint: allow unprivileged user namespaces" in res.stderr
    hits.clear()
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--force",
                    env={**env, "ROCMBUILD_OFFLINE": ""})
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("building WITH network") == 1, res.stderr
    assert hits.get("/x.bin", 0) >= 1


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", cwd=path)
    git("remote", "add", "origin", str(path), cwd=path)  # relative submodule URLs resolve here
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def _commit(path: Path) -> str:
    git("add", ".", cwd=path)
    git("commit", "-qm", "c", cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


CHECK_TREE = """\
assert not os.path.exists(".git"), "the build tree has .git"
assert open("sub/data.txt").read() == "sub\\n"
assert open("sub/inner/deep.txt").read() == "deep\\n"
assert not os.path.exists("sub/.git") and not os.path.exists("sub/inner/.git")
"""


def test_submodules_come_from_cached_mirrors(tmp_path: Path) -> None:
    """A repository with a submodule (relative URL) that has its own submodule: the first cold
    build fills the mirrors; with both submodule origins deleted a second cold build (new
    workdir, same cache) still builds, offline, from the mirrors; a new cache cannot."""
    inner = _repo(tmp_path / "git" / "inner", {"deep.txt": "deep\n"})
    _commit(inner)
    sub = _repo(tmp_path / "git" / "sub", {"data.txt": "sub\n"})
    git("submodule", "add", "-q", "../inner", "inner", cwd=sub)
    _commit(sub)
    main = _repo(tmp_path / "git" / "main", {"netdemo.py": "X = 1\n",
                                             "setup.py": SETUP.format(body=CHECK_TREE)})
    git("submodule", "add", "-q", "../sub", "sub", cwd=main)
    assert "url = ../sub" in (main / ".gitmodules").read_text()
    pinned = _commit(main)
    recipe = _recipe(tmp_path, "", offline=True,
                     source=f'git = "{main}"\ncommit = "{pinned}"\nsubmodules = ["*"]')
    first = _build(tmp_path, recipe, "w1")
    assert first.returncode == 0, first.stderr
    shutil.rmtree(sub)
    shutil.rmtree(inner)
    second = _build(tmp_path, recipe, "w2", "cache", "--force")  # not the cached wheel
    assert second.returncode == 0, second.stderr
    assert "] fetch" in second.stderr
    cold = _build(tmp_path, recipe, "w3", cache="cache2")
    assert cold.returncode == 4, cold.stderr
    assert "submodule sub from" in cold.stderr and str(tmp_path / "git" / "sub") in cold.stderr


SDIST_URL = ("https://files.pythonhosted.org/packages/01/7a/92a46e7cd6bbb4d7b2855a457c3b855df54a9"
             "7af5656d98fc92e58e61065/flash_attn-2.8.3.post1.tar.gz")
SDIST_SHA = "55d5103ed846da8b56e0797acf4bde07dee4b1c7e8907fcfc6699c203030c348"


@pytest.mark.slow
def test_flash_attn_triton_from_a_local_git_repository_builds_offline(
    tmp_path: Path, download_cache: Path
) -> None:
    """The recipe's git source pointed at a local repository holding the pinned sdist's files
    (made here, committed): fetch checks it out without .git, the build runs in the network
    namespace, and the wheel records it."""
    from rocmbuild.sources.download import download

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    archive = download(SDIST_URL, SDIST_SHA, cache)
    with tarfile.open(archive) as tf:
        tf.extractall(tmp_path / "x", filter="data")
    repo = tmp_path / "x" / "flash_attn-2.8.3.post1"
    git("init", "-q", cwd=repo)
    pinned = _commit(repo)
    text = (REPO / "recipes" / "flash-attn.toml").read_text()
    text = text.replace('git = "https://github.com/ROCm/flash-attention.git"', f'git = "{repo}"')
    text = text.replace("b3ae4966b2567811880db10d9e040a775b99c7d7", pinned)
    text = text.replace('file = "../patches/', f'file = "{REPO}/patches/')
    recipe = tmp_path / "flash-attn.toml"
    recipe.write_text(text)
    env = {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_CACHE_DIR": str(cache)}
    # the fork's line: its git source is the one pointed at the local repository
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", "--variant", "triton",
                    "--release", "2.8-fork", env=env)
    assert res.returncode == 0, res.stderr
    log = next((tmp_path / "w" / "logs" / "flash-attn").glob("*/build.log")).read_text()
    assert log.startswith("$ unshare --net ")
    (wheel,) = (tmp_path / "w" / "wheels").glob("flash_attn-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(next(zf.read(n) for n in zf.namelist()
                               if n.endswith(".dist-info/rocmbuild.json")))
    assert prov["offline"] is True and prov["source"]["commit"] == pinned
    assert prov["source"]["url"] == str(repo)


def _tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


READ_PREFIX = """\
p = os.environ["DEMO_PREFIX"]
assert open(os.path.join(p, "lib/libdemo.so")).read() == "runtime", p
assert open(os.path.join(p, "lib/images/gfx942/k.bin")).read() == "kernels", p
assert open(os.environ["DEMO_TOOL"]).read() == "tool", os.environ["DEMO_TOOL"]
"""


def test_downloads_are_fetched_verified_merged_and_handed_over_offline(tmp_path: Path) -> None:
    """Two archives naming one variable (a runtime and its kernel images, AOTriton's shape) and
    one plain file, served from 127.0.0.1: fetch downloads and verifies them, extracts the
    archives into one directory, and the offline build reads them through the variables. A
    second cold build (new workdir, same cache) fetches nothing; the provenance lists them."""
    files = {"/runtime.tar.gz": _tgz({"demo/lib/libdemo.so": b"runtime"}),
             "/images.tar.gz": _tgz({"demo/lib/images/gfx942/k.bin": b"kernels"}),
             "/tool": b"tool"}
    with serve_files(files) as (url, hits):
        recipe = _recipe(tmp_path, READ_PREFIX, offline=True)
        text = recipe.read_text()
        for name, path, var, unpack in (("rt", "/runtime.tar.gz", "DEMO_PREFIX", True),
                                        ("img", "/images.tar.gz", "DEMO_PREFIX", True),
                                        ("other", "/images.tar.gz", "DEMO_PREFIX", True),
                                        ("tool", "/tool", "DEMO_TOOL", False)):
            sha = hashlib.sha256(files[path]).hexdigest()
            when = '\nwhen = { arch = "gfx90a" }' if name == "other" else ""
            text += (f'[[downloads]]\nname = "{name}"\nurl = "{url}{path}"\nsha256 = "{sha}"\n'
                     f'extract = {str(unpack).lower()}\nenv = "{var}"{when}\n')
        recipe.write_text(text)
        first = _build(tmp_path, recipe, "w1")
        assert first.returncode == 0, first.stderr
        assert "3 download(s)" in first.stderr
        assert hits == {"/runtime.tar.gz": 1, "/images.tar.gz": 1, "/tool": 1}
        second = _build(tmp_path, recipe, "w2", "cache", "--force")
        assert second.returncode == 0, second.stderr
        assert hits == {"/runtime.tar.gz": 1, "/images.tar.gz": 1, "/tool": 1}
    (wheel,) = (tmp_path / "w2" / "wheels").glob("netdemo-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(next(zf.read(n) for n in zf.namelist()
                               if n.endswith(".dist-info/rocmbuild.json")))
    assert [d["name"] for d in prov["downloads"]] == ["rt", "img", "tool"]
    assert prov["plan"]["downloads"] == prov["downloads"]
