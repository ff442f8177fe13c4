"""What the build's stages found out, for the provenance: the torch the build compiled against,
what hipify changed, what the bundle stage put into the wheel, the build env it ran in. Values in
``results.Artifacts``;
apart from results.py because a cache hit never makes them (every class costs start-up time)."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TorchBuild:
    """torch as the build saw it (the C++ ABI flag needs an import, so the build stage asks)."""

    version: str | None = None
    hip: str | None = None
    cuda: str | None = None
    cxx11_abi: bool | None = None
    build_only: bool = False
    """A build-only ROCm torch (scripts/install-build-only-torch.sh): the wheel cannot load."""

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "hip": self.hip, "cuda": self.cuda,
                "cxx11_abi": self.cxx11_abi, **({"build_only": True} if self.build_only else {})}


@dataclass(frozen=True)
class Unmapped:
    """A CUDA API left in a file after hipify: the tool had no HIP name for it."""

    file: str
    """The file as the recipe's source has it (relative to the tree; the original's name)."""
    line: int
    symbol: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.symbol}"


@dataclass(frozen=True)
class HipifyReport:
    """What the hipify stage changed (recorded in rocmbuild.json as ``hipify``)."""

    tool: str
    changed: tuple[str, ...] = ()
    """Files written or created, relative to the tree, sorted."""
    renamed: tuple[tuple[str, str], ...] = ()
    """In place: ``.cu`` files renamed ``.hip`` (from, to)."""
    unmapped: tuple[Unmapped, ...] = ()
    """Uses in code the build compiles (what ``strict`` refuses)."""
    not_compiled: tuple[Unmapped, ...] = ()
    """Uses the preprocessor leaves out (``#if`` blocks that are off, ``#if`` conditions):
    warnings only."""
    not_judged: str = ""
    """Why the ``#if`` blocks could not be judged (then every use outside a condition counts
    as compiled); "" when the preprocessor ran."""

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "changed_files": list(self.changed),
                "renamed": {a: b for a, b in self.renamed},
                "unmapped": [str(u) for u in self.unmapped],
                "not_compiled": [str(u) for u in self.not_compiled],
                **({"not_judged": self.not_judged} if self.not_judged else {})}


@dataclass(frozen=True)
class BundledFile:
    """One file the bundle stage copied into the wheel."""

    member: str
    """Its path in the wheel, e.g. ``vecadd/lib/libamdhip64.so.5``."""
    sha256: str
    source: str
    """Where it came from on the build host (symlinks resolved)."""

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "sha256": self.sha256, "source": self.source}


@dataclass(frozen=True)
class GlibcFloor:
    """The highest ``GLIBC_x.y`` symbol version an ELF file of a bundled wheel needs, and the
    platform tag it raised (when the wheel's promised an older glibc)."""

    version: tuple[int, int]
    member: str
    """The wheel member that needs it (the first, in name order, of those that do)."""
    raised_from: str = ""
    raised_to: str = ""
    """The platform tag before and after ("": not raised)."""

    @property
    def glibc(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    def to_json(self) -> dict[str, Any]:
        return {"glibc": self.glibc, "needed_by": self.member,
                **({"platform_from": self.raised_from, "platform_to": self.raised_to}
                   if self.raised_to else {})}


@dataclass(frozen=True)
class Bundle:
    """bundle: the wheel with its ROCm libraries and data inside, and what went in."""

    wheel: Path
    libs: tuple[BundledFile, ...] = ()
    data: tuple[BundledFile, ...] = ()
    patched: tuple[str, ...] = ()
    """Members whose RPATH was set."""
    from_host: tuple[str, ...] = ()
    """Needed libraries left to the host (no bundle.libs pattern names them)."""
    glibc: GlibcFloor | None = None
    """The newest glibc the result needs (None: no file names a GLIBC_ version)."""

    def to_json(self) -> dict[str, Any]:
        return {"libs": [f.to_json() for f in self.libs],
                "data": [f.to_json() for f in self.data],
                "rpath_set": list(self.patched), "from_host": list(self.from_host),
                **({"glibc": self.glibc.to_json()} if self.glibc is not None else {})}


DROP_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP", "VIRTUAL_ENV")
"""Variables that would put more of the host on the build env's sys.path."""


@dataclass(frozen=True)
class BuildEnv:
    root: Path
    requirements: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]
    """Installed in the env: (name, version), by name."""
    host_packages: tuple[tuple[str, str], ...]
    """Seen from the host through the view (torch and what it requires)."""
    digest: str
    created: bool = False
    """Made by this call (False: an existing env was reused)."""

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def overlay(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What the env sets for a build child: its bin/ first on PATH, VIRTUAL_ENV."""
        return {"PATH": os.pathsep.join([str(self.bin), environ.get("PATH", os.defpath)]),
                "VIRTUAL_ENV": str(self.root)}

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` (all of it: use ``hostenv.child_env`` for a build) run in this env."""
        return {**host_environ(environ), **self.overlay(environ)}

    def to_json(self) -> dict[str, Any]:
        """For rocmbuild.json: versions only (the digest hashes host paths: not provenance)."""
        return {
            "python": platform.python_version(),
            "requirements": list(self.requirements),
            "packages": [f"{n}=={v}" for n, v in self.packages],
            "host_packages": [f"{n}=={v}" for n, v in self.host_packages],
        }


def host_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables that would add to a build env's sys.path (DROP_ENV,
    PYTHONPATH among them, which ``hostenv.PASS_ENV`` passes to builds without an env)."""
    return {k: v for k, v in environ.items() if k not in DROP_ENV}
