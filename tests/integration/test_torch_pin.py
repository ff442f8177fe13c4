"""An ABI-bound wheel says which torch it needs, and pip and uv hold to it: a wheel retagged by the
tag stage (``stages.tag.retag`` with ``torch_requirement`` of the torch it compiled against, as
``tag.run`` does for a label that carries torch) is installed with real pip and real uv from a
static PEP 503 index served by http.server on 127.0.0.1. Asked for it beside torch 2.14 both
refuse; beside torch 2.13 both install it.

The torches are small stand-in wheels made here (a distribution named ``torch``, versions
2.13.0+rocm7.2 and 2.14.0+rocm7.14, a ``torch/__init__.py`` and its metadata): a real ROCm torch
is gigabytes and cannot load here, and what pip and uv judge is the name and version. The
ABI-bound wheel is a minimal platform wheel (its own METADATA says ``Requires-Dist: torch``,
unpinned, as flash-attn's setup.py writes it); its pin is written by the real tag stage."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.artifacts.buildfacts import TorchBuild
from rocmbuild.stages.tag import retag, torch_requirement

UV = Path(sys.executable).parent / "uv"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(out: Path, name: str, version: str, tag: str, meta: str, files: dict[str, bytes]
           ) -> Path:
    di = f"{name}-{version}.dist-info"
    members = {**files,
               f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 f"{meta}".encode(),
               f"{di}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n"
                              .encode()}
    rows = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in members.items()]
    members[f"{di}/RECORD"] = ("\n".join([*rows, f"{di}/RECORD,,"]) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return path


def _index(root: Path, wheels: list[Path]) -> Path:
    """A static PEP 503 index under ``root``: simple/<project>/index.html linking
    files/<wheel>#sha256=... (what http.server serves as text/html and octet streams)."""
    pages: dict[str, list[str]] = {}
    (root / "files").mkdir(parents=True)
    for w in wheels:
        data = w.read_bytes()
        (root / "files" / w.name).write_bytes(data)
        project = w.name.split("-")[0].replace("_", "-").lower()
        href = f"/files/{w.name.replace('+', '%2B')}#sha256={hashlib.sha256(data).hexdigest()}"
        pages.setdefault(project, []).append(
            f'<a href="{html.escape(href)}">{html.escape(w.name)}</a><br>')
    for project, links in pages.items():
        (root / "simple" / project).mkdir(parents=True)
        (root / "simple" / project / "index.html").write_text(
            "<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>")
    return root


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The index's URL: `python -m http.server` on 127.0.0.1 over the directory."""
    tmp = tmp_path_factory.mktemp("torchpin")
    torches = [_wheel(tmp / "w", "torch", v, "py3-none-any", "",
                      {"torch/__init__.py": f"__version__ = '{v}'\n".encode()})
               for v in ("2.13.0+rocm7.2", "2.14.0+rocm7.14")]
    raw = _wheel(tmp / "raw", "abiext", "1.0", "cp311-cp311-linux_x86_64",
                 "Requires-Dist: torch\n", {"abiext/__init__.py": b"ok = True\n"})
    pin = torch_requirement(TorchBuild("2.13.0+rocm7.2", "7.2.26015", None, True))
    ext = retag(raw, tmp / "w", "rocm7.2.torch2.13.cxx11abitrue.gfx942", {}, 0,
                requires_torch=pin)
    with zipfile.ZipFile(ext) as zf:
        meta = zf.read(f"{ext.name.split('-cp311')[0]}.dist-info/METADATA").decode()
    assert "Requires-Dist: torch==2.13.*\n" in meta and "Requires-Dist: torch\n" not in meta
    root = _index(tmp / "index", [*torches, ext])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1", "--directory", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/simple/torch/", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "http.server"
                time.sleep(0.1)
        yield base
    finally:
        proc.kill()
        proc.wait()


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where / "bin" / "python"


def _pip(python: Path, url: str, *reqs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
        "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-cache-dir", "--index-url", f"{url}/simple/", *reqs],
                          capture_output=True, text=True, timeout=300, env=env)


def _uv(python: Path, url: str, *reqs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")} | {
        "UV_NO_CONFIG": "1"}
    return subprocess.run([str(UV), "pip", "install", "--python", str(python), "--no-cache",
                           "--index-url", f"{url}/simple/", *reqs],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_wrong_torch_is_refused_and_the_right_one_installs(
        installer: str, url: str, tmp_path: Path) -> None:
    install = _pip if installer == "pip" else _uv
    python = _venv(tmp_path / "wrong")
    wrong = install(python, url, "abiext", "torch==2.14.0")
    assert wrong.returncode != 0, wrong.stdout + wrong.stderr
    out = wrong.stdout + wrong.stderr
    # the pin is the reason: pip "abiext 1.0+... depends on torch==2.13.*", uv "all versions of
    # abiext depend on torch<2.14.dev0"
    assert re.search(r"abiext.*depends? on torch(==2\.13\.\*|<2\.14)", out), out
    # torch 2.14 already installed: installing the wheel must not pass beside it
    assert install(python, url, "torch==2.14.0").returncode == 0
    beside = install(python, url, "abiext", "torch==2.14.0")
    assert beside.returncode != 0, beside.stdout + beside.stderr
    right = install(_venv(tmp_path / "right"), url, "abiext", "torch==2.13.0+rocm7.2")
    assert right.returncode == 0, right.stdout + right.stderr
    got = subprocess.run([str(tmp_path / "right" / "bin" / "python"), "-c",
                          "import abiext, torch; print(abiext.ok, torch.__version__)"],
                         capture_output=True, text=True, timeout=60)
    assert got.stdout.split() == ["True", "2.13.0+rocm7.2"], got.stderr
