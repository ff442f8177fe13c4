"""The host's AMD GPUs from KFD sysfs.

Reads ``<sysfs_root>/class/kfd/kfd/topology/nodes/*/properties`` and turns each node's
``gfx_target_version`` (major*10000 + minor*100 + stepping, e.g. 90402) into a gfx name (gfx942).
CPU nodes report 0. ``sysfs_root`` defaults to ``/sys`` and can be moved with ROCMBUILD_SYSFS_ROOT,
which is how the tests feed fixture trees.
"""

from __future__ import annotations

from pathlib import Path

from rocmbuild.core import options
from rocmbuild.core.errors import ToolchainError, UsageError


def sysfs_root() -> Path:
    raw = options.env("ROCMBUILD_SYSFS_ROOT")
    if raw and not Path(raw).is_dir():
        raise UsageError(f"ROCMBUILD_SYSFS_ROOT={raw!r}: not a directory",
                         hint="point it at a sysfs tree (a fixture), or unset it to read /sys")
    return Path(raw or "/sys")


def gfx_from_target_version(value: int) -> str:
    """90402 -> gfx942, 90010 -> gfx90a, 110000 -> gfx1100."""
    major, rest = divmod(value, 10000)
    minor, stepping = divmod(rest, 100)
    return f"gfx{major}{minor:x}{stepping:x}"


def kfd_nodes(root: Path | None = None) -> list[dict[str, str]]:
    """Properties of each KFD topology node that is a GPU (gfx_target_version != 0)."""
    nodes_dir = (root or sysfs_root()) / "class/kfd/kfd/topology/nodes"
    found: list[dict[str, str]] = []
    if not nodes_dir.is_dir():
        return found
    for node in sorted(nodes_dir.iterdir(), key=lambda p: (len(p.name), p.name)):
        props_file = node / "properties"
        if not props_file.is_file():
            continue
        props: dict[str, str] = {}
        for line in props_file.read_text(errors="replace").splitlines():
            key, _, value = line.partition(" ")
            if key:
                props[key] = value.strip()
        try:
            version = int(props.get("gfx_target_version", "0"))
        except ValueError:
            continue
        if version:
            props["gfx"] = gfx_from_target_version(version)
            props["node"] = node.name
            found.append(props)
    return found


def native_archs(root: Path | None = None) -> list[str]:
    archs: list[str] = []
    for props in kfd_nodes(root):
        if props["gfx"] not in archs:
            archs.append(props["gfx"])
    if not archs:
        where = (root or sysfs_root()) / "class/kfd/kfd/topology/nodes"
        raise ToolchainError(
            f"--arch native: no AMD GPU found under {where}",
            hint="name the targets instead, e.g. --arch gfx942 (MI300) or --arch gfx90a (MI200); "
            "inside a container, pass --device /dev/kfd --device /dev/dri",
        )
    return archs


def nodes_dir(root: Path | None = None) -> Path:
    """Where the KFD topology nodes are looked for (for messages)."""
    return (root or sysfs_root()) / "class/kfd/kfd/topology/nodes"
