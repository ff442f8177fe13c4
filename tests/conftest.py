"""Shared fixtures. Real tools everywhere (pip, git, clang, ...); what cannot exist here (an AMD
GPU, a ROCm torch, a ROCm SDK) is faked with small fixture trees, and each such test says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# The README's main job: the flash-attn Triton variant from the pinned PyPI sdist.
TRITON_ARGS = ("flash-attn", "--arch", "gfx942", "--variant", "triton", "--source", "pypi")
# Fixtures that build for real (the flash-attn sdist, the HIP probe, the cmake backend's vecadd,
# DeepSpeed's cpu_adam): their tests are `slow`.
SLOW_FIXTURES = frozenset({"triton_build", "probe_wheel_2", "probe_wheel_942", "vecadd_build",
                           "ds_build"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers by place: tests/integration -> integration, tests/integration/hip -> hip as well,
    tests/gpu -> gpu; and `slow` for every test that uses a real build fixture."""
    tests = Path(__file__).parent
    for item in items:
        where = item.path.relative_to(tests).parts if item.path.is_relative_to(tests) else ()
        if where[:1] == ("integration",):
            item.add_marker(pytest.mark.integration)
            if where[1:2] == ("hip",):
                item.add_marker(pytest.mark.hip)
        elif where[:1] == ("gpu",):
            item.add_marker(pytest.mark.gpu)
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("heavy") and os.environ.get("ROCMBUILD_HEAVY") != "1":
            item.add_marker(pytest.mark.skip(
                reason="heavy: a real build too long for CI; run by hand with ROCMBUILD_HEAVY=1"))
    groups = xdist_groups(items)
    where_to = getattr(config, "workerinput", {}).get(GROUPS_DIR)
    if where_to:  # an xdist worker: hand the groups to the controller's scheduler (below)
        out = Path(where_to) / f"{config.workerinput['workerid']}.json"
        out.with_suffix(".part").write_text(json.dumps(groups, sort_keys=True))
        os.replace(out.with_suffix(".part"), out)


# ---------------------------------------------------------------- pytest-xdist (scripts/test.sh)
# Under `-n 2 --dist loadgroup` every worker would build its own copy of each session fixture, and
# two workers would start two Slurm clusters. Tests that share something built once run on one
# worker: a heavy session fixture (SHARED_SESSION; the two probe wheels count as one), their
# module's module-scoped fixtures, a fixed resource (SHARED_MODULE). Everything else is spread.
SHARED_SESSION = {"triton_build": "triton_build", "probe_wheel_2": "probe",
                  "probe_wheel_942": "probe", "objs": "hipobjs", "validated": "validated",
                  "real_wheels": "real_wheels", "vecadd_build": "vecadd"}
SHARED_MODULE = {"test_slurm.py": "slurm", "test_nightly_slurm.py": "slurm"}
GROUPS_DIR = "rocmbuild_xdist_groups"


def xdist_groups(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> group for the tests that share something (connected components: two tests that
    share anything, directly or through a third, are in one group). Each test also gets an
    ``xdist_group`` mark, which xdist's own loadgroup honours with pytest < 9.2 (9.2's structured
    node ids broke it: pytest-xdist issue 1386); the mapping goes to the scheduler below."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    keys: list[list[str]] = []
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs if info is not None else {}
        ks = [f"s:{SHARED_SESSION[n]}" for n in defs if n in SHARED_SESSION]
        if any(d.scope == "module" for fds in defs.values() for d in fds):
            ks.append(f"m:{item.path}")
        if item.path.name in SHARED_MODULE:
            ks.append(f"r:{SHARED_MODULE[item.path.name]}")
        for k in ks[1:]:
            parent[find(k)] = find(ks[0])
        keys.append(ks)
    groups = {}
    for item, ks in zip(items, keys, strict=True):
        if ks:
            groups[item.nodeid] = find(ks[0]).split(":", 1)[1]
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    return groups


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller side: each worker writes its groups into one temporary directory."""
    config = node.config
    if config.getoption("dist", "no") == "loadgroup":
        if GROUPS_KEY not in config.stash:
            config.stash[GROUPS_KEY] = Path(tempfile.mkdtemp(prefix="rocmbuild-xdist-groups-"))
        node.workerinput[GROUPS_DIR] = str(config.stash[GROUPS_KEY])


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the groups the workers computed (xdist's LoadGroupScheduling,
    whose scopes come from nodeid suffixes, is given the mapping instead)."""
    if config.getoption("dist", "no") != "loadgroup" or GROUPS_KEY not in config.stash:
        return None
    from xdist.scheduler import LoadGroupScheduling

    where = config.stash[GROUPS_KEY]

    class Grouped(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (schedule() runs)
                found = sorted(where.glob("*.json"))
                self.groups = json.loads(found[0].read_text()) if found else {}
            return self.groups.get(nodeid) or str(super()._split_scope(nodeid))

    return Grouped(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUPS_KEY in config.stash:
        shutil.rmtree(config.stash[GROUPS_KEY], ignore_errors=True)


GROUPS_KEY = pytest.StashKey[Path]()


def rocmbuild(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (`python -m rocmbuild`) in a child process."""
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    res = subprocess.run(
        [sys.executable, "-m", "rocmbuild", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or REPO,
    )
    if check and res.returncode != 0:
        raise AssertionError(f"rocmbuild {' '.join(args)} -> {res.returncode}\n{res.stderr}")
    return res


@pytest.fixture(scope="session")
def download_cache(request: pytest.FixtureRequest) -> Path:
    """Downloads survive between test runs under pytest's cache (the sdist is 8.5 MB)."""
    return Path(request.config.cache.mkdir("rocmbuild-downloads"))


@pytest.fixture
def workdir(tmp_path: Path, download_cache: Path) -> dict[str, str]:
    """A fresh workspace and cache whose downloads/ is the shared download cache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "ROCMBUILD_CACHE_DIR": str(cache)}


def make_rocm_torch(site: Path, version: str = "2.5.1+rocm6.2",
                    hip: str | None = "6.2.41133-dd7f95766", rocm: str | None = None) -> Path:
    """A site dir holding only the *metadata* of a ROCm torch (no code): its dist-info and a
    torch/version.py with ``hip`` (and ``rocm``, as torch >= 2.10 writes it; left out when None,
    as older torches have no such field). It fakes what this machine cannot have, a ROCm build
    of torch. Put it first on sys.path/PYTHONPATH."""
    di = site / f"torch-{version}.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    (di / "RECORD").write_text("")
    (site / "torch").mkdir()
    rocm_line = "" if rocm is None else f"rocm: Optional[str] = '{rocm}'\n"
    (site / "torch" / "version.py").write_text(
        f"from typing import Optional\n__version__ = '{version}'\ndebug = False\ncuda = None\n"
        f"hip = {hip!r}\n{rocm_line}")
    return site


@pytest.fixture
def fake_rocm_torch(tmp_path: Path) -> Path:
    """A ROCm torch 2.5.1+rocm6.2 (HIP 6.2, no torch.version.rocm) as metadata only
    (make_rocm_torch): no ROCm torch exists here."""
    return make_rocm_torch(tmp_path / "fake-rocm-torch")


# ROCm release -> (.info/version, HIP version of include/hip/hip_version.h). Up to 7.x HIP's
# major.minor is ROCm's; from ROCm 10 it is not (ROCm 10.1 ships HIP 7.16). The patch numbers are
# illustrative: none of these ROCm installs exists on this machine.
ROCM_TREES = {
    "6.2": ("6.2.0-66", "6.2.41133"),
    "7.2": ("7.2.0-43", "7.2.26015"),
    "7.14": ("7.14.0", "7.14.26211"),
    "10.1": ("10.1.0", "7.16.26400"),
}


def make_rocm_root(root: Path, version: str = "6.2.0-66", omit: tuple[str, ...] = (),
                   hip: str | None = None, version_file: str = ".info") -> Path:
    """A directory shaped like /opt/rocm without any real ROCm: the ROCm version in
    ``version_file`` (".info": .info/version; "header": include/rocm-core/rocm_version.h;
    "none": no ROCm version file), include/hip/hip_version.h when ``hip`` is given, a bin/hipcc
    that fails, and for every ROCm component rocmbuild knows except ``omit`` the file a real
    install has: its CMake package config under lib/cmake/<name>/ (empty files)."""
    from rocmbuild.core.components import COMPONENTS

    root.mkdir(parents=True, exist_ok=True)
    if version_file == ".info":
        (root / ".info").mkdir()
        (root / ".info" / "version").write_text(version + "\n")
    elif version_file == "header":
        major, minor, patch = (version.split("-")[0].split(".") + ["0", "0"])[:3]
        (root / "include/rocm-core").mkdir(parents=True)
        (root / "include/rocm-core/rocm_version.h").write_text(
            f"#pragma once\n#define ROCM_VERSION_MAJOR   {major}\n"
            f"#define ROCM_VERSION_MINOR   {minor}\n#define ROCM_VERSION_PATCH   {patch}\n")
    if hip is not None:
        major, minor, patch = hip.split(".")
        (root / "include/hip").mkdir(parents=True)
        (root / "include/hip/hip_version.h").write_text(
            f"#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n"
            f"#define HIP_VERSION_PATCH {patch}\n#define HIP_VERSION_GITHASH \"0\"\n")
    (root / "bin").mkdir()
    (root / "bin" / "hipcc").write_text("#!/bin/sh\nexit 1\n")
    for name in COMPONENTS:
        if name not in omit:
            (root / "lib/cmake" / name).mkdir(parents=True)
            (root / "lib/cmake" / name / f"{name}-config.cmake").write_text("")
    return root


def make_therock_site(site: Path, release: str = "10.1", targets: str = "gfx942;gfx950",
                      devel: str = "unpacked") -> Path:
    """A site-packages dir holding what TheRock's ``pip install "rocm[libraries,devel]"`` puts
    there, as files only (no ROCm wheel can be installed on this machine, so none of it runs):
    the ``rocm`` distribution (package ``rocm_sdk``), ``rocm_sdk_core`` with ``_rocm_sdk_core/``
    (``.info/version``, ``share/therock/dist_info.json`` with ``targets``) and, by ``devel``,
    ``rocm_sdk_devel`` with its tree ``_rocm_sdk_devel/`` "unpacked" (what ``rocm-sdk init``
    leaves: a make_rocm_root tree with rocm_version.h and hip_version.h whose .info/version is a
    relative link into _rocm_sdk_core), "packed" (only ``rocm_sdk_devel/_devel.tar.xz``) or
    "absent" (rocm[libraries] only). The layout follows TheRock's packaging code as read in
    /work/research/upstream-facts.md section 4; _rocm_sdk_core/.info/version is inferred there."""
    version, hip = ROCM_TREES[release]
    dists = ["rocm", "rocm_sdk_core"] + ([] if devel == "absent" else ["rocm_sdk_devel"])
    for dist in dists:
        di = site / f"{dist}-{version}.dist-info"
        di.mkdir(parents=True)
        name = dist.replace("_", "-")
        (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (di / "RECORD").write_text("")
    (site / "rocm_sdk").mkdir()
    (site / "rocm_sdk/__init__.py").write_text("")
    core = site / "_rocm_sdk_core"
    (core / ".info").mkdir(parents=True)
    (core / ".info/version").write_text(version + "\n")
    (core / "share/therock").mkdir(parents=True)
    (core / "share/therock/dist_info.json").write_text(
        json.dumps({"dist_amdgpu_targets": targets}))
    if devel != "absent":
        (site / "rocm_sdk_devel").mkdir()
        (site / "rocm_sdk_devel/__init__.py").write_text("")
    if devel == "packed":
        (site / "rocm_sdk_devel/_devel.tar.xz").write_bytes(b"")
    elif devel == "unpacked":
        tree = make_rocm_root(site / "_rocm_sdk_devel", version, hip=hip, version_file="header")
        (tree / "__init__.py").write_text("")
        (tree / ".info").mkdir()
        (tree / ".info/version").symlink_to("../../_rocm_sdk_core/.info/version")
    return site


@pytest.fixture
def fake_rocm_root(tmp_path: Path) -> Path:
    """A complete ROCm 6.2 root as a fixture tree (make_rocm_root): no real ROCm exists here."""
    return make_rocm_root(tmp_path / "opt-rocm")


@pytest.fixture(scope="session")
def triton_build(
    tmp_path_factory: pytest.TempPathFactory, download_cache: Path
) -> dict[str, Any]:
    """The real flash-attn Triton-variant wheel, built once per test session by the real CLI from
    the real PyPI sdist (pinned by sha256; the download is kept in pytest's cache)."""
    return build_once(tmp_path_factory.mktemp("triton-build"), download_cache, *TRITON_ARGS)


def build_once(base: Path, download_cache: Path, *args: str) -> dict[str, Any]:
    """``rocmbuild *args`` in a fresh workspace under ``base`` whose downloads are the session's
    (pytest's cache): it must succeed with exactly one wheel; its env, wheel, stderr and base."""
    cache = base / "cache"
    cache.mkdir()
    (cache / "downloads").symlink_to(download_cache)
    env = {"ROCMBUILD_WORKDIR": str(base / "build"), "ROCMBUILD_CACHE_DIR": str(cache)}
    res = rocmbuild(*args, env=env)
    assert res.returncode == 0, res.stderr
    wheels = sorted((base / "build" / "wheels").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return {"env": env, "wheel": wheels[0], "stderr": res.stderr, "base": base}
