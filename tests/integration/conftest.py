from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from rocmbuild.run import run


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
