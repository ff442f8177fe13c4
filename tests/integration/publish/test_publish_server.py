"""Upload to a real pypiserver on 127.0.0.1 (htpasswd auth via passlib) through twine, then
install from it with real pip. Also checks that the password never shows up in any output."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from publish_helpers import clean_env, free_port, make_wheel, pip_install, rocmbuild, wait_for_http

USER = "ci-bot"
PASSWORD = "s3cr3t-Pa55-7f1e9c"  # a string that cannot appear by accident


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    from passlib.apache import HtpasswdFile

    root = tmp_path_factory.mktemp("pypiserver")
    packages = root / "packages"
    packages.mkdir()
    ht = HtpasswdFile(str(root / "htpasswd"), new=True)
    ht.set_password(USER, PASSWORD)
    ht.save()
    port = free_port()
    log = root / "server.log"
    exe = Path(sys.executable).with_name("pypi-server")
    proc = subprocess.Popen(
        [
            str(exe),
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            str(port),
            "-P",
            str(root / "htpasswd"),
            "-a",
            "update",
            "--disable-fallback",
            "--log-file",
            str(log),
            str(packages),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    url = f"http://127.0.0.1:{port}/"
    wait_for_http(url + "simple/", proc, "pypiserver", log=log)
    yield {"url": url, "packages": packages, "log": log}
    proc.terminate()
    proc.wait(10)


def creds_env(**extra: str) -> dict[str, str]:
    return clean_env(ROCMBUILD_INDEX_USER=USER, ROCMBUILD_INDEX_PASSWORD=PASSWORD, **extra)


def test_upload_then_pip_install(
    server: dict, real_wheels: dict[str, Path], tmp_path: Path
) -> None:
    url = str(server["url"])
    wheels = [str(real_wheels["tiny"]), str(real_wheels["other"])]
    work = tmp_path / "work"
    proc = rocmbuild(
        "-v", "--workdir", str(work), "publish", *wheels, "--index", url, env=creds_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert real_wheels["tiny"].name in proc.stderr
    stored = Path(server["packages"]) / real_wheels["tiny"].name
    assert stored.read_bytes() == real_wheels["tiny"].read_bytes()
    pip = pip_install(url + "simple/", tmp_path / "t", "tiny-pkg==1.0+rocm6.2.gfx942")
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert "rocm6.2" in (tmp_path / "t" / "tiny_pkg" / "__init__.py").read_text()

    # identical re-upload: a no-op, checked against the server's sha256 before any upload
    mtime = stored.stat().st_mtime_ns
    again = rocmbuild("-v", "publish", *wheels, "--index", url, "--json", env=creds_env())
    assert again.returncode == 0, again.stderr
    assert '"unchanged"' in again.stdout and real_wheels["tiny"].name in again.stdout
    assert stored.stat().st_mtime_ns == mtime

    # the password never appears: not in -v output, the server log, or anything written
    everything = proc.stdout + proc.stderr + again.stdout + again.stderr
    everything += Path(server["log"]).read_text()
    for p in work.rglob("*") if work.exists() else []:
        if p.is_file():
            everything += p.read_text(errors="replace")
    assert PASSWORD not in everything


def test_different_bytes_refused_with_both_hashes(server: dict, tmp_path: Path) -> None:
    url = str(server["url"])
    a = make_wheel(tmp_path / "a", "srvimmut", "1.0", payload="A = 1\n")
    b = make_wheel(tmp_path / "b", "srvimmut", "1.0", payload="B = 1\n")
    rocmbuild("publish", str(a), "--index", url, env=creds_env(), check=True)
    proc = rocmbuild("-v", "publish", str(b), "--index", url, env=creds_env())
    assert proc.returncode == 9
    ha, hb = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b))
    assert a.name in proc.stderr and ha in proc.stderr and hb in proc.stderr
    assert (Path(server["packages"]) / a.name).read_bytes() == a.read_bytes()
    assert PASSWORD not in proc.stdout + proc.stderr


def test_twine_env_credentials_and_dry_run(server: dict, tmp_path: Path) -> None:
    url = str(server["url"])
    w = make_wheel(tmp_path / "w", "twinecreds", "1.0")
    env = clean_env(TWINE_USERNAME=USER, TWINE_PASSWORD=PASSWORD)
    dry = rocmbuild("publish", str(w), "--index", url, "--dry-run", env=env, check=True)
    assert "would upload" in dry.stderr
    assert not (Path(server["packages"]) / w.name).exists()
    rocmbuild("publish", str(w), "--index", url, env=env, check=True)
    assert (Path(server["packages"]) / w.name).exists()


def test_wrong_password_is_one_line_error(server: dict, tmp_path: Path) -> None:
    url = str(server["url"])
    w = make_wheel(tmp_path / "w", "wrongpw", "1.0")
    bad = "not-the-Pa55word-42"
    proc = rocmbuild(
        "-v",
        "publish",
        str(w),
        "--index",
        url,
        env=clean_env(ROCMBUILD_INDEX_USER=USER, ROCMBUILD_INDEX_PASSWORD=bad),
    )
    assert proc.returncode == 9, proc.stderr
    assert "upload to" in proc.stderr and "hint:" in proc.stderr
    assert bad not in proc.stdout + proc.stderr
    assert not (Path(server["packages"]) / w.name).exists()


def test_url_credentials_are_redacted(server: dict, tmp_path: Path) -> None:
    port_url = str(server["url"]).replace("http://", f"http://{USER}:{PASSWORD}@")
    w = make_wheel(tmp_path / "w", "urlcreds", "1.0")
    proc = rocmbuild("-v", "publish", str(w), "--index", port_url, "--json", env=clean_env())
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout holds only the JSON, twine's chatter goes to stderr
    assert data["uploaded"] == [w.name]
    assert data["index"] == server["url"]
    assert PASSWORD not in proc.stdout + proc.stderr
    assert (Path(server["packages"]) / w.name).exists()


def test_server_down_is_one_line_error(tmp_path: Path) -> None:
    w = make_wheel(tmp_path / "w", "down", "1.0")
    proc = rocmbuild("publish", str(w), "--index", "http://127.0.0.1:9/", env=creds_env())
    assert proc.returncode == 9 and "cannot connect" in proc.stderr


def test_password_from_keyring(server: dict, tmp_path: Path) -> None:
    """Real keyring lookup through twine, with the keyrings.alt plaintext backend in a temp
    data dir (no desktop secret service here). Only the username comes from the environment."""
    url = str(server["url"])
    data = tmp_path / "xdg"
    env = clean_env(
        ROCMBUILD_INDEX_USER=USER,
        PYTHON_KEYRING_BACKEND="keyrings.alt.file.PlaintextKeyring",
        XDG_DATA_HOME=str(data),
    )
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import keyring; keyring.set_password({url!r}, {USER!r}, {PASSWORD!r})",
        ],
        env=env,
        check=True,
        timeout=60,
    )
    w = make_wheel(tmp_path / "w", "keyringcreds", "1.0")
    proc = rocmbuild("-v", "publish", str(w), "--index", url, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (Path(server["packages"]) / w.name).exists()
    assert PASSWORD not in proc.stdout + proc.stderr
    # without the keyring entry the upload is refused (the test can fail)
    env["XDG_DATA_HOME"] = str(tmp_path / "empty")
    w2 = make_wheel(tmp_path / "w", "keyringcreds", "2.0")
    proc = rocmbuild("publish", str(w2), "--index", url, env=env)
    assert proc.returncode == 9, proc.stderr
