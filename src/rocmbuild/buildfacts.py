"""What the build's stages found out, for the provenance: the torch the build compiled against,
what hipify changed, what the bundle stage put into the wheel. Values in ``results.Artifacts``;
apart from results.py because a cache hit never makes them (every class costs start-up time)."""

from __future__ import annotations

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

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "hip": self.hip, "cuda": self.cuda,
                "cxx11_abi": self.cxx11_abi}


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

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "changed_files": list(self.changed),
                "renamed": {a: b for a, b in self.renamed},
                "unmapped": [str(u) for u in self.unmapped]}


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
class Bundle:
    """bundle: the wheel with its ROCm libraries and data inside, and what went in."""

    wheel: Path
    libs: tuple[BundledFile, ...] = ()
    data: tuple[BundledFile, ...] = ()
    patched: tuple[str, ...] = ()
    """Members whose RPATH was set."""
    from_host: tuple[str, ...] = ()
    """Needed libraries left to the host (no bundle.libs pattern names them)."""

    def to_json(self) -> dict[str, Any]:
        return {"libs": [f.to_json() for f in self.libs],
                "data": [f.to_json() for f in self.data],
                "rpath_set": list(self.patched), "from_host": list(self.from_host)}
