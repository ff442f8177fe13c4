"""One wheel model: what rocmbuild reads from a ``.whl`` file.

``read_wheel(path)`` parses the PEP 427 file name with ``packaging``, reads ``METADATA`` (with the
stdlib email parser), the optional ``rocmbuild.json`` provenance and the list of members, and
hashes the bytes. Publish, validate and the tag stage all use it; a malformed wheel raises
``WheelFormatError``, which each caller turns into its own error (PublishError, ValidationError).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from email.policy import compat32
from pathlib import Path
from typing import Any

from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from rocmbuild.core import untrusted
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import RocmbuildError

PROVENANCE = "rocmbuild.json"  # *.dist-info/rocmbuild.json, written by the tag stage
PROVENANCE_MAX = 16 << 20  # bytes: a larger rocmbuild.json is refused unread

SHARED_LIB = re.compile(r"\.so(\.\d+)*$")


class WheelFormatError(RocmbuildError):
    """The file is not a well-formed wheel (name, zip, METADATA or rocmbuild.json)."""

    kind = "wheel error"


@dataclass(frozen=True)
class WheelName:
    """A wheel file name cut into its PEP 427 parts: each spelled as in the name, and as
    ``packaging`` reads them (the normalized name, the version, the build tag, the tag set)."""

    distribution: str  # e.g. flash_attn (the escaped name, as in the *.dist-info directory)
    raw_version: str  # as spelled in the name
    version: Version
    rest: str  # "[build-]python-abi-platform", e.g. cp311-cp311-linux_x86_64
    name: NormalizedName  # PEP 503 normalized, e.g. flash-attn
    build: BuildTag  # () when the name has no build tag
    tags: frozenset[Tag]

    @property
    def namever(self) -> str:
        """The stem of the ``*.dist-info`` and ``*.data`` directories."""
        return f"{self.distribution}-{self.raw_version}"

    def with_version(self, version: str) -> str:
        """The same file name with another version."""
        return f"{self.distribution}-{version}-{self.rest}.whl"


_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
"""PEP 600's aliases of the older manylinux tags: the glibc each promises."""


def manylinux_glibc(platform: str) -> tuple[int, int] | None:
    """The glibc (major, minor) a manylinux platform tag promises to be enough
    (``manylinux_2_28_x86_64`` -> (2, 28), ``manylinux2014_x86_64`` -> (2, 17)); None for any
    other tag (``linux_x86_64`` promises nothing)."""
    m = _MANYLINUX.fullmatch(platform)
    if m:
        return int(m[1]), int(m[2])
    return _LEGACY_MANYLINUX.get(platform.split("_", 1)[0]) if platform.startswith(
        tuple(f"{k}_" for k in _LEGACY_MANYLINUX)) else None


def raise_glibc(platforms: str, need: tuple[int, int]) -> str:
    """A wheel's platform tag set (``.``-joined, as in its name) with every manylinux tag that
    promises less than glibc ``need`` dropped, and ``manylinux_<need>_<arch>`` in their place when
    none is left; other tags stay. Unchanged when nothing promises too little."""
    tags = platforms.split(".")
    keep = [t for t in tags if (g := manylinux_glibc(t)) is None or g >= need]
    if len(keep) == len(tags):
        return platforms
    if not any(manylinux_glibc(t) for t in keep):
        arch = next(m[3] if (m := _MANYLINUX.fullmatch(t)) else t.split("_", 1)[1]
                    for t in tags if manylinux_glibc(t) is not None)
        keep.append(f"manylinux_{need[0]}_{need[1]}_{arch}")
    return ".".join(keep)


def parse_wheel_name(filename: str, where: object = None) -> WheelName:
    """Split and check a wheel file name: the one parser of wheel names. Raises WheelFormatError
    naming ``where`` (default: the name itself)."""
    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except ValueError as exc:  # InvalidWheelFilename, and a bad version or build tag in it
        raise WheelFormatError(
            f"{filename if where is None else where}: not a wheel filename ({exc})",
            hint="wheel names look like name-1.0-py3-none-any.whl (PEP 427)",
        ) from exc
    distribution, raw_version, rest = filename[: -len(".whl")].split("-", 2)
    return WheelName(distribution, raw_version, version, rest, name, build, tags)


@dataclass(frozen=True)
class WheelInfo:
    """One wheel file, as publish and validate need it."""

    path: Path
    filename: str
    name: NormalizedName  # PEP 503 normalized, e.g. flash-attn
    display_name: str  # METADATA Name, e.g. flash_attn
    version: Version
    build: BuildTag  # () when the name has no build tag
    tags: frozenset[Tag]
    sha256: str
    size: int
    requires_python: str | None
    requires_dist: tuple[str, ...]
    summary: str | None
    metadata: bytes  # the METADATA file as stored, served as <wheel>.metadata (PEP 658 / 714)
    provenance: dict[str, Any] | None  # *.dist-info/rocmbuild.json; None when absent
    top_level: tuple[str, ...]  # importable top-level modules
    native: bool  # holds a shared library (bound to the torch C++ ABI it was built against)


def read_wheel(path: Path) -> WheelInfo:
    """Parse the name, read METADATA and rocmbuild.json, hash the bytes. Raises WheelFormatError.

    The wheel must have exactly one top-level ``*.dist-info/METADATA`` whose Name and Version
    match the file name.
    """
    path = Path(path)
    if not path.is_file():
        raise WheelFormatError(f"{path}: no such wheel file", hint="give the path of a built .whl")
    parsed = parse_wheel_name(path.name, path)
    name, version, build, tags = parsed.name, parsed.version, parsed.build, parsed.tags
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            metas = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(metas) != 1:
                raise WheelFormatError(
                    f"{path}: expected one *.dist-info/METADATA, found {len(metas)}",
                    hint="rebuild the wheel; it is not a valid PEP 427 wheel",
                )
            dist_info = metas[0].split("/")[0]
            metadata = zf.read(metas[0])
            top_txt = f"{dist_info}/top_level.txt"
            top = zf.read(top_txt).decode().split() if top_txt in names else _top_level(names)
            prov_name = f"{dist_info}/{PROVENANCE}"
            provenance = None
            if prov_name in names:
                if zf.getinfo(prov_name).file_size > PROVENANCE_MAX:
                    raise WheelFormatError(f"{path}: {prov_name} is larger than "
                                           f"{PROVENANCE_MAX} bytes",
                                           hint="rebuild the wheel with rocmbuild")
                provenance = _provenance(path, prov_name, zf.read(prov_name))
    except zipfile.BadZipFile as exc:
        raise WheelFormatError(f"{path}: not a zip file ({exc})", hint="rebuild the wheel") from exc
    headers = HeaderParser(policy=compat32).parsestr(metadata.decode("utf-8", "replace"))
    meta_name = headers.get("Name")
    if not meta_name or canonicalize_name(meta_name) != name:
        raise WheelFormatError(
            f"{path}: METADATA Name {meta_name!r} does not match the filename's {name!r}",
            hint="rebuild the wheel",
        )
    try:
        meta_version: Version | None = Version(headers.get("Version", ""))
    except InvalidVersion:
        meta_version = None
    if meta_version != version:
        raise WheelFormatError(
            f"{path}: METADATA Version {headers.get('Version')!r} does not match the filename's "
            f"{version}",
            hint="rebuild the wheel",
        )
    return WheelInfo(
        path=path,
        filename=path.name,
        name=name,
        display_name=meta_name.strip(),
        version=version,
        build=build,
        tags=tags,
        sha256=sha256_file(path),
        size=path.stat().st_size,
        requires_python=headers.get("Requires-Python"),
        requires_dist=tuple(r.strip() for r in headers.get_all("Requires-Dist") or []),
        summary=headers.get("Summary"),
        metadata=metadata,
        provenance=provenance,
        top_level=tuple(sorted(set(top))),
        native=any(SHARED_LIB.search(n) for n in names),
    )


def _provenance(path: Path, member: str, data: bytes) -> dict[str, Any]:
    try:
        value = untrusted.loads(data)
    except untrusted.BadJson as exc:
        raise WheelFormatError(
            f"{path}: {member}: {exc}", hint="rebuild the wheel with rocmbuild"
        ) from None
    if not isinstance(value, dict):
        raise WheelFormatError(
            f"{path}: {member} is not a JSON object", hint="rebuild the wheel with rocmbuild"
        )
    return value


def _top_level(names: list[str]) -> list[str]:
    """Top-level modules from the member list, for wheels without top_level.txt."""
    top = set()
    for n in names:
        first = n.split("/")[0]
        if first.endswith((".dist-info", ".data", ".pth")):
            continue
        if "/" in n:
            top.add(first)
        elif n.endswith(".py"):
            top.add(n[:-3])
        elif ".so" in n:
            top.add(n.split(".")[0])
    return sorted(top)


def unpublishable(info: WheelInfo) -> list[str]:
    """Why ``info`` must never reach an index or a user: its provenance's ``unpublishable``
    reasons (the tag stage writes them: a build-only ROCm torch, a partial build) and the marks
    its local label carries (``label.UNPUBLISHABLE_MARKS``; a wheel whose provenance was
    stripped keeps them in its name). Empty: nothing known against it."""
    from rocmbuild.artifacts.label import marks_of

    why: list[str] = []
    given = (info.provenance or {}).get("unpublishable")
    if given is not None:
        items = given if isinstance(given, list) else [given]
        why += [i if isinstance(i, str) and i else "rocmbuild.json: unpublishable (unreadable)"
                for i in items]
    marks = marks_of(info.version.local or "")
    if marks and not why:
        why.append(f"its label says {' and '.join(marks)}")
    return why


def built_build_only(info: WheelInfo) -> bool:
    """Compiled against a build-only ROCm torch (provenance ``torch.build_only`` or the label's
    ``buildonly`` mark): it links against stub HIP libraries and can never be imported."""
    from rocmbuild.artifacts.label import BUILD_ONLY, marks_of

    torch = (info.provenance or {}).get("torch")
    return ((isinstance(torch, dict) and torch.get("build_only") is True)
            or BUILD_ONLY in marks_of(info.version.local or ""))
