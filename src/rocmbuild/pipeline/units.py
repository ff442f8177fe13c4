"""How many compile units a build will have (``rocmbuild plan --units``), counted before it runs.

``build.unit_count = "ck-fmha"``: Composable Kernel's fmha code generator
(``example/ck_tile/01_fmha/generate.py``, inside the fetched tree, e.g. the flash-attn sdist's
``csrc/composable_kernel``, or inside a [[downloads]] directory) lists the units it would write
(``--list_blobs``, about a second per direction, no compiler), called as the source's setup.py
calls it: ``-d <direction> --receipt 2`` for fwd, fwd_appendkv, fwd_splitkv and bwd, with
``--optdim <OPT_DIM>`` when the plan sets OPT_DIM (the sdist's setup.py passes it; the ROCm fork's
at b3ae4966 does not, and its plans do not set it). ``build.unit_count = "ck-fmha-targets"``
(Dao-AILab main, setup.py l.499-501) adds ``--targets <gfx,gfx>``: the plan's archs in one call,
so the count depends on the arch set. ``CK_FMHA_DIRECTIONS`` (the ck-fmha-probe recipe's option)
narrows the directions and ``CK_FMHA_UNITS`` keeps the units whose name matches its shell
pattern.

``build.unit_count = "ninja"`` (``auto`` for the cmake backend): the cmake backend's configure
command (``Plan.unit_configure``, ``plan.backend.cmake_configure``: generator Ninja, the HIP
compiler and archs, build.cmake_args) runs in the fetched tree with the build's environment, then
``ninja -t targets all`` lists the build's outputs; the object files (``.o``, ``.obj``) are the
compile units: links, custom commands and CMake's own rules are not counted.

The source must be fetched first (``count`` takes the tree): ``render`` stays pure.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmbuild.core import gfx, hostenv
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import BuildError, UsageError
from rocmbuild.core.run import run
from rocmbuild.host.detect import Host
from rocmbuild.plan.model import Plan

if TYPE_CHECKING:
    from rocmbuild.stages.context import Context

GENERATE = "example/ck_tile/01_fmha/generate.py"
"""Where CK keeps the fmha generator, relative to a composable_kernel checkout."""
CK_DIRS = ("csrc/composable_kernel", "")
"""Where a tree may hold that checkout (flash-attn's submodule, or CK itself)."""
DIRECTIONS = ("fwd", "fwd_appendkv", "fwd_splitkv", "bwd")
"""setup.py's generate.py calls, in its order."""
RECEIPT = "2"
"""generate.py's receipt for the flash-attention integration (setup.py's)."""
COUNTERS = ("ck-fmha", "ck-fmha-targets")
"""The unit_count values this module counts with CK's generator."""


OBJECTS = (".o", ".obj")
"""What ``ninja -t targets all`` outputs count as compile units."""


@dataclass(frozen=True)
class UnitCount:
    count: int | None
    """Compile units (ck-fmha: generated .cpp files, the kernels' dispatch ``*_api.cpp``
    included; ninja: object files); None: not counted."""
    how: str
    """What was run, for people; why not, when not counted."""
    settings: tuple[tuple[str, str], ...] = ()
    """The variables that decided it (``OPT_DIM=128``)."""
    note: str = ""
    """Shown in parentheses when there are no settings (``ninja, after configure``)."""

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "how": self.how, "settings": dict(self.settings)}

    def line(self) -> str:
        """``compile units: 697 (OPT_DIM=128)``, ``compile units: 2 (ninja, after configure)``,
        ``compile units: not counted (no counter for this backend)``."""
        if self.count is None:
            return f"compile units: not counted ({self.how})"
        shown = ", ".join(f"{k}={v}" for k, v in self.settings) or self.note
        return f"compile units: {self.count}" + (f" ({shown})" if shown else "")


def generate_argv(generate: Path, env: Mapping[str, str], list_dir: Path,
                  targets: Sequence[str] = ()) -> list[tuple[str, list[str]]]:
    """(direction, argv) of each generate.py call, as setup.py makes them, listing into
    ``list_dir``: ``--optdim`` when ``env`` sets OPT_DIM, ``--targets`` when ``targets`` are
    given (gfx names)."""
    extra = [*(["--optdim", env["OPT_DIM"]] if env.get("OPT_DIM") else []),
             *(["--targets", ",".join(targets)] if targets else [])]
    return [(d, [sys.executable, "-B", str(generate), "-d", d, "--receipt", RECEIPT, *extra,
                 "--list_blobs", str(list_dir / f"{d}.txt")])
            for d in directions_of(env)]


def targets_of(plan: Plan) -> tuple[str, ...]:
    """The ``--targets`` of a ``ck-fmha-targets`` plan (its gfx names), else none."""
    return gfx.names(plan.archs) if plan.unit_count == "ck-fmha-targets" else ()


def directions_of(env: Mapping[str, str]) -> tuple[str, ...]:
    """``CK_FMHA_DIRECTIONS`` (comma-separated), else setup.py's four."""
    given = env.get("CK_FMHA_DIRECTIONS", "")
    return tuple(d for d in given.split(",") if d) or DIRECTIONS


def select(names: Sequence[str], pattern: str) -> list[str]:
    """The unit file names (``fmha_fwd_d64_..._nsquant.cpp``) whose stem matches the shell
    ``pattern`` (``*``: all; case-sensitive), in the generator's order."""
    return [n for n in names if fnmatch.fnmatchcase(n.removesuffix(".cpp"), pattern or "*")]


def find_generate(roots: Sequence[Path]) -> Path | None:
    """generate.py in the first root that holds one (the tree, then the downloads)."""
    for root in roots:
        for ck in CK_DIRS:
            candidate = root / ck / GENERATE
            if candidate.is_file():
                return candidate
    return None


def not_counted(plan: Plan) -> UnitCount | None:
    """The answer for a plan whose recipe has no counter (None: it has one)."""
    if plan.unit_count:
        return None
    return UnitCount(None, "no counter for this backend" if plan.backend == "pip-wheel"
                     else "build.unit_count = \"none\"")


def countable(plan: Plan) -> None:
    """UsageError unless the plan's recipe says how to count its units with CK's generator."""
    if plan.unit_count not in COUNTERS:
        raise UsageError(f"--units: {plan.recipe} does not say how to count its compile units",
                         hint="a recipe sets build.unit_count (e.g. \"ck-fmha\"); leave "
                         "--units out")


def object_outputs(targets: str) -> list[str]:
    """The object files among ``ninja -t targets all``'s ``<output>: <rule>`` lines."""
    outs = (line.rpartition(": ")[0] for line in targets.splitlines())
    return [o for o in outs if o.endswith(OBJECTS)]


def count_ninja(plan: Plan, ctx: Context, tree: Path, downloads: Sequence[tuple[str, Path]],
                log_path: Path) -> UnitCount:
    """Configure the fetched tree as the cmake backend does (its configure command, the build's
    environment, offline when the build is) and count the object files ninja would build."""
    from rocmbuild.stages import build
    from rocmbuild.stages.context import build_child

    if plan.backend == "cmake":
        build.check_source_dir(plan, tree)
    elif not (tree / "CMakeLists.txt").is_file():
        raise BuildError(f"{plan.recipe_path.name}: build.unit_count = \"ninja\", but the "
                         "fetched tree has no CMakeLists.txt at its top",
                         hint="the ninja counter configures a CMake project; set "
                         "unit_count = \"none\" for this recipe")
    python, env = build_child(plan, ctx)
    for var, where in downloads:
        env[var] = str(where)  # [[downloads]], as the build sees them
    scratch = tree / "_rocmbuild_units"
    argv = build.filled(plan.unit_configure, python, scratch / "wheel", scratch / "stage")
    run(argv, cwd=tree, env=env, log_path=log_path, capture=True, timeout=600,
        wrap=build.offline_prefix(plan),
        hint=f"CMake's configure failed on the fetched source; see {log_path}")
    ninja = shutil.which("ninja", path=env.get("PATH"))
    if ninja is None:
        raise BuildError(f"--units: {plan.recipe}: no ninja on the build's PATH",
                         hint="install ninja (pip install ninja) or add it to "
                         "build.python_requires")
    listed = run([ninja, "-C", "_rocmbuild_cmake", "-t", "targets", "all"], cwd=tree, env=env,
                 capture=True, timeout=60, hint="ninja could not read the configured build")
    return UnitCount(len(object_outputs(listed.output)),
                     "cmake configure, then ninja -t targets all: object files",
                     note="ninja, after configure")


def count(plan: Plan, roots: Sequence[Path], log_path: Path | None = None) -> UnitCount:
    """The plan's compile units (ck-fmha), from its fetched (and patched) tree and
    downloads."""
    countable(plan)
    generate = find_generate(roots)
    if generate is None:
        raise BuildError(
            f"{plan.recipe}: build.unit_count = \"{plan.unit_count}\", but the fetched source "
            f"has no {GENERATE} (in csrc/composable_kernel/ or at its top)",
            hint="check the recipe's source (for flash-attn's git source the CK submodule "
            "must be fetched)")
    env, targets = plan.env, targets_of(plan)
    names: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rocmbuild-units-") as tmp:
        for _, argv in generate_argv(generate, env, Path(tmp), targets):
            # cwd: generate.py imports its codegen package from its own directory. The fetched
            # code sees the host's allow-listed variables only, as in a build.
            run(argv, cwd=generate.parent, env=hostenv.passed(os.environ, plan.pass_env),
                log_path=log_path, capture=True, timeout=300,
                hint="CK's generator failed on the fetched source; see the log")
        for f in sorted(Path(tmp).glob("*.txt")):
            names += [Path(line).name for line in f.read_text().splitlines() if line.strip()]
    pattern = env.get("CK_FMHA_UNITS", "")
    chosen = select(names, pattern) if pattern else names
    settings = [("OPT_DIM", env["OPT_DIM"])] if env.get("OPT_DIM") else []
    if targets:
        settings.append(("targets", ",".join(targets)))
    if "CK_FMHA_DIRECTIONS" in env:
        settings.append(("CK_FMHA_DIRECTIONS", env["CK_FMHA_DIRECTIONS"]))
    if pattern:
        settings.append(("CK_FMHA_UNITS", pattern))
    how = (f"{generate.name} --list_blobs -d {','.join(directions_of(env))} --receipt "
           f"{RECEIPT}" + (" --optdim" if env.get("OPT_DIM") else "")
           + (" --targets" if targets else "") + (" + CK_FMHA_UNITS" if pattern else ""))
    return UnitCount(len(chosen), how, tuple(settings))


def fetch_and_count(plan: Plan, ws: Workspace, host: Host) -> UnitCount:
    """Fetch and patch the plan's source into a temporary workspace that shares ``ws``'s cache
    (downloads and git mirrors; nothing is built or stored) and count its units."""
    from rocmbuild.stages import fetch, patch
    from rocmbuild.stages.context import Context, need

    skipped = not_counted(plan)  # before fetching anything
    if skipped is not None:
        return skipped
    if plan.unit_count != "ninja":
        countable(plan)
    log_dir = ws.logs / plan.recipe / plan.short_key  # kept: fetch.log, patch.log, units.log
    log_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rocmbuild-units-") as tmp:
        scratch = Workspace(root=Path(tmp), cache=ws.cache)
        ctx = Context(ws=scratch, log_dir=log_dir, wheel_dir=Path(tmp) / "wheels", host=host)
        fetched = fetch.run(plan, ctx)
        ctx.artifacts = ctx.artifacts.merged(fetched.artifacts)
        patch.run(plan, ctx)
        tree = need(fetched.artifacts.tree, "source tree", "units")
        if plan.unit_count == "ninja":
            return count_ninja(plan, ctx, tree, fetched.artifacts.downloads or (),
                               log_dir / "units.log")
        roots = [tree, *(p for _, p in fetched.artifacts.downloads or () if p.is_dir())]
        return count(plan, roots, log_dir / "units.log")
