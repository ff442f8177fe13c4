"""Offline builds, the parts that need no process: which host a failed build output tried
(``network_host``, on the real wording of pip, git, curl, cmake and Python), relative submodule
URLs, and how recipes declare [[downloads]] and build.offline (load and render)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.core.errors import FetchError, RecipeError, ToolchainError
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import TorchInfo
from rocmbuild.plan import requirements
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.sources.git import resolve_url
from rocmbuild.stages.build import network_host

HOST = Host(python="3.11", python_tag="cp311", platform="linux",
            torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
            cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")

PIP = """\
$ /usr/bin/python -m pip wheel -v --no-deps --no-build-isolation -w /w/_rocmbuild_dist .
  Looking in indexes: http://localhost:8123/simple/
  WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after \
connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object \
at 0x7f>: Failed to establish a new connection: [Errno 101] Network is unreachable')': /simple/six/
  ERROR: Could not find a version that satisfies the requirement six (from versions: none)
"""
PIP_POOL = ("ERROR: Could not install packages due to an OSError: HTTPSConnectionPool("
            "host='pypi.org', port=443): Max retries exceeded with url: /simple/six/ (Caused by "
            "NewConnectionError('...: Failed to establish a new connection: [Errno -3] Temporary "
            "failure in name resolution'))")
GIT = ("Cloning into 'csrc/cutlass'...\nfatal: unable to access "
       "'https://github.com/NVIDIA/cutlass.git/': Could not resolve host: github.com\n"
       "fatal: clone of 'https://github.com/NVIDIA/cutlass.git' into submodule path failed")
GIT_LOCAL = ("fatal: unable to access 'http://127.0.0.1:4711/sub.git/': Failed to connect to "
             "127.0.0.1 port 4711 after 0 ms: Couldn't connect to server")
CURL = "curl: (6) Could not resolve host: repo.radeon.com"
CMAKE = """\
-- Downloading...
   dst='/b/aotriton_runtime/aotriton-0.11b.tar.gz'
   timeout='none'
-- Using src='https://github.com/ROCm/aotriton/releases/download/0.11b/aotriton-0.11b.tar.gz'
-- Retrying...
CMake Error at aotriton_runtime-stamp/download-aotriton_runtime.cmake:170 (message):
  Each download failed!
    error: downloading 'https://github.com/ROCm/aotriton/releases/download/0.11b/x.tar.gz' \
failed
          status_code: 6
          status_string: "Couldn't resolve host name"
"""
URLLIB = """\
fetching http://downloads.example.org/weights.bin
Traceback (most recent call last):
urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>
"""


@pytest.mark.parametrize(("text", "host"), [
    (PIP, "localhost"), (PIP_POOL, "pypi.org"), (GIT, "github.com"), (GIT_LOCAL, "127.0.0.1"),
    (CURL, "repo.radeon.com"), (CMAKE, "github.com"), (URLLIB, "downloads.example.org"),
])
def test_network_host_names_the_host(text: str, host: str) -> None:
    assert network_host(text) == host


def test_network_host_none_for_a_compile_error() -> None:
    assert network_host("a.cpp:3:1: error: unknown type name 'foo'\nninja: build stopped") is None


def test_network_host_unnamed() -> None:
    assert network_host("OSError: [Errno 101] Network is unreachable") == ""


@pytest.mark.parametrize(("parent", "url", "want"), [
    ("https://github.com/ROCm/flash-attention.git", "../composable_kernel.git",
     "https://github.com/ROCm/composable_kernel.git"),
    ("https://github.com/ROCm/flash-attention.git/", "./sub", "https://github.com/ROCm/"
     "flash-attention.git/sub"),
    ("git@github.com:ROCm/flash-attention.git", "../ck.git", "git@github.com:ROCm/ck.git"),
    ("git@github.com:ROCm/flash-attention.git", "../../ck.git", "git@github.com:ck.git"),
    ("/srv/git/main", "../sub", "/srv/git/sub"),
    ("/srv/git/main", "https://example.org/x.git", "https://example.org/x.git"),
])
def test_relative_submodule_urls(parent: str, url: str, want: str) -> None:
    assert resolve_url(parent, url) == want


def test_relative_submodule_url_that_leaves_the_host() -> None:
    with pytest.raises(FetchError, match="leaves"):
        resolve_url("https://github.com/x.git", "../../../y.git")


def _recipe(tmp_path: Path, body: str) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    p = tmp_path / "r.toml"
    p.write_text('schema_version = 1\n[package]\nname = "demo"\n[source]\npath = "src"\n'
                 + body)
    return p


def test_shipped_recipes_are_offline_and_pytorch_pins_aotriton() -> None:
    for name in ("flash-attn", "pytorch", "hip-attention-probe"):
        assert load(find_recipe(name)).offline, name
    torch = load(find_recipe("pytorch"))
    plan = render(torch, Target(arch="gfx942,gfx1100", rocm_version="6.4", release="2.9"), HOST)
    assert plan.offline and plan.to_json()["offline"] is True
    assert [d.name for d in plan.downloads] == [
        "aotriton-runtime-rocm6.4", "aotriton-images-gfx942", "aotriton-images-gfx11xx"]
    assert {d.env for d in plan.downloads} == {"AOTRITON_INSTALLED_PREFIX"}
    assert all(len(d.sha256) == 64 for d in plan.downloads)
    # each line pins its own AOTriton (0.13b for 2.13 and 2.14), one runtime per ROCm
    for line, rocm in (("2.14", "7.14"), ("2.13", "7.2")):
        plan = render(torch, Target(arch="gfx942,gfx1100", rocm_version=rocm, release=line),
                      HOST)
        assert [d.name for d in plan.downloads] == [
            f"aotriton-runtime-rocm{rocm}", "aotriton-images-gfx942", "aotriton-images-gfx110x"]
        assert all("/0.13b/aotriton-0.13b-" in d.url for d in plan.downloads)
        assert {d.env for d in plan.downloads} == {"AOTRITON_INSTALLED_PREFIX"}


def test_downloads_go_into_the_cache_key(tmp_path: Path) -> None:
    sha = "a" * 64
    base = _recipe(tmp_path, "")
    one = render(load(base), Target(arch="gfx942"), HOST)
    with_dl = _recipe(tmp_path, f'[[downloads]]\nname = "x"\nurl = "https://h/x.tgz"\n'
                      f'sha256 = "{sha}"\nenv = "X_PREFIX"\n')
    two = render(load(with_dl), Target(arch="gfx942"), HOST)
    assert two.to_json()["downloads"] == [{"name": "x", "url": "https://h/x.tgz", "sha256": sha,
                                           "extract": False, "env": "X_PREFIX"}]
    assert one.cache_key != two.cache_key


def test_unpinned_download_is_refused_only_where_it_applies(tmp_path: Path) -> None:
    p = _recipe(tmp_path, '[[downloads]]\nname = "img"\nurl = "https://h/img.tgz"\n'
                'env = "X_PREFIX"\nwhen = { arch = "gfx90a" }\n')
    recipe = load(p)
    assert render(recipe, Target(arch="gfx942"), HOST).downloads == ()
    assert not any("img" in m for m in requirements.missing(
        render(recipe, Target(arch="gfx942"), HOST), HOST))
    # it renders (plan shows it), and the host check stops the build before anything is fetched
    plan = render(recipe, Target(arch="gfx90a"), HOST)
    with pytest.raises(ToolchainError) as exc:
        requirements.preflight(plan, HOST)
    assert "a sha256 pin for the download 'img' (https://h/img.tgz): r.toml has none" in \
        str(exc.value)
    assert "sha256sum" in (exc.value.hint or "")


def test_bad_downloads_are_reported_each(tmp_path: Path) -> None:
    p = _recipe(tmp_path, '[[downloads]]\nname = "a b"\nurl = "ftp://x"\nsha256 = "12"\n'
                'env = "1X"\nwhen = { rocm = "six" }\n[[downloads]]\nname = "ok"\n'
                'url = "https://h/y"\n')
    with pytest.raises(RecipeError) as exc:
        load(p)
    text = str(exc.value)
    for key in ("downloads[0].name", "downloads[0].url", "downloads[0].sha256",
                "downloads[0].env", "downloads[0].when.rocm: 'six' is not a ROCm",
                "downloads[1].env: must name"):
        assert key in text, text
