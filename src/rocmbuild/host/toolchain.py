"""What the host offers the build, found without running anything slow and without importing
torch or rocm_sdk: the ROCm root and its versions, and the installed torch (version, HIP and
ROCm versions).

A ROCm root is ``--rocm-path`` / ROCM_PATH, then HIP_PATH, then ROCm installed from pip
(TheRock's ``rocm[libraries,devel]``: the ``rocm_sdk`` distribution in this Python's site dirs,
root ``<site-packages>/_rocm_sdk_devel``), then /opt/rocm, then a pip ROCm without its devel
tree (reported, not buildable), then Debian's /usr layout (HIP 5.2 headers, no SDK: kind
"debian", never treated as a ROCm SDK).

Versions (docs/host-checks.md): from ROCm 10 the HIP version is not the ROCm version (ROCm 10.1
ships HIP 7.16), so a root's ROCm version is read from rocm-core's facts (``.info/version``,
``include/rocm-core/rocm_version.h``; for a pip ROCm also ``_rocm_sdk_core/.info/version`` and
the ``rocm`` dist-info's Version), and ``include/hip/hip_version.h`` gives the HIP version,
standing in for the ROCm version only when no rocm-core fact exists (ROCm < 10, Debian). A root
that scripts/install-rocm-sdk.sh unpacked (Debian's packaging of ROCm 7.2.4: multiarch lib dirs,
no .info/version, its version from rocm-core's rocm_version.h) says so in SDK_FACTS (layout
"debian", its device libraries); it is an SDK (kind "rocm") without a runnable hipcc. Every
file read is untrusted: small (FACT_MAX_BYTES), a regular file, no link leading out of the root
(the site dir for a pip ROCm); anything else is a one-line ToolchainError naming the file.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocmbuild.core import fsutil, options, untrusted
from rocmbuild.core.errors import ToolchainError
from rocmbuild.core.pep508 import major_minor
from rocmbuild.host import components

SDK_FACTS = "share/rocmbuild/rocm-sdk.json"
"""The facts file scripts/install-rocm-sdk.sh writes under the root of the tree it unpacks."""
PIP_WHERE = "rocm_sdk (pip)"
"""``RocmRoot.where`` of ROCm installed from pip (TheRock's rocm_sdk)."""
FACT_MAX_BYTES = 64 * 1024
"""The largest version / dist_info file read (real ones are a few hundred bytes)."""


@dataclass(frozen=True)
class RocmRoot:
    """A ROCm root (an SDK, or Debian's HIP headers) and what it holds."""

    path: Path
    version: str
    """The ROCm version, "6.2.0" / "10.1.0" ("" when unknown); for Debian's layout the HIP
    version (it has no ROCm version)."""
    kind: str  # "rocm" (an SDK install) or "debian" (distribution headers only)
    has_hipcc: bool
    where: str = ""
    """How it was found: --rocm-path, ROCM_PATH, HIP_PATH, rocm_sdk (pip), /opt/rocm, Debian
    /usr."""
    components: tuple[str, ...] | None = None
    """The ROCm components (``rocmbuild.host.components``) found under it; None: not looked for (a
    host file written before rocmbuild recorded them)."""
    version_from: str = ""
    """The file ``version`` was read from (``.info/version``, ...); "" in old saved hosts."""
    hip_version: str = ""
    """The HIP version from include/hip/hip_version.h ("7.16.0" with ROCm 10.1); "" unknown."""
    targets: tuple[str, ...] | None = None
    """The gfx targets a pip ROCm's libraries carry (its share/therock/dist_info.json, what
    ``rocm-sdk targets`` prints); None: not a pip ROCm, or not recorded."""
    unusable: str = ""
    """Why this root cannot be built against although it was found (a pip ROCm whose devel tree
    is not unpacked or not installed), with the fix; "" when it can."""
    layout: str = ""
    """"debian": Debian's packaging of a ROCm SDK (scripts/install-rocm-sdk.sh: multiarch lib
    dirs, no .info/version, binaries that need a newer glibc), told by its SDK_FACTS file; "":
    AMD's layout (/opt/rocm, a pip ROCm) or Debian's own /usr."""
    device_lib_path: str = ""
    """The device-library bitcode directory SDK_FACTS names (layout "debian"); "" otherwise."""


@dataclass(frozen=True)
class TorchInfo:
    """The torch installed in this Python, read from its files (not imported)."""

    version: str  # "" when torch is not installed
    hip: str | None  # torch.version.hip, e.g. "6.2.41133-dd7f95766"
    cuda: str | None
    location: str = ""  # the torch package directory
    rocm: str | None = None
    """torch.version.rocm ("10.1.0"; torch >= 2.10 has the field), None when absent."""
    build_only_sdk: str = ""
    """A build-only ROCm torch (scripts/install-build-only-torch.sh: the CPU wheel with torch's
    own hipify of its CUDA headers and link stubs for its HIP libraries, BUILD_ONLY_MARKER in
    the package): the SDK root it was made against, whose hipcc it brings (its ROCM_HOME for
    cpp_extension). "": a torch as its wheel made it. Nothing built against it can load."""

    @property
    def kind(self) -> str:
        if not self.version:
            return "none"
        local = self.version.partition("+")[2]
        if self.hip or self.rocm or local.startswith("rocm"):
            return "rocm"
        return "cuda" if self.cuda or local.startswith("cu") else "cpu"

    @property
    def hip_short(self) -> str | None:
        """ "6.2.41133-dd7f95766" -> "6.2"."""
        if not self.hip:
            return None
        return major_minor(self.hip) or None

    @property
    def rocm_short(self) -> str | None:
        """The ROCm major.minor torch was built for: torch.version.rocm when present, else its
        HIP version (HIP and ROCm versions are equal before ROCm 10, and every torch built for
        ROCm 10 has torch.version.rocm)."""
        return major_minor(self.rocm or "") or self.hip_short

    @property
    def rocm_from(self) -> str:
        """Which of torch's facts ``rocm_short`` comes from, for messages."""
        if major_minor(self.rocm or ""):
            return f"torch.version.rocm {self.rocm}"
        return f"torch.version.hip {self.hip} (no torch.version.rocm: HIP = ROCm before ROCm 10)"


BUILD_ONLY_MARKER = "_rocmbuild_build_only.json"
"""In a build-only ROCm torch's package directory: what scripts/build_only_torch.py made."""
BUILD_ONLY_MAX_BYTES = 1 << 20


def build_only_sdk(torch_dir: Path) -> str:
    """The SDK root of the build-only torch in ``torch_dir`` ("" when it is not one). The marker
    is untrusted: a link, a non-regular or over-large file, bad JSON or a missing ``sdk`` is a
    one-line ToolchainError naming it."""
    marker = torch_dir / BUILD_ONLY_MARKER
    if not os.path.lexists(marker):
        return ""
    hint = "run scripts/install-build-only-torch.sh again (it reinstalls torch from its wheel)"
    try:
        data = untrusted.read_json(marker, BUILD_ONLY_MAX_BYTES)
        sdk = untrusted.text(untrusted.obj(data, "(top level)").get("sdk"), "sdk")
    except (OSError, ValueError) as exc:
        raise ToolchainError(f"{marker}: {getattr(exc, 'strerror', None) or exc}",
                             hint=hint) from None
    if not sdk:
        raise ToolchainError(f"{marker}: sdk: empty", hint=hint)
    return sdk


_HINT = "reinstall ROCm there, or point --rocm-path / ROCM_PATH at another ROCm root"
_PIP_HINT = ('reinstall it (pip install --force-reinstall "rocm[libraries,devel]" from the index '
             "it came from), or set ROCM_PATH to use another ROCm root")
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}")


def _fail(path: Path, what: str, hint: str) -> ToolchainError:
    return ToolchainError(f"ROCm root: {path}: {what}", hint=hint)


def read_fact(path: Path, boundary: Path, hint: str = _HINT) -> str | None:
    """The text of the small fact file ``path``; None when there is none. Untrusted: a link
    leading out of ``boundary``, anything but a regular file, more than FACT_MAX_BYTES or bytes
    that are not UTF-8 are a one-line ToolchainError naming the file."""
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    if not Path(real).is_relative_to(os.path.realpath(boundary)):
        raise _fail(path, f"a link leading out of {boundary} (to {real})", hint)
    try:
        data = fsutil.read_capped(Path(real), FACT_MAX_BYTES)
    except fsutil.NotRegular as exc:
        raise _fail(path, exc.strerror or "not a regular file", hint) from None
    except OSError as exc:
        raise _fail(path, f"cannot read: {exc.strerror or exc}", hint) from exc
    except fsutil.TooLarge:
        raise _fail(path, f"over {FACT_MAX_BYTES} bytes, not a version file", hint) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 text", hint) from None


def _first_version(text: str, path: Path, hint: str) -> str:
    """ "6.2.0-66" / "7.15.0a20260630" -> "6.2.0", "10.1" -> "10.1.0"."""
    line = (text.strip().splitlines() or [""])[0].strip()
    m = _VERSION.match(line)
    if not m:
        raise _fail(path, f"{line[:40]!r} is not a version like 6.2.0", hint)
    return ".".join(m.groups(default="0"))


def _header_version(text: str, path: Path, prefix: str, hint: str) -> str:
    """MAJOR.MINOR.PATCH from ``#define <prefix>_MAJOR 6`` ... (hip_version.h, rocm_version.h)."""
    parts = [re.search(rf"^\s*#\s*define\s+{prefix}_{k}\s+(\d+)\b", text, re.M)
             for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise _fail(path, f"no {prefix}_MAJOR, _MINOR and _PATCH defines", hint)
    return ".".join(p.group(1) for p in parts if p)


def root_versions(root: Path, boundary: Path | None = None,
                  more: tuple[tuple[Path, str], ...] = (), hint: str = _HINT,
                  known: tuple[str, str] = ("", "")) -> tuple[str, str, str]:
    """(ROCm version, the file it came from, HIP version) of ``root``. The ROCm version from
    rocm-core's ``.info/version``, then ``include/rocm-core/rocm_version.h``, then ``more``
    ((file, shown name): a pip ROCm's core tree), then ``known`` ((version, shown name): a pip
    ROCm's dist-info Version); only without any of them the HIP version of
    ``include/hip/hip_version.h`` stands in (right before ROCm 10, where they are equal). Files
    may not lead out of ``boundary`` (default: the root)."""
    b = boundary or root
    hip_h = root / "include/hip/hip_version.h"
    text = read_fact(hip_h, b, hint)
    hip = "" if text is None else _header_version(text, hip_h, "HIP_VERSION", hint)
    for path, shown in ((root / ".info/version", ".info/version"), *more):
        text = read_fact(path, b, hint)
        if text is not None:
            return _first_version(text, path, hint), shown, hip
    core_h = root / "include/rocm-core/rocm_version.h"
    text = read_fact(core_h, b, hint)
    if text is not None:
        return (_header_version(text, core_h, "ROCM_VERSION", hint),
                "include/rocm-core/rocm_version.h", hip)
    if known[0]:
        return known[0], known[1], hip
    if hip:
        return hip, "include/hip/hip_version.h (the HIP version: no ROCm version file)", hip
    return "", "", ""


def sdk_facts(root: Path) -> tuple[str, str]:
    """(layout, device-library dir) from ``root``'s SDK_FACTS; ("", "") when it has none. The
    file is untrusted: a regular file of at most FACT_MAX_BYTES, a JSON object whose ``layout``
    is "debian" and whose ``device_lib_path`` is a directory inside the root; anything else is a
    one-line ToolchainError naming the file and key."""
    return _facts(root)[:2]


def sdk_runtime_lib(root: Path) -> Path | None:
    """The directory of the real runtime libraries SDK_FACTS names (``runtime_lib``: beside the
    root, in the prefix install-rocm-sdk.sh unpacked; its link directory holds stubs), for
    bundling; None when the root has no facts file or names none."""
    return _facts(root)[2]


def _facts(root: Path) -> tuple[str, str, Path | None]:
    path = root / SDK_FACTS
    hint = "run scripts/install-rocm-sdk.sh again (it rewrites the file)"
    if not os.path.lexists(path):
        return "", "", None
    try:
        data = untrusted.obj(untrusted.read_json(path, FACT_MAX_BYTES), "the file")
        layout = untrusted.text(data.get("layout"), "layout", 32)
        dlp = untrusted.text(data.get("device_lib_path"), "device_lib_path")
        rt = untrusted.text(data.get("runtime_lib", ""), "runtime_lib")
    except untrusted.BadJson as exc:
        raise _fail(path, str(exc), hint) from None
    except OSError as exc:
        raise _fail(path, f"cannot read: {exc.strerror or exc}", hint) from exc
    if layout != "debian":
        raise _fail(path, f"layout: {layout[:40]!r} is not \"debian\"", hint)
    real = os.path.realpath(dlp)
    if not Path(real).is_relative_to(os.path.realpath(root)) or not Path(real).is_dir():
        raise _fail(path, f"device_lib_path: {dlp[:200]!r} is not a directory inside {root}",
                    hint)
    prefix = os.path.realpath(root.parent)
    rt_real = os.path.realpath(rt) if rt else ""
    if rt and (not Path(rt_real).is_relative_to(prefix) or not Path(rt_real).is_dir()):
        raise _fail(path, f"runtime_lib: {rt[:200]!r} is not a directory inside {prefix}", hint)
    return layout, real, Path(rt_real) if rt else None


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


def _targets(path: Path, boundary: Path) -> tuple[str, ...] | None:
    """``dist_amdgpu_targets`` of TheRock's share/therock/dist_info.json (";"-separated gfx
    targets); None when there is no such file."""
    text = read_fact(path, boundary, _PIP_HINT)
    if text is None:
        return None
    try:
        data = untrusted.loads(text)
    except untrusted.BadJson as exc:
        raise _fail(path, f"not JSON we accept ({exc})", _PIP_HINT) from None
    value = data.get("dist_amdgpu_targets") if isinstance(data, dict) else None
    if not isinstance(value, str):
        raise _fail(path, "dist_amdgpu_targets: expected a string like \"gfx942;gfx950\"",
                    _PIP_HINT)
    out = tuple(t.strip() for t in value.split(";") if t.strip())
    bad = next((t for t in out if not _TARGET.fullmatch(t)), None)
    if bad is not None or len(out) > 256:
        raise _fail(path, f"dist_amdgpu_targets: {(bad or value)[:40]!r} is not a gfx target",
                    _PIP_HINT)
    return out


def pip_rocm(paths: list[str] | None = None, with_components: bool = True) -> RocmRoot | None:
    """ROCm installed from pip (TheRock's ``rocm`` distribution: package ``rocm_sdk``, runtime
    ``_rocm_sdk_core/``, devel tree ``_rocm_sdk_devel/``) in the site dirs ``paths`` (default
    sys.path), read from files only. Its root is the devel tree, which ``rocm-sdk init`` (or
    ``rocm-sdk path --root``) unpacks on first use; without it the root is returned with
    ``unusable`` saying so. None when no pip ROCm is installed."""
    found = find_dists(["rocm", "rocm-sdk-devel"], paths)
    meta = found.get("rocm")
    if meta is None:
        return None
    site = meta[0].parent
    core = site / "_rocm_sdk_core"
    if not (site / "rocm_sdk").is_dir() or not core.is_dir():
        return None  # another distribution called "rocm", or a broken install
    devel = site / "_rocm_sdk_devel"
    unpacked = (devel / "__init__.py").is_file() and not any(
        (site / "rocm_sdk_devel" / t).exists() for t in ("_devel.tar", "_devel.tar.xz"))
    unusable = ""
    if "rocm-sdk-devel" not in found:
        unusable = (f"the pip ROCm in {site} has no devel tree (headers, CMake configs, hipcc): "
                    'pip install "rocm[libraries,devel]" from the index it came from')
    elif not unpacked:
        unusable = (f"the pip ROCm's devel tree {devel} is not unpacked yet: run `rocm-sdk init` "
                    "with this Python")
    known = ("", "")
    if meta[1]:
        known = (_first_version(meta[1], meta[0] / "METADATA", _PIP_HINT),
                 f"{meta[0].name} Version {meta[1]}")
    version, version_from, hip = root_versions(
        devel, site, ((core / ".info/version", "_rocm_sdk_core/.info/version"),), _PIP_HINT,
        known)
    return RocmRoot(devel, version, "rocm", unpacked and (devel / "bin/hipcc").exists(),
                    PIP_WHERE, components.find(devel) if with_components else None,
                    version_from, hip, _targets(core / "share/therock/dist_info.json", site),
                    unusable)


def find_rocm_root(explicit: str | None = None, fs_root: Path = Path("/"),
                   with_components: bool = True, site_paths: list[str] | None = None
                   ) -> RocmRoot | None:
    """The ROCm root: ``explicit`` (--rocm-path), ROCM_PATH, HIP_PATH; then a pip ROCm with its
    devel tree installed (in ``site_paths``, default sys.path: who pip-installed ROCm into the
    Python that builds means it); then /opt/rocm; then a pip ROCm without a devel tree (found,
    but ``unusable``); then Debian's /usr layout (HIP headers only, kind "debian", never an
    SDK). ``with_components=False`` leaves its components not looked for (None): a listing of
    its lib dirs, milliseconds that a plan needing none of them does not spend."""

    def found(path: Path) -> tuple[str, ...] | None:
        return components.find(path) if with_components else None

    def sdk(path: Path, where: str) -> RocmRoot:
        version, version_from, hip = root_versions(path)
        layout, dlp = sdk_facts(path)
        return RocmRoot(path, version, "rocm", (path / "bin/hipcc").exists(), where,
                        found(path), version_from, hip, layout=layout, device_lib_path=dlp)

    cands = [(Path(explicit), "--rocm-path")] if explicit else []
    *named, opt = rocm_candidates(fs_root)
    for path, where in cands + named:
        if path.is_dir() and (where == "--rocm-path" or _looks_like_rocm(path)):
            return sdk(path, where)
    pip = pip_rocm(site_paths, with_components)
    if pip is not None and "has no devel tree" not in pip.unusable:
        return pip
    if opt[0].is_dir() and _looks_like_rocm(opt[0]):
        return sdk(*opt)
    if pip is not None:
        return pip
    usr = fs_root / "usr"
    if (usr / "include/hip/hip_version.h").is_file() or (usr / "include/hip/hip_runtime.h"
                                                          ).is_file():
        version, version_from, hip = root_versions(usr)
        return RocmRoot(usr, version, "debian", (usr / "bin/hipcc").exists(),
                        "Debian /usr", found(usr), version_from, hip)
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
    version_py = found[0].parent / "torch" / "version.py"
    fields: dict[str, str | None] = dict.fromkeys(("hip", "cuda", "rocm"))
    if version_py.is_file():
        text = version_py.read_text(errors="replace")
        for key in fields:
            m = re.search(rf"^{key}\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
            fields[key] = m.group(1) if m else None
    return TorchInfo(found[1], fields["hip"], fields["cuda"], str(version_py.parent),
                     fields["rocm"], build_only_sdk(version_py.parent))


def dist_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (importlib.metadata.version's answer)."""
    found = find_dists([name]).get(name)
    return None if found is None else found[1]
