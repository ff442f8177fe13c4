"""``rocmbuild verify <wheel>``: rebuild a wheel from its own provenance and compare the bytes.

The wheel's ``*.dist-info/rocmbuild.json`` names the recipe and its hash, the source pin, the
patches, the variant, the archs, the build tag and the toolchain. ``plan_for`` finds the recipe
(the build's search path, or ``--recipe``), refuses when its hash differs (RecipeError) and
renders it for this host; ``check_inputs`` refuses when the provenance contradicts itself
(``forged``: edited after the build, NotReproduced), when the rendered inputs differ from the
wheel's (the toolchain, torch, rocmbuild's version: ToolchainError naming the first one), or when
only a recipe pin does (RecipeError).
A wheel without provenance, or with a damaged one, is a UsageError naming the key.
``verify`` rebuilds with ``--force`` in a temporary workspace (sharing only the user's downloads
and git mirrors, never its wheel entries) and ``compare`` reports "reproduced" or the
first differing members (names, sizes, sha256; diffoscope's output, trimmed, when it is
installed). ``require_reproduced`` raises NotReproduced (exit 13) for a difference.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rocmbuild import __version__
from rocmbuild.artifacts.wheel import PROVENANCE, WheelFormatError, WheelInfo, read_wheel
from rocmbuild.core import log, options
from rocmbuild.core.config import Workspace
from rocmbuild.core.errors import NotReproduced, RecipeError, ToolchainError, UsageError
from rocmbuild.core.run import run as sh
from rocmbuild.host.detect import Host
from rocmbuild.pipeline import build as pipeline
from rocmbuild.plan import planning, render
from rocmbuild.plan.key import key_of_inputs
from rocmbuild.plan.model import Plan
from rocmbuild.recipe import load, search
from rocmbuild.stages.context import Context

SHOWN = 10
"""How many differing members a report lists."""
DIFFOSCOPE_LINES = 60


@dataclass(frozen=True)
class MemberDiff:
    """One member that differs: absent on one side (None), other bytes, or other zip fields."""

    name: str
    size: int | None  # in the given wheel
    rebuilt_size: int | None
    sha256: str | None
    rebuilt_sha256: str | None
    what: str  # "content", "only in the wheel", "only in the rebuild", "zip fields: ..."

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "size": self.size,
                "rebuilt_size": self.rebuilt_size, "sha256": self.sha256,
                "rebuilt_sha256": self.rebuilt_sha256}


@dataclass(frozen=True)
class Verification:
    wheel: Path
    sha256: str
    rebuilt_name: str
    rebuilt_sha256: str
    differences: tuple[MemberDiff, ...] = ()
    more: int = 0  # differing members not listed
    diffoscope: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reproduced(self) -> bool:
        return self.sha256 == self.rebuilt_sha256 and self.wheel.name == self.rebuilt_name

    def to_json(self) -> dict[str, Any]:
        return {
            "wheel": str(self.wheel),
            "status": "reproduced" if self.reproduced else "differs",
            "sha256": self.sha256,
            "rebuilt": self.rebuilt_name,
            "rebuilt_sha256": self.rebuilt_sha256,
            "differences": [d.to_json() for d in self.differences],
            "more_differences": self.more,
            "notes": list(self.notes),
            "diffoscope": self.diffoscope,
        }


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# provenance key -> (check, what it must be): what verify reads from the (untrusted) wheel
_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "recipe": (lambda v: isinstance(v, str) and _NAME.fullmatch(v) is not None,
               "a recipe name (letters, digits, '.', '_', '-'; no path)"),
    "recipe_sha256": (lambda v: isinstance(v, str), "a string"),
    "plan": (lambda v: isinstance(v, dict), "a table"),
    # (empty for a wheel without device code: provenance() checks its rocm_runtime says so)
    "archs": (lambda v: isinstance(v, list) and all(
        isinstance(a, str) and re.fullmatch(r"[A-Za-z0-9:+_-]+", a) for a in v),
        "a list of gfx targets"),
    "variant": (lambda v: v is None or isinstance(v, str), "a string"),
    "gpu_vendor": (lambda v: v in (None, *options.GPU_VENDORS), " or ".join(options.GPU_VENDORS)),
    "rocm_version": (lambda v: v is None or isinstance(v, str), "a string"),
    "build_tag": (lambda v: v is None or (isinstance(v, str) and re.fullmatch(
        options.BUILD_TAG, v) is not None), "a build tag"),
}


def provenance(path: Path) -> tuple[WheelInfo, dict[str, Any]]:
    """The wheel and its provenance, each field verify reads checked (UsageError naming it)."""
    try:
        info = read_wheel(path)
    except WheelFormatError as exc:
        raise UsageError(exc.message, hint=exc.hint) from exc
    prov = info.provenance
    where = f"{path}: *.dist-info/{PROVENANCE}"
    if prov is None:
        raise UsageError(f"{path}: no rocmbuild provenance (*.dist-info/{PROVENANCE})",
                         hint="only wheels built by rocmbuild can be rebuilt from their "
                         "provenance")
    runtime = prov.get("rocm_runtime")
    for key, (ok, what) in _FIELDS.items():
        if not ok(prov.get(key)) or (key == "archs" and not prov[key] and not (
                isinstance(runtime, dict) and runtime.get("mode") == "none")):
            raise UsageError(f"{where}: {key}: must be {what}"
                             + (" (empty only with rocm_runtime none)" if key == "archs" else ""),
                             hint="the wheel's provenance is damaged or not rocmbuild's; "
                             "rebuild it with `rocmbuild build`")
    return info, prov


def plan_for(prov: dict[str, Any], recipe: str | None, rocm_path: str | None,
             hip_compiler: str | None, cache: Path) -> tuple[Plan, Host]:
    """The recipe named in the provenance (or ``recipe``), checked against its recorded hash,
    planned for this host (``planning.plan_for``, with what ``cache`` learned of its units) with
    the wheel's variant, source, archs, ROCm label and build tag."""
    path = search.find_recipe(recipe or prov["recipe"])  # a plain name: the search path only
    rec = load.load(path)
    if rec.raw_sha256 != prov.get("recipe_sha256"):
        raise RecipeError(
            [f"{path}: the recipe's sha256 is {rec.raw_sha256[:12]}, the wheel was built from "
             f"{str(prov.get('recipe_sha256'))[:12]}"],
            hint="check out the recipe the wheel was built from (its hash is in the wheel's "
            f"{PROVENANCE}), or name it with --recipe")
    pplan = prov["plan"]
    source = pplan.get("source_name")
    # the wheel's [options] values (render checks them again: the provenance is untrusted)
    raw_opts = pplan.get("options")
    opts = tuple((str(k), str(v)) for k, v in raw_opts.items()) if isinstance(
        raw_opts, dict) else ()
    target = render.Target(
        arch=",".join(prov["archs"]) or "native",  # none: arch-independent, needs no GPU
        variant=prov.get("variant"),
        source=source if isinstance(source, str) else "default",
        # --rocm-version only when the build was given it: how the version was found is
        # recorded in the wheel, so it must be found the same way again
        rocm_version=prov.get("rocm_version") if prov.get("rocm_version_from") == "flag"
        else None,
        gpu_vendor=str(prov.get("gpu_vendor") or "amd"),
        build_tag=prov.get("build_tag") or None,
        options=opts,
        release=str(pplan["release"]) if pplan.get("release") else None,
    )
    rocm = pplan.get("rocm")
    compiler = rocm.get("compiler") if isinstance(rocm, dict) else None
    compiler_path = compiler.get("path") if isinstance(compiler, dict) else None
    # the wheel's compiler when this host has it; else detection, and check_inputs names the
    # difference
    given = options.resolve("hip_compiler", hip_compiler) or (
        compiler_path if isinstance(compiler_path, str) and Path(compiler_path).is_file()
        else None)
    planned = planning.plan_for(rec, target, planning.Detect(
        rocm_path=options.resolve("rocm_path", rocm_path), hip_compiler=given), cache)
    return planned.plan, planned.host


def _first_difference(here: object, there: object, where: str = "") -> str | None:
    """The first key path whose values differ, as ``key: here vs in the wheel``."""
    if isinstance(here, dict) and isinstance(there, dict):
        for k in sorted(set(here) | set(there)):
            found = _first_difference(here.get(k), there.get(k), f"{where}.{k}" if where else k)
            if found:
                return found
        return None
    if here != there:
        return f"{where}: {repr(here)[:80]} here, {repr(there)[:80]} in the wheel"
    return None


# What the wheel's provenance records twice: at its top and in its plan (Plan.inputs_json)
_TWICE = ("recipe_sha256", "source", "cache_key", "archs", "variant", "package")
# The plan's keys that name the recipe's pins: the host decides none of them (a patch or
# download that a `when` selects by the host's ROCm follows the rocm key, compared first)
_PINS = ("recipe_sha256", "source", "patches", "downloads", "depends", "version", "package")


def forged(prov: dict[str, Any], rocmbuild_version: str) -> str | None:
    """Where the provenance contradicts itself (None: nowhere): a key recorded twice (at the top
    and in the plan) with two values, or, written by this rocmbuild version, a plan that does
    not hash to the cache key it records (``key.key_of_inputs``; a ``path`` source's key also
    hashes its tree). A build writes both from one plan: either means the file was edited after
    the build. A plan without the key is damaged, not forged: the later checks name it."""
    plan = prov["plan"]
    for name in (*_TWICE, "build_tag"):
        top, inner = prov.get(name), plan.get(name)
        if name == "build_tag":
            top, inner = top or None, inner or None  # the plan leaves out an empty one
        elif name not in plan:
            continue
        if top != inner:
            return f"{name} is {repr(top)[:80]}, its plan.{name} {repr(inner)[:80]}"
    if prov.get("rocmbuild_version") != rocmbuild_version:
        return None  # another version keys otherwise: check_inputs refuses it
    key = key_of_inputs(plan)
    if key is not None and key != plan.get("cache_key"):
        return (f"its plan hashes to cache key {key[:12]}, not to the "
                f"{str(plan.get('cache_key'))[:12]} it records")
    return None


def check_inputs(plan: Plan, prov: dict[str, Any], rocmbuild_version: str,
                 wheel: Path | None = None) -> None:
    """Refuse when this host would build from other inputs than the wheel's: ToolchainError
    naming rocmbuild's version or the first differing key the host decides (compiler, torch,
    Python, ROCm), RecipeError when only a recipe pin differs (the recipe with the recorded hash
    does not pin what the wheel records: a nightly's followed upstream, or an edited
    provenance)."""
    name = wheel.name if wheel is not None else "the wheel"
    if prov.get("rocmbuild_version") != rocmbuild_version:
        raise ToolchainError(
            f"rocmbuild {rocmbuild_version} here, the wheel was built by rocmbuild "
            f"{prov.get('rocmbuild_version')}",
            hint="verify with the rocmbuild version that built it (its tag stage decides bytes)")
    if plan.cache_key == prov.get("cache_key"):
        return
    here, there = plan.inputs_json(), prov["plan"]
    rest = (*_PINS, "cache_key")  # the key differs: what it hashes is what tells why
    host_diff = _first_difference({k: v for k, v in here.items() if k not in rest},
                                  {k: v for k, v in there.items() if k not in rest})
    pin_diff = _first_difference({k: here.get(k) for k in _PINS},
                                 {k: there.get(k) for k in _PINS})
    if pin_diff and not host_diff:
        raise RecipeError(
            [f"{name}: {plan.recipe} (sha256 {plan.recipe_sha256[:12]}) does not pin what "
             f"the wheel records: {pin_diff}"],
            hint="verify rebuilds from the recipe's own pins: a wheel of a nightly's followed "
            "upstream, or one whose provenance was edited, cannot be verified with it")
    raise ToolchainError(
        "this host would build from other inputs: " + (host_diff or "the cache key differs"),
        hint="verify on a host with the wheel's toolchain (compiler, torch, Python, ROCm): "
        f"see `rocmbuild plan` and the wheel's {PROVENANCE}")


@contextmanager
def scratch(cache: Path) -> Iterator[Workspace]:
    """A temporary workspace whose cache shares the user's downloads and git mirrors (read and
    filled, never its wheel entries: a rebuild must not replace the user's cached wheel)."""
    root = Path(tempfile.mkdtemp(prefix="rocmbuild-verify-"))
    try:
        ws = Workspace(root=root / "build", cache=root / "cache")
        ws.cache.mkdir(parents=True)
        for shared in ("downloads", "git"):
            (cache / shared).mkdir(parents=True, exist_ok=True)
            (ws.cache / shared).symlink_to((cache / shared).absolute())
        yield ws
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _members(path: Path) -> dict[str, tuple[zipfile.ZipInfo, str]]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: (i, hashlib.sha256(zf.read(i)).hexdigest()) for i in zf.infolist()}


def compare(wheel: Path, sha256: str, rebuilt: Path, rebuilt_sha256: str) -> Verification:
    """The two wheels' differing members (content first, then zip fields and order); the
    caller adds diffoscope's report (a process)."""
    base = Verification(wheel, sha256, rebuilt.name, rebuilt_sha256)
    if base.reproduced:
        return base
    notes = []
    if wheel.name != rebuilt.name:
        notes.append(f"file name: {wheel.name} vs rebuilt {rebuilt.name}")
    a, b = _members(wheel), _members(rebuilt)
    diffs: list[MemberDiff] = []
    for name in sorted(set(a) | set(b)):
        ia, ha = a.get(name, (None, None))
        ib, hb = b.get(name, (None, None))
        if ia is None or ib is None:
            what = "only in the wheel" if ib is None else "only in the rebuild"
        elif ha != hb:
            what = "content"
        else:
            fields = [f for f in ("date_time", "external_attr", "compress_type", "create_system",
                                  "extra", "comment") if getattr(ia, f) != getattr(ib, f)]
            if not fields:
                continue
            what = "zip fields: " + ", ".join(fields)
        diffs.append(MemberDiff(name, ia.file_size if ia else None, ib.file_size if ib else None,
                                ha, hb, what))
    # content first (RECORD last: it differs whenever another member does), stable otherwise
    diffs.sort(key=lambda d: (d.what != "content", d.name.endswith(".dist-info/RECORD")))
    if not diffs and list(a) != list(b):
        notes.append("the members are the same but stored in another order")
    elif not diffs:
        notes.append("every member is the same: the zip's own fields differ")
    return Verification(wheel, sha256, rebuilt.name, rebuilt_sha256, tuple(diffs[:SHOWN]),
                        max(0, len(diffs) - SHOWN), None, tuple(notes))


def diffoscope(a: Path, b: Path) -> str | None:
    """diffoscope's text report, trimmed, when diffoscope is installed."""
    exe = shutil.which("diffoscope")
    if exe is None:
        return None
    res = sh([exe, "--text", "-", "--no-progress", str(a), str(b)], capture=True, check=False,
             timeout=600)
    lines = res.output.splitlines()
    more = len(lines) - DIFFOSCOPE_LINES
    return "\n".join(lines[:DIFFOSCOPE_LINES] + ([f"... ({more} more lines)"] if more > 0 else []))


def require_reproduced(result: Verification) -> None:
    if result.reproduced:
        return
    first = result.differences[0] if result.differences else None
    raise NotReproduced(
        f"{result.wheel.name}: the rebuild differs (sha256 {result.rebuilt_sha256[:12]}, the "
        f"wheel {result.sha256[:12]})"
        + (f"; first: {first.name} ({first.what})" if first else
           (f"; {result.notes[0]}" if result.notes else "")),
        hint="a build input that rocmbuild does not pin changed (compare the listed members; "
        "docs/reproducible.md lists the known causes)")


def verify(wheel: Path, cache: Path, recipe: str | None = None, rocm_path: str | None = None,
           hip_compiler: str | None = None) -> Verification:
    """Rebuild ``wheel`` from its provenance in a temporary workspace and compare."""
    info, prov = provenance(wheel)
    why = forged(prov, __version__)
    if why:  # before the recipe is looked up: a forged recipe_sha256 is not "another recipe"
        raise NotReproduced(
            f"{wheel.name}: its provenance ({PROVENANCE}) was edited after the build: {why}",
            hint="this wheel is not what its provenance says; nothing was rebuilt. Get the "
            "wheel again from where it was built, or rebuild it with `rocmbuild build`")
    plan, host = plan_for(prov, recipe, rocm_path, hip_compiler, cache)
    check_inputs(plan, prov, __version__, wheel)
    log.info(f"rebuilding {info.filename} from {plan.recipe} ({plan.variant}, "
             f"{', '.join(plan.archs)}) @ {plan.pin} in a temporary workspace")
    with scratch(cache) as ws:
        ctx = Context(ws=ws, log_dir=ws.logs / plan.recipe / plan.short_key,
                      wheel_dir=ws.wheels, host=host, force=True)
        result = pipeline.build(plan, ctx)
        found = compare(wheel, info.sha256, result.wheel, result.sha256)
        if found.reproduced:
            return found
        return replace(found, diffoscope=diffoscope(wheel, result.wheel))
