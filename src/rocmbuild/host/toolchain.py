"""What the host offers the build, found without running anything slow and without importing
torch: the ROCm root and its version, and the installed torch (version, HIP version).

A ROCm root is ``--rocm-path`` / ROCM_PATH, then HIP_PATH, then /opt/rocm. Its version comes from
``.info/version`` (ROCm installs) or ``include/hip/hip_version.h``. Debian's /usr layout (HIP 5.2
headers, no SDK) is reported as kind "debian" and is never treated as a ROCm SDK.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import options
from rocmbuild.host import components


@dataclass(frozen=True)
class RocmRoot:
    """A ROCm root (an SDK, or Debian's HIP headers) and what it holds."""

    path: Path
    version: str  # "6.2.0", or "" when unknown
    kind: str  # "rocm" (an SDK install) or "debian" (distribution headers only)
    has_hipcc: bool
    where: str = ""  # how it was found: --rocm-path, ROCM_PATH, HIP_PATH, /opt/rocm, Debian /usr
    components: tuple[str, ...] | None = None
    """The ROCm components (``rocmbuild.host.components``) found under it; None: not looked for (a
    host file written before rocmbuild recorded them)."""


@dataclass(frozen=True)
class TorchInfo:
    """The torch installed in this Python, read from its files (not imported)."""

    version: str  # "" when torch is not installed
    hip: str | None  # torch.version.hip, e.g. "6.2.41133-dd7f95766"
    cuda: str | None
    location: str = ""  # the torch package directory

    @property
    def kind(self) -> str:
        if not self.version:
            return "none"
        local = self.version.partition("+")[2]
        if self.hip or local.startswith("rocm"):
            return "rocm"
        return "cuda" if self.cuda or local.startswith("cu") else "cpu"

    @property
    def hip_short(self) -> str | None:
        """ "6.2.41133-dd7f95766" -> "6.2"."""
        if not self.hip:
            return None
        m = re.match(r"(\d+)\.(\d+)", self.hip)
        return f"{m.group(1)}.{m.group(2)}" if m else None


def rocm_version(root: Path) -> str:
    """"6.2.0" from <root>/.info/version (ROCm) or include/hip/hip_version.h; "" if neither."""
    info = root / ".info" / "version"
    if info.is_file():
        return info.read_text().strip().split("-")[0]
    header = root / "include" / "hip" / "hip_version.h"
    if header.is_file():
        text = header.read_text(errors="replace")
        parts = [
            re.search(rf"#define HIP_VERSION_{k}\s+(\d+)", text)
            for k in ("MAJOR", "MINOR", "PATCH")
        ]
        if all(parts):
            return ".".join(p.group(1) for p in parts if p)
    return ""


def rocm_candidates(fs_root: Path = Path("/")) -> list[tuple[Path, str]]:
    """(ROCm root, where from): ROCM_PATH, HIP_PATH, /opt/rocm, each moved under ``fs_root``
    (the fixture-tree tests move the file system root)."""
    out: list[tuple[Path, str]] = []
    for var in ("ROCM_PATH", "HIP_PATH"):
        v = options.env(var)
        if v:
            out.append((fs_root / v.lstrip("/"), var))
    out.append((fs_root / "opt/rocm", "/opt/rocm"))
    return out


def _looks_like_rocm(p: Path) -> bool:
    return any((p / m).exists() for m in (".info/version", "include/hip/hip_runtime.h",
                                          "bin/hipcc"))


def find_rocm_root(explicit: str | None = None, fs_root: Path = Path("/"),
                   with_components: bool = True) -> RocmRoot | None:
    """The ROCm root: ``explicit`` (--rocm-path), then rocm_candidates(), then Debian's /usr
    layout (HIP headers only, kind "debian", never an SDK). ``with_components=False`` leaves
    its components not looked for (None): a listing of its lib dirs, milliseconds that a plan
    needing none of them does not spend."""

    def found(path: Path) -> tuple[str, ...] | None:
        return components.find(path) if with_components else None

    cands = [(Path(explicit), "--rocm-path")] if explicit else []
    for path, where in cands + rocm_candidates(fs_root):
        if path.is_dir() and (where == "--rocm-path" or _looks_like_rocm(path)):
            return RocmRoot(path, rocm_version(path), "rocm", (path / "bin/hipcc").exists(),
                            where, found(path))
    usr = fs_root / "usr"
    if (usr / "include/hip/hip_version.h").is_file() or (usr / "include/hip/hip_runtime.h"
                                                          ).is_file():
        return RocmRoot(usr, rocm_version(usr), "debian", (usr / "bin/hipcc").exists(),
                        "Debian /usr", found(usr))
    return None


def _norm(name: str) -> str:
    """A distribution name as importlib.metadata compares them (``Flash-Attn`` -> flash_attn)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def find_dists(names: Iterable[str], paths: list[str] | None = None
               ) -> dict[str, tuple[Path, str | None]]:
    """Name -> (metadata directory, version) of the first distribution of each of ``names``
    installed on ``paths`` (default sys.path), searched as ``importlib.metadata`` does
    (``*.dist-info`` and ``*.egg-info`` directories, path by path, each directory listed once);
    reading a file per distribution instead of importing importlib.metadata (and email,
    zipfile) keeps a cache hit fast. The version is the metadata's ``Version:`` field (None when
    it has none). Names not installed are left out."""
    wanted: dict[str, list[str]] = {}
    for n in names:
        wanted.setdefault(_norm(n), []).append(n)
    found: dict[str, tuple[Path, str | None]] = {}
    seen: set[str] = set()
    for entry in sys.path if paths is None else paths:
        if len(seen) == len(wanted):
            break
        try:
            children = os.listdir(entry or ".")
        except OSError:
            continue  # not a directory (a zip, gone): importlib.metadata finds no dist there either
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            norm = _norm(low.rpartition(".")[0].partition("-")[0])
            if norm not in wanted or norm in seen:
                continue
            seen.add(norm)
            where = Path(entry or ".") / child
            version = _version(where / ("METADATA" if low.endswith(".dist-info")
                                        else "PKG-INFO"))
            found.update((n, (where, version)) for n in wanted[norm])
    return found


def _version(metadata: Path) -> str | None:
    """The ``Version:`` header of a METADATA / PKG-INFO file (the headers end at a blank line)."""
    try:
        with metadata.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.strip().lower() == "version":
                    return value.strip()
    except OSError:
        pass
    return None


def torch_info(site_paths: list[str] | None = None) -> TorchInfo:
    """The torch in this interpreter (or in ``site_paths``), read from its metadata and
    torch/version.py without importing it."""
    found = find_dists(["torch"], None if site_paths is None else list(site_paths)).get("torch")
    if found is None or found[1] is None:
        return TorchInfo("", None, None)
    hip = cuda = None
    version_py = found[0].parent / "torch" / "version.py"
    if version_py.is_file():
        text = version_py.read_text(errors="replace")
        m = re.search(r"^hip\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        hip = m.group(1) if m else None
        m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        cuda = m.group(1) if m else None
    return TorchInfo(found[1], hip, cuda, str(version_py.parent))


def dist_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (importlib.metadata.version's answer)."""
    found = find_dists([name]).get(name)
    return None if found is None else found[1]
