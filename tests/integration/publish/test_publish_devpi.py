"""Upload to a real devpi-server on 127.0.0.1 (non-volatile index), then pip install from it.

devpi-server lives in its own venv made by scripts/install-devpi.sh (default .venv-devpi, or
$ROCMBUILD_DEVPI_VENV); the test skips when it is not installed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from publish_helpers import (
    REPO,
    clean_env,
    free_port,
    make_wheel,
    pip_install,
    rocmbuild,
    wait_for_http,
)

VENV = Path(os.environ.get("ROCMBUILD_DEVPI_VENV", REPO / ".venv-devpi"))
pytestmark = pytest.mark.skipif(
    not (VENV / "bin" / "devpi-server").exists(),
    reason="devpi-server not installed: run scripts/install-devpi.sh",
)
USER, PASSWORD = "ci", "devpi-Pa55-e41b"


def _call(method: str, url: str, body: dict, headers: dict[str, str] | None = None) -> dict:
    req = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(headers or {}),
        },
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("devpi")
    env = clean_env()
    subprocess.run(
        [
            str(VENV / "bin" / "devpi-init"),
            "--serverdir",
            str(root / "srv"),
            "--root-passwd",
            "rootpw",
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    port = free_port()
    log = root / "devpi-server.log"
    log_file = log.open("wb")
    proc = subprocess.Popen(
        [
            str(VENV / "bin" / "devpi-server"),
            "--serverdir",
            str(root / "srv"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    wait_for_http(base + "/+api", proc, "devpi-server", log=log)
    _call("PUT", f"{base}/{USER}", {"password": PASSWORD})
    token = _call("POST", f"{base}/+login", {"user": USER, "password": PASSWORD})
    auth = base64.b64encode(f"{USER}:{token['result']['password']}".encode()).decode()
    _call(
        "PUT",
        f"{base}/{USER}/rel",
        {"type": "stage", "bases": "", "volatile": False},
        {"X-Devpi-Auth": auth},
    )
    yield f"{base}/{USER}/rel/"
    proc.terminate()
    proc.wait(15)
    log_file.close()


def test_devpi_upload_noop_refuse_install(devpi: str, tmp_path: Path) -> None:
    a = make_wheel(tmp_path / "a", "devpi-demo", "1.0+rocm6.2", payload="A = 1\n")
    b = make_wheel(tmp_path / "b", "devpi-demo", "1.0+rocm6.2", payload="B = 1\n")
    env = clean_env(
        ROCMBUILD_INDEX_USER=USER,
        ROCMBUILD_INDEX_PASSWORD=PASSWORD,
        ROCMBUILD_INDEX_SIMPLE_URL=devpi + "+simple/",
    )
    first = rocmbuild("-v", "publish", str(a), "--index", devpi, env=env)
    assert first.returncode == 0, first.stderr
    again = rocmbuild("-v", "publish", str(a), "--index", devpi, env=env)
    assert again.returncode == 0 and "unchanged" in again.stderr
    bad = rocmbuild("-v", "publish", str(b), "--index", devpi, env=env)
    assert bad.returncode == 9
    assert hashlib.sha256(b.read_bytes()).hexdigest() in bad.stderr
    assert hashlib.sha256(a.read_bytes()).hexdigest() in bad.stderr
    out = first.stdout + first.stderr + again.stdout + again.stderr + bad.stdout + bad.stderr
    assert PASSWORD not in out
    pip = pip_install(devpi + "+simple/", tmp_path / "t", "devpi-demo")
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert "A = 1" in (tmp_path / "t" / "devpi_demo" / "__init__.py").read_text()
