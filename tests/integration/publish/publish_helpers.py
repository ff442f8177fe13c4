"""Helpers for the publish tests: synthetic wheel zips, a clean child environment, the real CLI
in a subprocess, and a snapshot of a served tree. (A uniquely named module rather than
conftest, so `import` cannot pick up another directory's conftest.)"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def clean_env(**extra: str) -> dict[str, str]:
    """Environment for child processes: no pip config or find-links from this machine, so pip
    only sees the index under test."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TWINE_", "ROCMBUILD_"))
    }
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


def rocmbuild(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    check: bool | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "rocmbuild", *args],
        env=env or clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"rocmbuild {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_wheel(
    out: Path, name: str, version: str, payload: str = "", requires_python: str | None = ">=3.8",
    metadata_extra: str = "", members: dict[str, bytes] | None = None,
) -> Path:
    """A minimal valid PEP 427 wheel written directly as a zip (pure python, py3-none-any);
    ``metadata_extra``: more METADATA header lines (e.g. ``Requires-External: rocm (>=6.2)``);
    ``members``: more files (e.g. a ``.so`` from ``hip_library``)."""
    dist = name.replace("-", "_")
    files: dict[str, bytes] = {
        f"{dist}/__init__.py": f"VERSION = {version!r}\n{payload}".encode(),
        **(members or {}),
    }
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    meta += metadata_extra
    di = f"{dist}-{version}.dist-info"
    files[f"{di}/METADATA"] = meta.encode()
    files[f"{di}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: rocmbuild-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for n, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{n},sha256={h},{len(data)}")
    record.append(f"{di}/RECORD,,")
    files[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in files.items():
            zf.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def snapshot(tree: Path) -> dict[str, bytes]:
    """relative path -> bytes of every file reachable under ``tree`` (following the stage
    symlink), i.e. what a web server would serve."""
    out: dict[str, bytes] = {}
    if not tree.exists():
        return out
    for dirpath, _dirs, files in os.walk(tree, followlinks=True):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(tree))] = p.read_bytes()
    return out


def pip_install(index_url: str, target: Path, spec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-cache-dir",
            "--index-url",
            index_url,
            "--target",
            str(target),
            spec,
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_http(url: str, proc: subprocess.Popen[bytes], what: str, seconds: float = 120,
                  log: Path | None = None) -> None:
    """Poll ``url`` until it answers; fail at once if ``proc`` dies, or after ``seconds`` (long:
    devpi-server took over 15 s to start on a loaded 2-core machine). ``log``, the server's
    output, is shown when it fails."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            why = (f"{what} exited with {proc.returncode}" if proc.poll() is not None else
                   f"{what} did not answer {url} in {seconds:g}s"
                   if time.monotonic() > deadline else None)
            if why:
                tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
                raise AssertionError(why + (f"; its log ends:\n{tail}" if tail else "")) from None
            time.sleep(0.1)


def hip_library(targets: list[str]) -> bytes:
    """A HIP shared object as the code-object audit reads it: an ELF64 file whose
    ``.hip_fatbin`` holds one clang offload bundle with a host entry and a code object per
    target (the layout clang writes; the code objects are stubs, since no GPU runs them here)."""
    host = "host-x86_64-unknown-linux--"
    ids = [host] + [f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets]
    payload = b"\x7fELF" + b"\0" * 60
    head = 24 + 8 + sum(24 + len(i) for i in ids)
    off = -(-head // 4096) * 4096
    table, blobs = b"", b""
    for i in ids:
        size = 0 if i == host else len(payload)
        table += struct.pack("<QQQ", off + len(blobs) if size else off, size, len(i)) + i.encode()
        blobs += payload if size else b""
    header = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids)) + table
    fatbin = header + b"\0" * (off - len(header)) + blobs

    def pad(b: bytes) -> bytes:
        return b + b"\0" * (-len(b) % 4096)

    names = b"\0.hip_fatbin\0.shstrtab\0"
    sh = [struct.pack("<IIQQQQIIQQ", *([0] * 10)),
          struct.pack("<IIQQQQIIQQ", 1, 1, 2, 4096, 4096, len(fatbin), 0, 0, 4096, 0)]
    pos = 4096 + len(pad(fatbin))
    sh.append(struct.pack("<IIQQQQIIQQ", 13, 3, 0, 0, pos, len(names), 0, 0, 1, 0))
    eh = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9, 3, 62, 1, 0, 0,
                     pos + len(names), 0, 64, 0, 0, 64, len(sh), len(sh) - 1)
    return pad(eh) + pad(fatbin) + names + b"".join(sh)
