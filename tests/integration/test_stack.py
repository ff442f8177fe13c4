"""`rocmbuild stack build` end to end with small real packages (tests/recipes/stack-*.toml): a
pure-Python package and a C++ torch extension (cpp_extension, linking libc10) built against the
venv's CPU torch 2.13 through the same build env view, validated together in one venv,
published in one transaction to a static index served by `python -m http.server` on 127.0.0.1,
then installed in fresh venvs from its pylock.toml with uv and from its constraints file with
pip through that index; a second build is all cache hits and writes the same lock bytes.

A member that installs its own torch into its build env is refused with one line naming it and
both torches. Its torch is a small stand-in wheel (`torch 2.12.0+cpu`: version, version.hip,
_C._GLIBCXX_USE_CXX11_ABI = False), since a real torch 2.12 is on PyPI but gigabytes; the
build, its label and the check that reads it are real.

What needs a GPU (the attention gate, the members' own upstream tests) is skipped with its
reason in the validation report; that is asserted too."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

RECIPES = REPO / "tests" / "recipes"
UV = Path(sys.executable).parent / "uv"


def _stack(path: Path, *recipes: str) -> Path:
    path.write_text("schema_version = 1\n[torch]\nfrom = \"host\"\nrequires = \">=2.13,<2.14\"\n"
                    + "".join(f'[[members]]\nrecipe = "{RECIPES / r}.toml"\n' for r in recipes))
    return path


def _run(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rocmbuild", *args], env=env, text=True,
                          capture_output=True, timeout=timeout, cwd=REPO)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(index dir, its URL): http.server on 127.0.0.1 over a directory the stack publishes to."""
    root = tmp_path_factory.mktemp("stack")
    index = root / "index"
    index.mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1", "--directory", str(index)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "http.server"
                time.sleep(0.1)
        yield index, url
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def env(served: tuple[Path, str]) -> dict[str, str]:
    work = served[0].parent / "w"
    return {k: v for k, v in os.environ.items() if not k.startswith("ROCMBUILD_")} | {
        "ROCMBUILD_WORKDIR": str(work), "ROCMBUILD_COMPILE_CACHE": "none"}


def _fresh_venv(where: Path) -> Path:
    """A venv without pip that sees the host's torch (as an MI300 host has its ROCm torch)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    torch_dir = Path(__import__("torch").__file__).parents[1]
    (site / "_host_torch.pth").write_text(f"{torch_dir}\n")
    return where / "bin" / "python"


CHECK = "import stackext, stackpure; print(stackext.check(), stackpure.greet('mi300'))"


def test_a_stack_is_built_validated_published_locked_and_installs(
        served: tuple[Path, str], env: dict[str, str], tmp_path: Path) -> None:
    index, url = served
    stack = _stack(tmp_path / "small.toml", "stack-pure", "stack-ext")
    plan = _run("stack", "plan", str(stack), "--arch", "gfx942", "--json", env=env)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert [m["recipe"] for m in planned["members"]] == ["stack-pure", "stack-ext"]
    assert planned["torch"] == __import__("torch").__version__
    args = ("stack", "build", str(stack), "--arch", "gfx942", "--index", str(index),
            "--index-url", url)
    t0 = time.monotonic()
    cold = _run(*args, "--json", env=env)
    cold_s = time.monotonic() - t0
    assert cold.returncode == 0, cold.stderr[-4000:]
    res = json.loads(cold.stdout)
    # progress per member, then the set's validation and one publish
    for line in ("stack small [1/2] stack-pure", "stack small [2/2] stack-ext",
                 "stack small: validating 2 wheels together",
                 "stack small: publishing 2 wheels and 2 lock files"):
        assert line in cold.stderr, cold.stderr[-3000:]
    wheels = [m["wheel"] for m in res["members"]]
    assert wheels[0].startswith("stack_pure-1.0+rocm")
    assert wheels[0].endswith(".gfx942-py3-none-any.whl")
    assert ".torch2.13.cxx11abitrue.gfx942-cp311-cp311-linux_x86_64.whl" in wheels[1]
    assert sorted(res["published"]) == sorted(wheels)
    assert res["locks"] == ["gfx942/stacks/small/constraints.txt",
                            "gfx942/stacks/small/pylock.toml"]
    report = Path(res["validation"]).read_text()
    assert "no attention kernel among these wheels" in report, report  # the gate: GPU only
    assert "no GPU: the upstream tests need one" in report, report  # stack-ext's quick check
    # the stack step (one training step with every member) runs on a GPU only, and says so
    assert "Stack step: **skipped** no GPU: torch.cuda.is_available() is False" in report, report
    lock_dir = index / "stable" / "gfx942" / "stacks" / "small"
    pylock, constraints = (lock_dir / "pylock.toml").read_bytes(), \
        (lock_dir / "constraints.txt").read_bytes()
    assert f'url = "{url}stable/files/stack_ext-1.0%2Brocm'.encode() in pylock

    # an MI300 host: uv installs exactly the set from the lock, over http
    a = _fresh_venv(tmp_path / "uv-venv")
    lock_url = f"{url}stable/gfx942/stacks/small/pylock.toml"
    got = tmp_path / "pylock.toml"
    got.write_bytes(urllib.request.urlopen(lock_url, timeout=10).read())
    r = subprocess.run([str(UV), "pip", "install", "--python", str(a), "--no-cache",
                        "-r", str(got)], capture_output=True, text=True, timeout=300,
                       env={**env, "UV_NO_CONFIG": "1"})
    assert r.returncode == 0, r.stderr
    assert "+ stack-ext==1.0+rocm" in r.stderr and "+ stack-pure==1.0+rocm" in r.stderr
    r = subprocess.run([str(a), "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "ok hello mi300", r.stderr

    # pip, from the constraints file, through the view's pages only (no other index)
    b = _fresh_venv(tmp_path / "pip-venv")
    (tmp_path / "constraints.txt").write_bytes(constraints)
    pip_env = {k: v for k, v in env.items() if not k.startswith("PIP_")} | {
        "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(b), "install",
                        "--no-cache-dir", "-c", str(tmp_path / "constraints.txt"),
                        "--index-url", f"{url}stable/gfx942/simple/", "stack-pure", "stack-ext"],
                       capture_output=True, text=True, timeout=300, env=pip_env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(b), "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "ok hello mi300", r.stderr

    # the same inputs again: every member from the cache, the same lock bytes, nothing new
    warm = _run(*args, "--json", env=env)
    assert warm.returncode == 0, warm.stderr[-3000:]
    again = json.loads(warm.stdout)
    assert [m["cached"] for m in again["members"]] == [True, True]
    assert again["published"] == []
    assert (lock_dir / "pylock.toml").read_bytes() == pylock
    assert (lock_dir / "constraints.txt").read_bytes() == constraints
    print(f"\nstack cold build+validate+publish {cold_s:.1f}s")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _fake_torch(out: Path) -> Path:
    """torch 2.12.0+cpu as a 1 KB wheel: what the build stage and a label read of a torch."""
    di = "torch-2.12.0+cpu.dist-info"
    files = {"torch/__init__.py": b"from torch import _C, version\n__version__ = '2.12.0+cpu'\n",
             "torch/version.py": b"hip = None\ncuda = None\n",
             "torch/_C/__init__.py": b"_GLIBCXX_USE_CXX11_ABI = False\n",
             f"{di}/METADATA": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.12.0+cpu\n",
             f"{di}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rows = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in files.items()]
    files[f"{di}/RECORD"] = ("\n".join([*rows, f"{di}/RECORD,,"]) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "torch-2.12.0+cpu-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def test_a_member_built_against_another_torch_is_refused(
        served: tuple[Path, str], env: dict[str, str], tmp_path: Path) -> None:
    index, url = served
    links = tmp_path / "links"
    _fake_torch(links)
    here = {**env, "PIP_FIND_LINKS": f"{links} {os.environ.get('PIP_FIND_LINKS', '')}".strip()}
    stack = _stack(tmp_path / "mixed.toml", "stack-pure", "stack-ext", "stack-other-torch")
    before = sorted(p.name for p in (index / ".generations").iterdir()) \
        if (index / ".generations").is_dir() else []
    r = _run("stack", "build", str(stack), "--arch", "gfx942", "--index", str(index),
             "--index-url", url, env=here)
    assert r.returncode == 6, r.stderr[-3000:]
    line = next(ln for ln in r.stderr.splitlines() if "was built against" in ln)
    assert "stack mixed: members[2] (stack-other-torch): stack_other-1.0+rocm" in line, line
    assert ".torch2.12.cxx11abifalse.gfx942-py3-none-any.whl was built against torch " \
        "2.12.0+cpu, cxx11abi false; the stack's torch is 2.13.0+cpu, cxx11abi true (the " \
        "host's, which every member's build env sees)" in line, line
    assert "validating" not in r.stderr and "publishing" not in r.stderr
    after = sorted(p.name for p in (index / ".generations").iterdir()) \
        if (index / ".generations").is_dir() else []
    assert after == before  # nothing published
    assert not (index / "stable" / "gfx942" / "stacks" / "mixed").exists()
    shutil.rmtree(links)


def test_a_host_torch_outside_the_stack_range_is_refused_before_planning(tmp_path: Path) -> None:
    stack = tmp_path / "new.toml"
    stack.write_text('schema_version = 1\n[torch]\nrequires = ">=2.14"\n'
                     f'[[members]]\nrecipe = "{RECIPES / "stack-pure.toml"}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCMBUILD_")} | {
        "ROCMBUILD_WORKDIR": str(tmp_path / "w")}
    r = _run("stack", "plan", str(stack), "--arch", "gfx942", env=env, timeout=120)
    assert r.returncode == 10, r.stderr
    assert "toolchain error: new.toml: torch.requires: the host's torch 2.13.0+cpu is not " \
        ">=2.14" in r.stderr, r.stderr
