from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from rocmbuild.core.run import run


@pytest.fixture(scope="session")
def chromium():
    """``chromium(html_path, out_png, size) -> DOM text`` (headless Chromium)."""
    return chromium_render


def chromium_render(html_path: Path, out_png: Path, size: str = "1200,1400") -> str:
    """Screenshot ``html_path`` with headless Chromium and return its DOM text."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed")
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"]
    with tempfile.TemporaryDirectory() as prof:
        run([*base, f"--user-data-dir={prof}", f"--screenshot={out_png}",
             f"--window-size={size}", html_path.as_uri()], timeout=120)
    with tempfile.TemporaryDirectory() as prof:
        dom = run([*base, f"--user-data-dir={prof}", "--dump-dom", html_path.as_uri()],
                  capture=True, timeout=120)
    return dom.output


@contextlib.contextmanager
def serve_files(files: Mapping[str, bytes]) -> Iterator[tuple[str, dict[str, int]]]:
    """(base URL, hits per path) of a real http.server on 127.0.0.1 serving ``files`` by path
    (looked up at each request, so a test may add files while it runs); 404 for the rest."""
    hits: dict[str, int] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits[self.path] = hits.get(self.path, 0) + 1
            body = files.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real full disk: a tmpfs of ``size`` (e.g. "16k", "2m") mounted at ``where`` (needs root
    or CAP_SYS_ADMIN; the test is skipped, with mount's reason, where it is not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
