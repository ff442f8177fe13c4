"""Build: run the plan's commands in the patched tree with the plan's environment, stream the
output to ``<workdir>/logs/<recipe>/<key>/build.log``, show ninja's ``[N/M]`` progress with an
ETA, and hand back the one wheel produced. On failure: the last 30 lines, then the log path."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wheel.wheelfile import WheelFile

from rocmbuild import log
from rocmbuild.errors import BuildError, CommandFailed
from rocmbuild.host import Host
from rocmbuild.recipe.plan import Plan
from rocmbuild.results import Artifacts, StageResult, Status, TorchBuild
from rocmbuild.run import run as sh
from rocmbuild.stages import Context, need, source_date_epoch

if TYPE_CHECKING:
    from rich.progress import Progress

NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]")


class _Progress:
    """Turns output lines into a progress display: a bar for ninja's [N/M], else a line count."""

    def __init__(self, label: str) -> None:
        self.bar: Progress | None = None
        self.task = None
        self.label = label
        self.lines = 0
        self.last_note = time.monotonic()
        if log.level() == 1 and log.is_tty():
            from rich.progress import (  # here: a build without a terminal never needs it
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("  {task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=log.console,
                transient=True,
            )
            self.task = self.bar.add_task(label, total=None)
            self.bar.start()

    def __call__(self, line: str) -> None:
        self.lines += 1
        m = NINJA.match(line)
        if self.bar is not None and self.task is not None:
            if m:
                self.bar.update(self.task, completed=int(m.group(1)), total=int(m.group(2)))
            else:
                self.bar.update(self.task, description=f"{self.label} ({self.lines} lines)")
        elif log.level() == 1 and m and time.monotonic() - self.last_note > 10:
            log.info(f"  {self.label}: [{m.group(1)}/{m.group(2)}]")
            self.last_note = time.monotonic()

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


_TORCH_PROBE = (
    "import json, torch; print(json.dumps({'version': torch.__version__, "
    "'hip': torch.version.hip, 'cuda': torch.version.cuda, "
    "'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}))"
)


def torch_facts(host: Host, log_path: Path) -> TorchBuild:
    """torch as the build saw it, including the C++ ABI flag (needs an import, in a child)."""
    info = host.torch
    if not info.version:
        return TorchBuild()
    fallback = TorchBuild(info.version, info.hip, info.cuda)
    try:
        res = sh([sys.executable, "-c", _TORCH_PROBE], capture=True, log_path=log_path)
        facts = json.loads(res.output.strip().splitlines()[-1])
    except (CommandFailed, ValueError, IndexError, OSError):  # OSError: its log cannot be
        return fallback  # written; the build's own commands then fail on that, as a BuildError
    if not isinstance(facts, dict):
        return fallback
    abi = facts.get("cxx11_abi")
    return TorchBuild(str(facts.get("version") or info.version), facts.get("hip") or None,
                      facts.get("cuda") or None, abi if isinstance(abi, bool) else None)


def package_prefix(prefix: Path, out_dir: Path, name: str, version: str) -> Path:
    """Pack a cmake install prefix as ``<name>-<version>-py3-none-<platform>.whl`` with the files
    under ``<name>/`` (RECORD written by WheelFile)."""
    if not prefix.is_dir() or not any(prefix.rglob("*")):
        raise BuildError(f"{name}: `cmake --install` put nothing in {prefix}",
                         hint="the project needs install() rules for its targets")
    dist = re.sub(r"[-_.]+", "_", name).lower()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    wheel = out_dir / f"{dist}-{version}-py3-none-{plat}.whl"
    info = f"{dist}-{version}.dist-info"
    with WheelFile(wheel, "w") as wf:
        for f in sorted(p for p in prefix.rglob("*") if p.is_file()):
            wf.write(str(f), f"{dist}/{f.relative_to(prefix)}")
        wf.writestr(f"{info}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: rocmbuild\n"
                    f"Root-Is-Purelib: false\nTag: py3-none-{plat}\n")
    return wheel


def _check_source_dir(plan: Plan, tree: Path) -> None:
    """The cmake backend's CMakeLists.txt is where build.source_dir says, inside the tree."""
    where = f"{plan.recipe_path.name}: build.source_dir"
    d = (tree / plan.source_dir).resolve() if plan.source_dir else tree.resolve()
    if not d.is_relative_to(tree.resolve()):
        raise BuildError(f"{where}: {plan.source_dir!r} leaves the source tree",
                         hint="name a directory inside the fetched tree")
    if not (d / "CMakeLists.txt").is_file():
        found = sorted(str(p.parent.relative_to(tree)) for pattern in
                       ("*/CMakeLists.txt", "*/*/CMakeLists.txt") for p in tree.glob(pattern))[:5]
        raise BuildError(
            f"{where}: no CMakeLists.txt in {plan.source_dir or 'the top of the source tree'}",
            hint="set build.source_dir to the directory that holds it"
            + (f" (found in: {', '.join(found)})" if found else ""),
        )


def run(plan: Plan, ctx: Context) -> StageResult:
    start = time.monotonic()
    tree = need(ctx.artifacts.tree, "source tree", "build")
    out_dir = tree / "_rocmbuild_dist"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    stage_dir = tree / "_rocmbuild_stage"
    shutil.rmtree(stage_dir, ignore_errors=True)
    # This interpreter's bin first: the venv's cmake (>= 3.27) and ninja, not the system's.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # SOURCE_DATE_EPOCH: the source's own time, so that backends that honour it (setuptools'
    # bdist_wheel, cmake's string(TIMESTAMP), compilers' __DATE__) write the same bytes each time
    env = {**os.environ, "PATH": path,
           "SOURCE_DATE_EPOCH": str(source_date_epoch(ctx.artifacts)), **plan.env}
    log_path = ctx.log_dir / "build.log"
    if plan.backend == "cmake":
        _check_source_dir(plan, tree)
    if log_path.exists():
        log_path.unlink()
    progress = _Progress(f"building {plan.package} ({plan.variant}, MAX_JOBS={plan.jobs})")
    # Probe torch (the ABI flag needs an import, about a second) while the build runs.
    torch: list[TorchBuild] = []
    prober = threading.Thread(
        target=lambda: torch.append(torch_facts(ctx.host, ctx.log_dir / "torch.log")), daemon=True
    )
    prober.start()
    try:
        for command in plan.commands:
            argv = [
                sys.executable if a == "python" else
                a.replace("{wheel_tmp}", str(out_dir)).replace("{stage_dir}", str(stage_dir))
                for a in command
            ]
            sh(argv, cwd=tree, env=env, log_path=log_path, on_line=progress)
    except CommandFailed as exc:
        raise BuildError(
            f"{plan.recipe} ({plan.variant}) failed to build: {exc.message}",
            hint=f"the last lines are above; full log: {log_path}",
            detail=exc.detail,
        ) from exc
    finally:
        progress.stop()
        prober.join()
    if plan.backend == "cmake":
        package_prefix(stage_dir, out_dir, plan.package, plan.version)
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(
            f"{plan.recipe}: expected one wheel in {out_dir}, found {len(wheels)}",
            hint=f"see {log_path}",
        )
    return StageResult(
        Status.SUCCESS,
        time.monotonic() - start,
        wheels[0].name,
        log_path,
        Artifacts(raw_wheel=wheels[0], build_log=log_path, torch=torch[0] if torch else None),
    )
