"""GPU architectures: the known gfx table and ``--arch`` parsing (pure: ``native`` is resolved
from the GPUs of the host being planned for, which ``host.gpus`` reads from KFD sysfs)."""

from __future__ import annotations

from collections.abc import Sequence

from rocmbuild.core.errors import ToolchainError, UsageError

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
                native: Sequence[str] = (), native_where: str = "",
                flag: str = "--arch") -> tuple[str, ...]:
    """Parse a comma- or semicolon-separated ``--arch`` value, check it, keep order, drop repeats.

    ``supported`` is the recipe's allow-list (empty: anything known); ``where`` names it in errors.
    ``native`` is the GPUs of the host being planned for (a Host's ``gpus``); ``native_where``
    names where they were looked for, in the error when there are none.
    ``flag`` names where the value came from in errors (``--arch``, ``ROCMBUILD_ARCH``, ...).
    """
    items = [a.strip() for a in spec.replace(";", ",").split(",") if a.strip()]
    if not items:
        raise UsageError(f"{flag}: empty list", hint="e.g. --arch gfx942 or --arch gfx90a,gfx942")
    out: list[str] = []
    for item in items:
        if item == "native" and not native:
            raise ToolchainError(
                f"--arch native: no AMD GPU found under {native_where or 'this host'}",
                hint="name the targets instead, e.g. --arch gfx942 (MI300) or --arch gfx90a "
                "(MI200); inside a container, pass --device /dev/kfd --device /dev/dri",
            )
        for arch in native if item == "native" else [item.lower()]:
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
