"""What a plan requires of a host: ``missing(plan, host)`` says what the host lacks, ``hint`` how
to get it, and ``preflight`` raises before anything is fetched. ``build``, ``plan``, ``doctor``
and the nightly all judge with these three."""

from __future__ import annotations

import os
import sys

from rocmbuild.core import components
from rocmbuild.core.errors import ToolchainError
from rocmbuild.core.pep508 import major_minor
from rocmbuild.host.detect import Host
from rocmbuild.host.toolchain import RocmRoot, TorchInfo
from rocmbuild.plan.model import Plan


def within(version: str, spec: str) -> bool:
    """``version`` (a torch's local label ignored) inside the range ``spec`` (the recipe checker
    has refused a bad one)."""
    from rocmbuild.core.pep508 import simple_contains  # the requirement checks only

    plain = simple_contains(version, spec)  # plain versions and ranges: packaging not imported
    if plain is not None:
        return plain
    from packaging.specifiers import SpecifierSet  # packaging.tags, logging: only when asked
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(spec).contains(Version(version).public, prereleases=True)
    except InvalidVersion:
        return False


def _why(plan: Plan) -> str:
    return f" (the recipe's bounds: {plan.host_requires_reason})" if plan.host_requires_reason \
        else ""


def missing_components(plan: Plan, host: Host) -> list[str] | None:
    """The plan's ROCm components absent under the host's ROCm root (None: not recorded in a
    saved host, so they cannot be judged; [] when there is no root, or an unusable one: the SDK
    check says so)."""
    root = host.rocm_root
    if root is None or root.unusable or not plan.rocm_components:
        return []  # nothing needed, or the SDK check says what is wrong with the root
    if root.components is None:
        return None
    return [c for c in plan.rocm_components if c not in root.components]


def torch_sdk_mismatch(plan: Plan, host: Host) -> str | None:
    """Why the ROCm torch and the ROCm SDK do not go together, when the plan needs both.

    A torch extension is compiled by the SDK's hipcc against the SDK's headers, and it is
    loaded next to the ROCm runtime torch was built with: a different major (libamdhip64.so.6 vs
    .so.7) puts two runtimes in one process, and a different minor gives headers newer or older
    than the runtime that serves them (and setup.py-based builds such as flash-attn pick their
    compiler flags from torch's version facts, not from the compiler that receives them). So the
    ROCm major.minor torch was built for must equal the SDK's ROCm major.minor: torch's from
    ``torch.version.rocm`` when it has one, else from ``torch.version.hip`` (equal to the ROCm
    version before ROCm 10; from ROCm 10 they differ, ROCm 10.1 ships HIP 7.16, and every torch
    for ROCm 10 has ``torch.version.rocm``); the SDK's from its rocm-core version files
    (``toolchain.root_versions``). HIP is never compared with ROCm where both are known."""
    from rocmbuild.core.pep508 import split_requirement

    names = {split_requirement(r)[0] for r in plan.host_requires}
    torch, root = host.torch, host.rocm_root
    if not {"rocm-torch", "rocm-sdk"} <= names or root is None or root.kind != "rocm":
        return None
    sdk, built = major_minor(root.version), torch.rocm_short
    if not built or not sdk or built == sdk:
        return None
    return (f"a ROCm torch built for the SDK's ROCm {sdk} (compared torch {torch.version}'s "
            f"ROCm {built}, from {torch.rocm_from}, with ROCm {root.version} of the ROCm root "
            f"{root.path}, from its {root.version_from or 'version'}: an extension compiled "
            "against one and loaded with the other gets mismatched headers, runtime and "
            "compiler flags)")


def hipcc_for(root: RocmRoot, torch: TorchInfo) -> bool:
    """Whether extensions get a hipcc for ``root``: its own bin/hipcc, or the one a build-only
    ROCm torch made against exactly this SDK tree brings (its ROCM_HOME for cpp_extension;
    scripts/install-build-only-torch.sh)."""
    return root.has_hipcc or (bool(torch.build_only_sdk)
                              and os.path.realpath(torch.build_only_sdk)
                              == os.path.realpath(root.path))


def missing(plan: Plan, host: Host) -> list[str]:
    """What the host lacks for this plan, each as a short phrase (the requirement checks, and
    pep508 with them, are not needed to detect a host: a hit served by a memo skips them)."""
    from rocmbuild.core.pep508 import split_requirement

    out: list[str] = []
    torch, root = host.torch, host.rocm_root
    names = [split_requirement(r)[0] for r in plan.host_requires]
    if root is not None and root.unusable and (
            plan.rocm_components or {"rocm-sdk", "hip-compiler"} & set(names)):
        out.append(f"a ROCm SDK with hipcc (found {root.where} ROCm {root.version or '?'}, but "
                   f"{root.unusable})")  # a pip ROCm the plan would use, not built against
    for req in plan.host_requires:
        name, spec = split_requirement(req)
        if name == "torch" and not torch.version:
            out.append("torch installed in this Python (none found)")
        elif name == "rocm-torch" and torch.kind != "rocm":
            found = (f"torch {torch.version}, a {torch.kind.upper()} build" if torch.version
                     else "no torch")
            out.append(f"a ROCm build of torch {spec}".rstrip() + f" (found {found})")
        elif name in ("torch", "rocm-torch") and spec and not within(torch.version, spec):
            out.append(f"{'a ROCm ' if name == 'rocm-torch' else ''}torch {spec} (found torch "
                       f"{torch.version})" + _why(plan))
        elif name == "rocm-sdk":
            in_range = root is not None and root.kind == "rocm" and bool(root.version) and (
                not spec or within(root.version, spec))
            if root is not None and root.unusable:
                continue  # said above
            if not in_range or not (root and hipcc_for(root, torch)):
                if root is None:
                    found = "none"
                elif root.kind == "debian":
                    found = f"only Debian's HIP {root.version} headers under {root.path}"
                else:
                    found = f"ROCm {root.version or '?'} at {root.path} ({root.where})" + (
                        "" if hipcc_for(root, torch) else " without bin/hipcc")
                out.append(f"a ROCm SDK {spec or ''}".rstrip() + f" with hipcc (found {found})"
                           + (_why(plan) if spec and root is not None and root.version
                              and not within(root.version, spec) else ""))
        elif name == "hip-compiler" and plan.rocm.compiler is None:
            out.append("a HIP compiler (run scripts/install-hip-toolchain.sh or set "
                       "ROCMBUILD_HIP_COMPILER)")
    mismatch = torch_sdk_mismatch(plan, host)
    if mismatch:
        out.append(mismatch)
    for d in plan.downloads:
        if not d.sha256:
            from rocmbuild.core.log import redact

            out.append(f"a sha256 pin for the download {d.name!r} ({redact(d.url)}): "
                       f"{plan.recipe_path.name} has none, and an unpinned download is never "
                       "fetched")
    absent = missing_components(plan, host)
    if absent is None:
        out.append(f"ROCm components {', '.join(plan.rocm_components)} (not recorded in "
                   f"{host.origin}: it predates component detection)")
    elif absent and root is not None:
        out.append(f"ROCm components under {root.path}: " + ", ".join(
            f"{c} ({components.COMPONENTS[c].packages()})" for c in absent))
    return out


def hint(plan: Plan, lacking: list[str], host: Host | None = None) -> str | None:
    """How to get what ``missing`` says is missing (``host``: the one it was judged on)."""
    hints = []
    if any("SDK's ROCm" in m for m in lacking):
        hints.append("use the torch built for your ROCm (pip install torch --index-url "
                     "https://download.pytorch.org/whl/rocmX.Y with the SDK's X.Y; for a pip "
                     "ROCm the torch of the same TheRock index) or point --rocm-path / ROCM_PATH "
                     "at the ROCm torch was built with")
    elif any("torch" in m for m in lacking):
        hints.append("install a ROCm torch: pip install torch --index-url "
                     f"https://download.pytorch.org/whl/rocm{plan.rocm.version}")
    unusable = host.rocm_root.unusable if host and host.rocm_root else ""
    if unusable and any("ROCm SDK" in m for m in lacking):
        hints.append(unusable.rpartition(": ")[2] + " (or set ROCM_PATH to another ROCm root)")
    elif any("ROCm SDK" in m for m in lacking):
        hints.append("install ROCm (https://rocm.docs.amd.com) or point --rocm-path / "
                     "ROCM_PATH at it, or build inside the Dockerfile's ROCm image")
    if any(m.startswith("ROCm components under") for m in lacking):
        hints.append(components.install_hint(
            (missing_components(plan, host) if host else None) or plan.rocm_components))
    if any("not recorded in" in m for m in lacking):
        hints.append("write the host file again with `rocmbuild doctor --json > host.json` on "
                     "the node")
    if any("sha256 pin for the download" in m for m in lacking):
        hints.append("pin it: sha256sum the file from a trusted listing and set the "
                     "download's sha256 in the recipe")
    if plan.recipe == "flash-attn" and plan.variant != "triton":
        hints.append("--variant triton builds without them")
    return "; ".join(hints) or None


def preflight(plan: Plan, host: Host) -> None:
    """Fail before fetching when the host cannot build this plan. One line, with the fix."""
    what = f"{plan.recipe} (variant {plan.variant})"
    lacking = missing(plan, host)
    if lacking:
        raise ToolchainError(f"{what} cannot be built on this host: needs "
                             + "; and ".join(lacking), hint=hint(plan, lacking, host))
    # with a build env, python_requires is checked inside it once it is made
    # (rocmbuild.buildtools.buildenv)
    absent = [] if plan.build_env is not None else [
        d for d in plan.python_requires if d not in host.dists]
    if absent:
        raise ToolchainError(
            f"{what} builds without isolation and needs {', '.join(absent)} installed in "
            f"{sys.executable}",
            hint=f"{sys.executable} -m pip install {' '.join(absent)}"
            + (" (torch: the ROCm build on AMD hosts)" if "torch" in absent else ""),
        )
