"""The generated pages as people see them: headless Chromium loads the root page and a project
page (file://), dumps the DOM, and takes screenshots that must not be blank."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest
from publish_helpers import hip_library, make_wheel, rocmbuild

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1200,900",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )


def png_pixels(path: Path) -> tuple[int, int, set[bytes]]:
    """Decode an 8-bit RGB(A) PNG with zlib only; return width, height, and a sample of the
    distinct pixel values (enough to tell a blank page from a page with text)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            assert body[8] == 8
            ctype = body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = {2: 3, 6: 4}[ctype]
    raw = zlib.decompress(idat)
    stride = width * bpp
    colours: set[bytes] = set()
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:
            colours.update(bytes(line[i : i + 3]) for i in range(0, stride, bpp * 4))
        prev = line
    return width, height, colours


def test_pages_render_in_chromium(tmp_path: Path) -> None:
    index = tmp_path / "index"
    w = [
        make_wheel(tmp_path / "w", "flash-attn", "2.8.3+rocm6.2.gfx942"),
        make_wheel(tmp_path / "w", "flash-attn", "2.8.2"),
        make_wheel(tmp_path / "w", "probe", "0.1"),
        make_wheel(tmp_path / "w", "torch", "2.9.1+rocm6.2.gfx942",
                   metadata_extra="Requires-External: rocm (>=6.2,<6.3)\n"),
    ]
    rocmbuild("publish", *map(str, w), "--index", str(index), check=True)
    root_url = (index / "stable" / "simple" / "index.html").as_uri()
    proj_url = (index / "stable" / "simple" / "flash-attn" / "index.html").as_uri()
    view_url = (index / "stable" / "rocm6.2" / "simple" / "torch" / "index.html").as_uri()

    dom = chromium("--dump-dom", root_url)
    assert dom.returncode == 0, dom.stderr
    assert "Simple index: stable" in dom.stdout
    assert '<a href="flash-attn/">flash-attn</a>' in dom.stdout
    assert '<a href="probe/">probe</a>' in dom.stdout
    assert '<a href="../rocm6.2/simple/">rocm6.2</a>' in dom.stdout  # the per-ROCm view

    dom = chromium("--dump-dom", view_url)
    assert dom.returncode == 0, dom.stderr
    assert "Stage <b>stable / rocm6.2</b>" in dom.stdout
    href = 'href="../../../files/torch-2.9.1%2Brocm6.2.gfx942-py3-none-any.whl#sha256='
    assert href in dom.stdout
    assert (index / "stable/rocm6.2/simple/torch/../../../files/"
            "torch-2.9.1+rocm6.2.gfx942-py3-none-any.whl").is_file()

    dom = chromium("--dump-dom", proj_url)
    assert dom.returncode == 0, dom.stderr
    assert "Links for flash-attn" in dom.stdout
    assert (
        'href="../../files/flash_attn-2.8.3%2Brocm6.2.gfx942-py3-none-any.whl#sha256=' in dom.stdout
    )
    assert 'data-requires-python="&gt;=3.8"' in dom.stdout
    assert "2.8.3+rocm6.2.gfx942" in dom.stdout  # the version column

    for name, url in (("root", root_url), ("project", proj_url), ("view", view_url)):
        png = tmp_path / f"{name}.png"
        shot = chromium(f"--screenshot={png}", url)
        assert shot.returncode == 0 and png.exists(), shot.stderr
        width, height, colours = png_pixels(png)
        assert (width, height) == (1200, 900)
        assert len(colours) > 5, f"{name} screenshot looks blank"


def test_view_pages_show_pip_and_uv_snippets(tmp_path: Path) -> None:
    """A per-arch view's root page shows its pip line (--extra-index-url) and uv's explicit
    index + source, with INDEX_URL replaced by where the page is loaded from; the all-wheels
    page lists each view with its pip line. (The wheel's HIP library is a stub ELF file with a
    real offload-bundle layout: no GPU here.)"""
    index = tmp_path / "index"
    wheel = make_wheel(tmp_path / "w", "flash-attn", "2.8.3+rocm6.2.gfx90a",
                       members={"flash_attn/_C.so": hip_library(["gfx90a"])})
    rocmbuild("publish", str(wheel), "--index", str(index), check=True)
    base = index.as_uri()
    view = f"{base}/stable/gfx90a/simple/"
    dom = chromium("--dump-dom", (index / "stable/gfx90a/simple/index.html").as_uri())
    assert dom.returncode == 0, dom.stderr
    assert f"pip install --extra-index-url {view} flash-attn" in dom.stdout
    assert "[[tool.uv.index]]" in dom.stdout and f'url = "{view}"' in dom.stdout
    assert "explicit = true" in dom.stdout
    assert 'flash-attn = { index = "rocmbuild-gfx90a" }' in dom.stdout
    assert "INDEX_URL" not in dom.stdout.split("<script>")[0]  # all filled in
    dom = chromium("--dump-dom", (index / "stable/simple/index.html").as_uri())
    assert dom.returncode == 0, dom.stderr
    assert '<a href="../gfx90a/simple/">gfx90a</a>' in dom.stdout
    assert f"pip install --extra-index-url {view} flash-attn" in dom.stdout
    assert f"pip install --extra-index-url {base}/stable/simple/ flash-attn" in dom.stdout
    png = tmp_path / "view.png"
    shot = chromium(f"--screenshot={png}", (index / "stable/gfx90a/simple/index.html").as_uri())
    assert shot.returncode == 0 and png.exists(), shot.stderr
    assert len(png_pixels(png)[2]) > 5, "view screenshot looks blank"


def test_a_view_page_lists_only_the_build_made_for_its_arch(tmp_path: Path) -> None:
    """issue 24: gfx90a- and gfx942-labelled builds of one pure-Python release: the gfx90a
    view's project page, as Chromium shows it, links the gfx90a build only; the all-wheels
    page links both and says what each view holds."""
    import json

    index = tmp_path / "index"
    wheels = []
    for arch in ("gfx90a", "gfx942"):
        prov = json.dumps({"archs": [arch], "rocm_version": "6.2.0"}).encode()
        wheels.append(make_wheel(tmp_path / arch, "okpkg", f"1.0+rocm6.2.{arch}", members={
            f"okpkg-1.0+rocm6.2.{arch}.dist-info/rocmbuild.json": prov}))
    rocmbuild("publish", *map(str, wheels), "--index", str(index), check=True)
    dom = chromium("--dump-dom", (index / "stable/gfx90a/simple/okpkg/index.html").as_uri())
    assert dom.returncode == 0, dom.stderr
    assert "okpkg-1.0+rocm6.2.gfx90a-py3-none-any.whl" in dom.stdout
    assert "gfx942" not in dom.stdout and "1 file(s)" in dom.stdout
    dom = chromium("--dump-dom", (index / "stable/simple/okpkg/index.html").as_uri())
    assert "okpkg-1.0+rocm6.2.gfx942-py3-none-any.whl" in dom.stdout and "2 file(s)" in dom.stdout
    dom = chromium("--dump-dom", (index / "stable/simple/index.html").as_uri())
    assert "of a pure-Python ROCm release, the build made for gfx90a when there is one" in \
        dom.stdout
    png = tmp_path / "okpkg.png"
    shot = chromium(f"--screenshot={png}",
                    (index / "stable/gfx90a/simple/okpkg/index.html").as_uri())
    assert shot.returncode == 0 and png.exists(), shot.stderr
    assert len(png_pixels(png)[2]) > 5, "view page screenshot looks blank"
