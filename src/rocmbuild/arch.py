"""GPU architectures: the known gfx table, ``--arch`` parsing, and ``native`` from KFD sysfs.

``native`` reads ``<sysfs_root>/class/kfd/kfd/topology/nodes/*/properties`` and turns each node's
``gfx_target_version`` (major*10000 + minor*100 + stepping, e.g. 90402) into a gfx name (gfx942).
CPU nodes report 0. ``sysfs_root`` defaults to ``/sys`` and can be moved with ROCMBUILD_SYSFS_ROOT,
which is how the tests feed fixture trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocmbuild import options
from rocmbuild.errors import ToolchainError, UsageError

# gfx name -> product names. Not exhaustive; unknown names are rejected with a suggestion.
KNOWN_ARCHS: dict[str, str] = {
    "gfx906": "MI50 / MI60 / Radeon VII",
    "gfx908": "MI100",
    "gfx90a": "MI210 / MI250 / MI250X",
    "gfx940": "MI300A (early)",
    "gfx941": "MI300X (early)",
    "gfx942": "MI300A / MI300X / MI325X",
    "gfx950": "MI350X / MI355X",
    "gfx1030": "Radeon PRO W6800 / RX 6900",
    "gfx1100": "Radeon PRO W7900 / RX 7900 XTX",
    "gfx1101": "Radeon PRO W7800 / RX 7800",
    "gfx1102": "RX 7600",
    "gfx1151": "Ryzen AI Max (Strix Halo)",
    "gfx1200": "RX 9060",
    "gfx1201": "RX 9070 / Radeon AI PRO R9700",
}


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


def _native(known: Sequence[str] | None, origin: str) -> list[str]:
    """The host's GPUs for ``--arch native``: ``known`` (a Host's), or KFD here when None."""
    if known is None:
        return native_archs()
    if not known:
        where = (f"the host in {origin}" if origin not in ("", "detected") else
                 f"{sysfs_root() / 'class/kfd/kfd/topology/nodes'}")
        raise ToolchainError(
            f"--arch native: no AMD GPU found under {where}",
            hint="name the targets instead, e.g. --arch gfx942 (MI300) or --arch gfx90a (MI200); "
            "inside a container, pass --device /dev/kfd --device /dev/dri",
        )
    return list(known)


FEATURES = ("xnack", "sramecc")
"""Target features a gfx name may carry, each once, as ``:feature+`` or ``:feature-``."""


def check_target(target: str, flag: str = "--arch") -> str:
    """Check one ``gfx...[:feature+|-]...`` target; returns its base gfx name."""
    base, *feats = target.split(":")
    if base not in KNOWN_ARCHS:
        import difflib  # only for the "did you mean" of a bad name

        close = difflib.get_close_matches(base, KNOWN_ARCHS, n=1)
        raise UsageError(
            f"{flag}: unknown GPU architecture {target!r}"
            + (f" (did you mean {close[0]}?)" if close else ""),
            hint="known: " + ", ".join(KNOWN_ARCHS),
        )
    seen: set[str] = set()
    for feat in feats:
        name, sign = feat[:-1], feat[-1:]
        if name not in FEATURES or sign not in ("+", "-"):
            raise UsageError(
                f"{flag}: unknown target feature {feat!r} in {target!r}",
                hint="only :xnack+ / :xnack- and :sramecc+ / :sramecc- exist, "
                "e.g. gfx90a:xnack+ or gfx942:sramecc+:xnack-")
        if name in seen:
            raise UsageError(f"{flag}: feature {name} given twice in {target!r}",
                             hint=f"give {name} once, + or -")
        seen.add(name)
    return base


def names(targets: Sequence[str]) -> tuple[str, ...]:
    """Plain gfx names of target IDs, in order, repeats dropped:
    ``gfx942:sramecc+:xnack-, gfx90a`` -> ``gfx942, gfx90a``."""
    return tuple(dict.fromkeys(t.split(":")[0] for t in targets))


def check_spec(spec: str, flag: str) -> None:
    """Syntax check of an ``--arch`` value without resolving ``native`` (options uses it for
    values from the environment or pyproject.toml, so errors name the variable or key)."""
    items = [a.strip().lower() for a in spec.replace(";", ",").split(",") if a.strip()]
    if not items:
        raise UsageError(f"{flag}: empty list", hint="e.g. gfx942 or gfx90a,gfx942")
    for item in items:
        if item != "native":
            check_target(item, flag)


def parse_archs(spec: str, supported: tuple[str, ...] = (), where: str = "", *,
                native: Sequence[str] | None = None, host_origin: str = "",
                flag: str = "--arch") -> tuple[str, ...]:
    """Parse a comma- or semicolon-separated ``--arch`` value, check it, keep order, drop repeats.

    ``supported`` is the recipe's allow-list (empty: anything known); ``where`` names it in errors.
    ``native`` is the GPUs of the host being planned for (a Host's ``gpus``); None reads KFD here.
    ``flag`` names where the value came from in errors (``--arch``, ``ROCMBUILD_ARCH``, ...).
    """
    items = [a.strip() for a in spec.replace(";", ",").split(",") if a.strip()]
    if not items:
        raise UsageError(f"{flag}: empty list", hint="e.g. --arch gfx942 or --arch gfx90a,gfx942")
    out: list[str] = []
    for item in items:
        for arch in _native(native, host_origin) if item == "native" else [item.lower()]:
            base = check_target(arch, flag)
            if supported and base not in supported:
                raise UsageError(
                    f"{flag}: {arch} is not supported by {where or 'this recipe'} "
                    f"(supported: {', '.join(supported)})",
                    hint="pick one of the supported archs, or extend arch.supported in the recipe "
                    "if upstream supports it",
                )
            if arch not in out:
                out.append(arch)
    return tuple(out)
