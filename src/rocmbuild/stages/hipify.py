"""Hipify: translate CUDA sources to HIP in the patched tree, before the build.

Three tools (recipe ``[hipify] tool``): ``torch`` runs ``torch.utils.hipify`` from the torch in
the build's Python, in a child process (a small driver script written to the log directory; torch
is never imported into rocmbuild); ``perl`` runs ``hipify-perl -inplace``; ``command`` runs the
recipe's own command (``build.hipify``, e.g. PyTorch's tools/amd_build/build_amd.py).

Whatever the tool, the stage snapshots the C/C++/CUDA files and CMakeLists.txt of the project
before and after and records what changed. Every changed file is then scanned for CUDA API names
the tool left (it had no HIP name for them), and the preprocessor tells which of those uses the
build compiles (buildtools/preprocessed.py): those are logged, and with ``strict`` they fail the
build, one line each with the original file, line and symbol; uses in ``#if`` blocks that are
off, and in ``#if`` conditions, are warnings. The report goes into the wheel's
provenance (``ctx.artifacts.hipify``, written by the tag stage).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from rich.markup import escape

from rocmbuild.artifacts.buildfacts import HipifyReport, Unmapped
from rocmbuild.artifacts.results import Artifacts, StageResult, Status
from rocmbuild.buildtools import preprocessed
from rocmbuild.core import hostenv, log, untrusted
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import BuildError, CommandFailed, ToolchainError
from rocmbuild.core.run import run as sh
from rocmbuild.host import compiler
from rocmbuild.plan.model import Plan
from rocmbuild.recipe.tables import Hipify
from rocmbuild.stages.context import Context, build_child, need

SOURCE_SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".hxx", ".in",
                   ".hip", ".inl")
"""Files the snapshot and the scan look at (plus CMakeLists.txt)."""
TORCH_EXTENSIONS = (".cu", ".cuh", ".c", ".cc", ".cpp", ".h", ".hpp", ".in")
"""What torch.utils.hipify translates (its own default list)."""
SKIP_DIRS = (".git", "_rocmbuild_cmake")

# CUDA API names: runtime (cudaMalloc, cudaStream_t), driver (cuMemAlloc, CUresult, CU_*),
# macros and types (CUDA_R_16F), the CUDA libraries; cuda_foo / CUDA_CHECK-style user names that
# a project #defines itself are not APIs and are skipped.
CUDA_NAME = re.compile(
    r"\b(?:cuda[A-Z]\w*|cu[A-Z]\w*|CU[a-z]\w*|CU_[A-Z0-9_]+|CUDA_[A-Z0-9_]+"
    r"|(?:cublas|cublasLt|curand|cufft|cusparse|cusolver|cudnn|nvrtc|nvtx|nvml)[A-Z_]\w*)\b")
CUDA_HEADER = re.compile(
    r"^[ \t]*#[ \t]*include[ \t]*[<\"]((?:cuda|cub/|cublas|curand|cufft|cusparse|cusolver|cudnn"
    r"|nvrtc|nvToolsExt|nvtx3/|nvml|cooperative_groups)[^>\"]*)[>\"]", re.M)
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)
_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)

# Runs in the build's Python: no rocmbuild imports. argv: settings JSON, result JSON.
DRIVER = '''\
import json, sys
from torch.utils.hipify import hipify_python as hp

a = json.load(open(sys.argv[1], encoding="utf-8"))
if a["in_place"]:
    # Every file keeps its name: torch's rule for files it translates in place (its own tree).
    hp.is_out_of_place = lambda rel: False
# Out of place: the files, names and launches torch's CUDAExtension writes on a ROCm torch.
res = hp.hipify(project_directory=a["project_dir"], output_directory=a["project_dir"],
                includes=a["includes"], ignores=a["ignores"], extensions=a["extensions"],
                header_include_dirs=a["header_include_dirs"], show_detailed=False,
                show_progress=True, hip_clang_launch=a["in_place"],
                is_pytorch_extension=not a["in_place"])
out = {src: {"output": r.hipified_path, "status": r.status} for src, r in res.items()}
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, sort_keys=True)
'''


@dataclass(frozen=True)
class _Seen:
    digest: str
    names: dict[str, list[int]]
    """CUDA name -> the lines it is on (one entry per use), for the original's line numbers."""


def run(plan: Plan, ctx: Context) -> StageResult:
    step = plan.hipify_step
    if step is None:
        return StageResult(Status.SKIPPED, 0.0, "the recipe has no hipify step")
    start = time.monotonic()
    tree = need(ctx.artifacts.tree, "source tree", "hipify")
    root = tree / step.project_dir
    if not root.is_dir() or not root.resolve().is_relative_to(tree.resolve()):
        raise BuildError(f"hipify.project_dir: {step.project_dir!r} is not a directory of the "
                         "source tree", hint="name a directory relative to the tree's top")
    log_path = ctx.log_dir / "hipify.log"
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    # A command may rewrite a whole PyTorch: its tree is only hashed (scanned: what changed).
    before = _snapshot(root, names=step.tool != "command")
    renamed: tuple[tuple[str, str], ...] = ()
    python, env = build_child(plan, ctx)
    if step.tool == "command":
        _command(plan, tree, log_path, python, env)
        origin = {rel: rel for rel in before}
    elif step.tool == "torch":
        origin = _torch(plan, step, root, ctx.log_dir, log_path, python, env)
    else:
        origin = _perl(plan, step, root, ctx, log_path)
    if step.tool == "torch" and not step.out_of_place:
        renamed = _rename_cu(root, origin)
        origin.update({new: old for old, new in renamed})
    after = _snapshot(root, names=False)
    changed = sorted(rel for rel, seen in after.items()
                     if rel not in before or before[rel].digest != seen.digest)
    # A file whose only CUDA names have no HIP mapping comes out unchanged: scan what the tool
    # read too (a command's reads are unknown: what it changed).
    scan = sorted(set(changed) | (set() if step.tool == "command" else set(origin) & set(after)))
    now = {rel: _seen(root / rel) for rel in scan}
    defined = _defines(root, after, [*scan, *(r for r, b in before.items()
                                              if b.names and r in after)])
    prefix = f"{step.project_dir.strip('/')}/" if step.project_dir.strip("/") else ""
    found = [(u, rel, at) for rel in scan
             for u, at in _uses(rel, now[rel], before.get(origin.get(rel, rel)),
                                origin.get(rel, rel), defined)]
    # strict: which of them the build compiles (the preprocessor over the translated units;
    # without strict nothing depends on it, and a large tree is not preprocessed for a log)
    live = _judge(plan, step, ctx, tree, prefix, sorted({rel for _, rel, _ in found}),
                  scan, log_path) if found and step.strict else preprocessed.Live()
    split: tuple[list[Unmapped], list[Unmapped]] = ([], [])
    for u, rel, at in found:
        split[0 if live.compiled(prefix + rel, at) else 1].append(
            Unmapped(prefix + u.file, u.line, u.symbol))
    report = HipifyReport(
        tool=step.tool,
        changed=tuple(prefix + rel for rel in changed),
        renamed=tuple((prefix + a, prefix + b) for a, b in renamed),
        unmapped=tuple(sorted(split[0], key=_order)),
        not_compiled=tuple(sorted(split[1], key=_order)), not_judged=live.unknown,
    )
    _log(log_path, report)
    for u in report.not_compiled:
        log.warn(escape(f"hipify: {u}: CUDA API with no HIP mapping, in code this build does "
                        "not compile (an #if block that is off, or an #if condition): not "
                        "refused by strict"))
    if step.strict and report.unmapped:
        why = (f"; every use counts as compiled: {live.unknown}" if live.unknown else "")
        raise BuildError(
            "\n".join(f"hipify: {u}: CUDA API with no HIP mapping" for u in report.unmapped),
            hint=f"port these by hand with a [[patches]] entry, or leave the files out "
            f"(hipify.ignores); when the build leaves such a block out by its own -D flags or "
            f"include paths, list them in hipify.defines / hipify.include_dirs{why}; strict = "
            f"false builds anyway; the log: {log_path}",
        )
    note = (f"; {len(report.unmapped)} unmapped CUDA API use(s) left (see {log_path.name})"
            if report.unmapped else "")
    if report.not_compiled:
        note += (f"; {len(report.not_compiled)} more in code the build does not compile "
                 "(warnings)")
    what = " ".join(plan.hipify) if step.tool == "command" else f"tool {step.tool}"
    warn = bool(report.unmapped or report.not_compiled)
    return StageResult(Status.WARNING if warn else Status.SUCCESS, time.monotonic() - start,
                       f"{what}: {len(report.changed)} file(s) changed{note}", log_path,
                       Artifacts(hipify=report))


def _command(plan: Plan, tree: Path, log_path: Path, python: str, env: dict[str, str]
             ) -> None:
    argv = [python if a == "python" else a for a in plan.hipify]
    try:
        sh(argv, cwd=tree, env=env, log_path=log_path)
    except CommandFailed as exc:
        raise BuildError(
            f"hipify ({' '.join(plan.hipify)}) failed: {exc.message}",
            hint=exc.hint,
            detail=exc.detail,
        ) from exc


def _torch(plan: Plan, step: Hipify, root: Path, log_dir: Path, log_path: Path, python: str,
           env: dict[str, str]) -> dict[str, str]:
    """torch.utils.hipify in a child; the outputs it wrote -> their sources (relative)."""
    base = str(root.resolve())
    exts = [*TORCH_EXTENSIONS, *(() if step.out_of_place else ("CMakeLists.txt",))]
    settings = {
        "project_dir": base, "in_place": not step.out_of_place, "extensions": exts,
        "includes": [os.path.join(base, g) for g in step.includes],
        "ignores": [os.path.join(base, g) for g in step.ignores],
        "header_include_dirs": list(step.header_include_dirs),
    }
    driver, args, result = (log_dir / n for n in ("hipify_torch.py", "hipify-settings.json",
                                                  "hipify-result.json"))
    driver.write_text(DRIVER, encoding="utf-8")
    args.write_text(json.dumps(settings, indent=1), encoding="utf-8")
    result.unlink(missing_ok=True)
    try:
        sh([python, str(driver), str(args), str(result)], cwd=root,
           env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, log_path=log_path)
    except CommandFailed as exc:
        raise BuildError(f"hipify (torch.utils.hipify) failed: {exc.message}",
                         hint="the log shows the traceback; torch.utils.hipify comes with torch "
                         "in the build's Python", detail=exc.detail) from exc
    try:  # written by our driver, but through torch.utils.hipify's objects: checked
        done = untrusted.obj(untrusted.read_json(result, 256 << 20), "(top level)")
    except (OSError, untrusted.BadJson) as exc:
        raise BuildError(f"hipify (torch.utils.hipify): no readable result in {result} "
                         f"({str(exc)[:120]})", hint="the log shows what the child printed"
                         ) from None
    origin: dict[str, str] = {}
    for src, res in done.items():
        out = res.get("output") if isinstance(res, dict) else None
        rel_src, rel_out = _inside(base, src), _inside(base, out)
        if rel_src is not None and rel_out is not None:
            origin[rel_out] = rel_src
    return origin


def _perl(plan: Plan, step: Hipify, root: Path, ctx: Context, log_path: Path) -> dict[str, str]:
    """hipify-perl -inplace over the matched files (in place only; names are kept, and
    CMakeLists.txt is the recipe's to patch)."""
    search = os.environ.get("PATH", "")
    if ctx.host.rocm_root is not None:
        search = os.pathsep.join([search, str(ctx.host.rocm_root.path / "bin")])
    tool = shutil.which("hipify-perl", path=search) or compiler.toolchain_tool("hipify-perl")
    if tool is None:
        raise ToolchainError(
            "hipify: hipify-perl not found on PATH, in the ROCm root's bin or in toolchain.json",
            hint="install it (Debian 13 / Ubuntu 24.04: apt install hipify-perl; Debian 12: "
            "scripts/install-hip-toolchain.sh --with-gfx950 fetches forky's), or use "
            "tool = \"torch\"",
        )
    files = sorted(_matched(root, step))
    for i in range(0, len(files), 200):
        try:
            sh(["perl", tool, "-inplace", *files[i:i + 200]], cwd=root,
               env=hostenv.child_env(os.environ, plan.env, plan.pass_env), log_path=log_path)
        except CommandFailed as exc:
            raise BuildError(f"hipify (hipify-perl) failed: {exc.message}", hint=exc.hint,
                             detail=exc.detail) from exc
    for rel in files:  # -inplace keeps each original as <file>.prehip
        (root / f"{rel}.prehip").unlink(missing_ok=True)
    return {rel: rel for rel in files}


def _matched(root: Path, step: Hipify) -> Iterator[str]:
    for rel in _walk(root):
        if (rel.endswith(TORCH_EXTENSIONS) and any(fnmatch(rel, g) for g in step.includes)
                and not any(fnmatch(rel, g) for g in step.ignores)):
            yield rel


def _inside(base: str, path: object) -> str | None:
    """``path`` relative to ``base``, or None when it is not a path inside it."""
    if not isinstance(path, str):
        return None
    rel = os.path.relpath(os.path.abspath(path), base)
    return None if rel == ".." or rel.startswith(("../", "/")) else rel.replace(os.sep, "/")


def _rename_cu(root: Path, origin: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """In place: the translated ``.cu`` files become ``.hip`` (CMake's HIP language, hipcc and
    clang take them by that name; the CMakeLists.txt rewrite already says ``.hip``)."""
    out = []
    for rel in sorted(r for r in origin if r.endswith(".cu")):
        new = rel[:-3] + ".hip"
        if (root / new).exists():
            raise BuildError(f"hipify: cannot rename {rel} to {new}: {new} exists",
                             hint="set hipify.out_of_place = true, or leave one of them out "
                             "(hipify.ignores)")
        (root / rel).rename(root / new)
        out.append((rel, new))
    return tuple(out)


def _walk(root: Path) -> Iterator[str]:
    """Regular files under ``root`` (relative, ``/``-separated), not following links."""
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                yield os.path.relpath(full, root).replace(os.sep, "/")


def _snapshot(root: Path, names: bool) -> dict[str, _Seen]:
    """The C/C++/CUDA files and CMakeLists.txt under ``root``: their digests and, with
    ``names``, the CUDA names each uses."""
    out: dict[str, _Seen] = {}
    for rel in _walk(root):
        if rel.endswith(SOURCE_SUFFIXES) or rel.rsplit("/", 1)[-1] == "CMakeLists.txt":
            out[rel] = _seen(root / rel) if names else _Seen(sha256_file(root / rel), {})
    return out


def _seen(path: Path) -> _Seen:
    data = path.read_bytes()
    names: dict[str, list[int]] = {}
    if path.name != "CMakeLists.txt":
        for line, name in _cuda_names(data.decode("utf-8", "replace")):
            names.setdefault(name, []).append(line)
    return _Seen(hashlib.sha256(data).hexdigest(), names)


def _cuda_names(text: str) -> Iterator[tuple[int, str]]:
    """(line, name) of each CUDA API name and CUDA header in C/C++ text, outside comments and
    string literals (an ``#include "..."`` line is read before its quotes are blanked)."""
    if not CUDA_NAME.search(text) and not CUDA_HEADER.search(text):
        return  # most files of a big tree: one search each

    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        keep = s.startswith('"') and _is_include(text, m.start())
        return s if keep else re.sub(r"[^\n]", " ", s)

    code = _CODE.sub(blank, text)
    newlines = [m.start() for m in re.finditer("\n", code)]
    for m in CUDA_HEADER.finditer(code):
        yield bisect.bisect_left(newlines, m.start(1)) + 1, f"#include {m.group(1)}"
    plain = CUDA_HEADER.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    for m in CUDA_NAME.finditer(plain):
        yield bisect.bisect_left(newlines, m.start()) + 1, m.group(0)


def _is_include(text: str, pos: int) -> bool:
    line = text[text.rfind("\n", 0, pos) + 1:pos]
    return re.fullmatch(r"[ \t]*#[ \t]*include[ \t]*", line) is not None


def _defines(root: Path, files: dict[str, _Seen], read: list[str]) -> set[str]:
    """What the project has itself and so is no CUDA API: the macros the files in ``read``
    define (CUDA_CHECK and friends), and its own headers (``#include "cuda_utils.h"``)."""
    out: set[str] = set()
    for rel in dict.fromkeys(read):
        if not rel.endswith("CMakeLists.txt"):
            out.update(DEFINE.findall((root / rel).read_text("utf-8", "replace")))
    for rel in files:
        parts = rel.split("/")
        out.update(f"#include {'/'.join(parts[i:])}" for i in range(len(parts)))
    return out


def _left(rel: str, now: _Seen, was: _Seen | None, source: str, defined: set[str]
          ) -> Iterator[Unmapped]:
    """The CUDA names still in translated file ``rel``, at their line in the original (the n-th
    use of a name in the output is the n-th in the source: hipify leaves it as it was)."""
    return (u for u, _ in _uses(rel, now, was, source, defined))


def _uses(rel: str, now: _Seen, was: _Seen | None, source: str, defined: set[str]
          ) -> Iterator[tuple[Unmapped, int]]:
    """``_left``'s uses, each with its line in the translated file."""
    for name, lines in now.names.items():
        if name in defined:
            continue
        old = was.names.get(name, []) if was is not None else []
        for i, line in enumerate(lines):
            yield (Unmapped(source, old[i], name) if i < len(old)
                   else Unmapped(rel, line, name)), line


def _order(u: Unmapped) -> tuple[str, int, str]:
    return (u.file, u.line, u.symbol)


def _judge(plan: Plan, step: Hipify, ctx: Context, tree: Path, prefix: str, files: list[str],
           scan: list[str], log_path: Path) -> preprocessed.Live:
    """What the build compiles of ``files`` (relative to project_dir), by the preprocessor
    over the translated units among ``scan``, with the recipe's defines and include dirs."""
    hipc = ctx.host.compiler
    dirs = ["", prefix.rstrip("/"), *(prefix + d for d in step.header_include_dirs),
            *step.include_dirs]
    return preprocessed.judge(
        tree, [prefix + f for f in files],
        [prefix + u for u in scan if u.endswith(preprocessed.UNIT_SUFFIXES)],
        compiler=hipc.path if hipc is not None else None,
        flags=hipc.flags if hipc is not None else (), archs=plan.archs, defines=step.defines,
        include_dirs=[d for d in dict.fromkeys(dirs) if d], scratch=ctx.log_dir,
        log_path=log_path, skip=SKIP_DIRS)


def _log(log_path: Path, report: HipifyReport) -> None:
    with open(log_path, "a", encoding="utf-8") as f:
        f.write(f"# hipify ({report.tool}): {len(report.changed)} file(s) changed\n")
        for rel in report.changed:
            f.write(f"changed: {rel}\n")
        for old, new in report.renamed:
            f.write(f"renamed: {old} -> {new}\n")
        for u in report.unmapped:
            f.write(f"unmapped: {u}\n")
        for u in report.not_compiled:
            f.write(f"not compiled: {u}\n")
        if report.not_judged:
            f.write(f"not judged: {report.not_judged}\n")
