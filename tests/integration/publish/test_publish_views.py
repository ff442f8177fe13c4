"""Per-arch views (``<stage>/<gfx>/simple/``): a pip or uv on a host with one GPU arch, pointed at
that arch's view, gets a wheel with device code for it.

Faked (no GPU and no ROCm here): the wheels' HIP libraries are small ELF files whose
``.hip_fatbin`` holds a real clang offload bundle layout with stub code objects
(``publish_helpers.hip_library``); the publish-time code-object audit reads them as it reads
real ones. Real: rocmbuild publish, pip, uv, and the file:// index they read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from publish_helpers import clean_env, hip_library, make_wheel, rocmbuild

UV = Path(sys.executable).with_name("uv")
ROCM62 = "Requires-External: rocm (>=6.2,<6.3)\n"


def fa_wheel(out: Path, label: str, targets: list[str], claimed: list[str] | None = None) -> Path:
    """A flash-attn-like wheel with one HIP library built for ``targets``; ``claimed``: the archs
    its rocmbuild.json says (what a build asked for), when they differ from the code."""
    members = {"fa/_C.so": hip_library(targets)}
    prov = {"archs": claimed if claimed is not None else targets, "rocm_version": "6.2.0"}
    members[f"fa-1.0+{label}.dist-info/rocmbuild.json"] = json.dumps(prov).encode()
    return make_wheel(out, "fa", f"1.0+{label}", metadata_extra=ROCM62, members=members)


def pip_gets(view: Path, target: Path) -> str:
    """The version pip installs from ``view`` (as its index: nothing else is reachable here)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--index-url",
         view.as_uri() + "/", "--target", str(target), "fa"],
        env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (target / "fa/__init__.py").read_text().split("'")[1]


def uv_gets(view: Path, target: Path) -> str:
    proc = subprocess.run(
        [str(UV), "pip", "install", "--no-deps", "--no-cache", "--offline", "--index-url",
         view.as_uri() + "/", "--target", str(target), "--python", sys.executable, "fa"],
        env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (target / "fa/__init__.py").read_text().split("'")[1]


def test_arch_views_give_each_gpu_its_wheel(tmp_path: Path) -> None:
    """gfx90a-only and gfx942-only builds of one version in one stage, plus a wheel whose
    rocmbuild.json claims gfx90a but whose code has only gfx942 (and whose label sorts
    highest): the gfx90a view holds the gfx90a build only, so pip and uv told they are on
    gfx90a get it, while the all-wheels view gives the highest label. A second stage holding
    only a gfx90a+gfx942 wheel gives that wheel on both views."""
    w = tmp_path / "w"
    w90a = fa_wheel(w, "rocm6.2.gfx90a", ["gfx90a:xnack-"])
    w942 = fa_wheel(w, "rocm6.2.gfx942", ["gfx942:sramecc+:xnack-"])
    liar = fa_wheel(w, "rocm6.2.zz", ["gfx942"], claimed=["gfx90a", "gfx942"])
    index = tmp_path / "index"
    res = rocmbuild("publish", str(w90a), str(w942), str(liar), "--index", str(index),
                    "--dry-run", "--json", check=True)
    pages = json.loads(res.stdout)["pages"]
    assert "gfx90a/simple/fa/index.json" in pages and "gfx942/simple/index.html" in pages
    rocmbuild("publish", str(w90a), str(w942), str(liar), "--index", str(index), check=True)
    stage = index / "stable"
    assert sorted(p.name for p in stage.iterdir()) == ["files", "gfx90a", "gfx942", "rocm6.2",
                                                       "simple"]

    def listed(view: str) -> list[str]:
        data = json.loads((stage / view / "simple/fa/index.json").read_bytes())
        return [f["filename"] for f in data["files"]]

    assert listed("gfx90a") == [w90a.name]
    assert listed("gfx942") == [w942.name, liar.name]
    assert pip_gets(stage / "gfx90a/simple", tmp_path / "p90a") == "1.0+rocm6.2.gfx90a"
    assert uv_gets(stage / "gfx90a/simple", tmp_path / "u90a") == "1.0+rocm6.2.gfx90a"
    assert pip_gets(stage / "gfx942/simple", tmp_path / "p942") == "1.0+rocm6.2.zz"
    assert pip_gets(stage / "simple", tmp_path / "pall") == "1.0+rocm6.2.zz"  # the bug

    root = (stage / "simple/index.html").read_text()
    assert "pip install --extra-index-url INDEX_URL/stable/gfx90a/simple/ fa" in root
    view_page = (stage / "gfx90a/simple/index.html").read_text()
    assert "pip install --extra-index-url INDEX_URL/stable/gfx90a/simple/ fa" in view_page
    assert "[[tool.uv.index]]" in view_page and "explicit = true" in view_page
    assert 'fa = { index = &quot;rocmbuild-gfx90a&quot; }' in view_page

    multi = fa_wheel(tmp_path / "m", "rocm6.2.multi", ["gfx90a", "gfx942"])
    rocmbuild("publish", str(multi), "--index", str(index), "--stage", "testing", check=True)
    testing = index / "testing"
    for gfx in ("gfx90a", "gfx942"):
        assert pip_gets(testing / gfx / "simple", tmp_path / f"m-{gfx}") == "1.0+rocm6.2.multi"
        assert uv_gets(testing / gfx / "simple", tmp_path / f"mu-{gfx}") == "1.0+rocm6.2.multi"


def test_wheels_without_device_code(tmp_path: Path) -> None:
    """A rocmbuild wheel with no device code (the Triton flash-attn: its kernels compile on the
    host at run time) is in every known arch's view; a wheel rocmbuild did not build, without
    device code, is in none; a wheel with HIP host code but no device code is in none."""
    w = tmp_path / "w"
    prov = json.dumps({"archs": ["gfx942"], "rocm_version": "6.2.0"}).encode()
    triton = make_wheel(w, "tri", "1.0", members={"tri-1.0.dist-info/rocmbuild.json": prov})
    plain = make_wheel(w, "plain", "1.0")
    hollow = make_wheel(w, "hollow", "1.0", members={
        "hollow/_C.so": hip_library([]), "hollow-1.0.dist-info/rocmbuild.json": prov})
    index = tmp_path / "index"
    rocmbuild("publish", str(triton), str(plain), str(hollow), "--index", str(index), check=True)
    stage = index / "stable"
    for gfx in ("gfx90a", "gfx942", "gfx1100"):
        names = [p["name"] for p in
                 json.loads((stage / gfx / "simple/index.json").read_bytes())["projects"]]
        assert names == ["tri"], gfx


def test_claimed_archs_that_are_no_gfx_target_make_no_view(tmp_path: Path) -> None:
    """rocmbuild.json is untrusted: a claim of "notanarch" or "rocm9.9" (or ../x) makes no
    view of that name; the wheel is in the known archs' views, as any wheel without device
    code."""
    w = tmp_path / "w"
    prov = json.dumps({"archs": ["notanarch", "rocm9.9", "gfx942", "gfx9999"],
                       "rocm_version": "6.2.0"}).encode()
    tri = make_wheel(w, "tri", "1.0", members={"tri-1.0.dist-info/rocmbuild.json": prov})
    index = tmp_path / "index"
    rocmbuild("publish", str(tri), "--index", str(index), check=True)
    views = {p.name for p in (index / "stable").iterdir() if p.is_dir()}
    assert not views & {"notanarch", "rocm9.9", "gfx9999"}, views
    assert {"gfx942", "gfx90a"} <= views


def pure_wheel(out: Path, arch: str) -> Path:
    """A pure-Python rocmbuild wheel (no device code) built for ``arch``: okpkg 1.0, its local
    label naming the arch, as a per-arch build of a Triton package is labelled."""
    version = f"1.0+rocm6.2.{arch}"
    prov = json.dumps({"archs": [arch], "rocm_version": "6.2.0"}).encode()
    return make_wheel(out / arch, "okpkg", version,
                      members={f"okpkg-{version}.dist-info/rocmbuild.json": prov})


def pip_downloads(view: Path, dest: Path) -> str:
    """The file real pip downloads from ``view`` (its only index) for ``okpkg``."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
         "--index-url", view.as_uri() + "/", "--dest", str(dest), "okpkg"],
        env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return "".join(p.name for p in dest.iterdir())


def test_a_view_prefers_the_pure_python_build_made_for_its_arch(tmp_path: Path) -> None:
    """issue 24: a gfx90a- and a gfx942-labelled build of the same pure-Python release in one
    stage (published apart, the gfx942 one first): the gfx90a view lists only the gfx90a build,
    so pip there gets it (both in every view, it got the gfx942 one: the higher local label);
    gfx950, which neither build targeted, lists both until a gfx950 build comes."""
    index, w = tmp_path / "index", tmp_path / "w"
    w942, w90a = pure_wheel(w, "gfx942"), pure_wheel(w, "gfx90a")
    rocmbuild("publish", str(w942), "--index", str(index), check=True)
    stage = index / "stable"
    assert pip_downloads(stage / "gfx90a/simple", tmp_path / "d0") == w942.name  # the only one
    rocmbuild("publish", str(w90a), "--index", str(index), check=True)

    def listed(view: str) -> list[str]:
        data = json.loads((stage / view / "simple/okpkg/index.json").read_bytes())
        return [f["filename"] for f in data["files"]]

    assert listed("gfx90a") == [w90a.name] and listed("gfx942") == [w942.name]
    assert listed("gfx950") == [w90a.name, w942.name]
    everything = json.loads((stage / "simple/okpkg/index.json").read_bytes())["files"]
    assert [f["filename"] for f in everything] == [w90a.name, w942.name]
    assert not any("_fallback" in f for f in everything)
    assert pip_downloads(stage / "gfx90a/simple", tmp_path / "d1") == w90a.name
    assert pip_downloads(stage / "gfx942/simple", tmp_path / "d2") == w942.name
    assert pip_downloads(stage / "gfx950/simple", tmp_path / "d3") == w942.name
    view_root = json.loads((stage / "gfx90a/simple/index.json").read_bytes())
    assert view_root["projects"] == [{"name": "okpkg", "_latest": "1.0+rocm6.2.gfx90a",
                                      "_files": 1}]
    w950 = pure_wheel(w, "gfx950")
    rocmbuild("publish", str(w950), "--index", str(index), check=True)
    assert listed("gfx950") == [w950.name] and listed("gfx90a") == [w90a.name]
    assert pip_downloads(stage / "gfx950/simple", tmp_path / "d4") == w950.name
