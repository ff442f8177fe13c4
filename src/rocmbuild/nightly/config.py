"""``nightly.toml`` -> ``NightlyConfig``: the matrix (expanded to cells), where to publish, the
reports, retention, the executor and the optional webhook. Every problem is one UsageError line
naming the file and key (``nightly.toml: matrix[2].archs: ...``) with a hint.

Relative paths in the file are relative to the file's directory.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmbuild.core.errors import UsageError
from rocmbuild.nightly.model import CELL_ID, Cell

if TYPE_CHECKING:
    from rocmbuild.nightly.slurm.settings import SlurmSettings

# Nothing of rocmbuild.publish at import time (it is heavy): a second nightly must be refused
# within a second, and the command takes the lock after reading only this module.
DEFAULT_STAGE = "stable"
"""publish.static_index.DEFAULT_STAGE (a unit test keeps them equal)."""

MAX_BYTES = 1 << 20  # a config file is small
MAX_CELLS = 1000
DEFAULT_PYPI = "https://pypi.org/simple/"
DEFAULT_TIMEOUT_S = 6 * 3600
DEFAULT_HISTORY = 30

_KEYS: dict[str, tuple[str, ...]] = {
    "": ("matrix", "publish", "reports", "retention", "executor", "notify", "workdir",
         "cache_dir", "pypi"),
    "matrix": ("recipes", "variants", "sources", "archs", "follow", "timeout", "options",
               "stacks"),
    "publish": ("index", "stage", "promote_to"),
    "reports": ("dir", "history"),
    "retention": ("max_size", "keep_days"),
    "executor": ("kind",),  # and slurm.SETTING_KEYS (read when a config is checked)
    "notify": ("url",),
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)", re.I)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class ExecutorConfig:
    kind: str = "local"
    """``local`` (cells one after another on this machine) or ``slurm`` (an sbatch array)."""
    slurm: SlurmSettings | None = None
    """The ``[executor]`` table's Slurm settings (``slurm.settings_from_table``: one place
    defines the keys); None only in a config built by hand."""

    @property
    def gpu_partition(self) -> str:
        return (self.slurm.gpu_partition or "") if self.slurm else ""

    @property
    def time_s(self) -> int | None:
        """Slurm: the partition's time limit; every cell's timeout stays below it."""
        return self.slurm.max_time_s if self.slurm else None


@dataclass(frozen=True)
class NightlyConfig:
    path: Path
    cells: tuple[Cell, ...]
    index: str
    """A directory (a static index with stages) or a server URL (may carry credentials)."""
    reports: Path
    workdir: Path
    cache_dir: Path | None = None
    stage: str = "staging"
    promote_to: str = DEFAULT_STAGE
    history: int = DEFAULT_HISTORY
    max_size: int | None = None
    keep_days: float | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    notify_url: str | None = None
    """A secret (a webhook URL often carries a token): never printed, logged or reported."""
    pypi: str = DEFAULT_PYPI
    """The simple index (PEP 691 JSON) that ``follow = true`` sdist cells ask."""

    def __repr__(self) -> str:
        from rocmbuild.publish.target import redact

        return (f"NightlyConfig(path={self.path!s}, cells={len(self.cells)}, "
                f"index={redact(self.index)!r}, notify_url={'***' if self.notify_url else None})")

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise UsageError(f"--only/--cell: no cell {cell_id!r} in {self.path.name}",
                         hint="cells: " + ", ".join(c.id for c in self.cells[:20]))


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    def fail(self, key: str, what: str, hint: str) -> UsageError:
        return UsageError(f"{self.name}: {key}: {what}", hint=hint)

    def table(self, data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        v = data.get(key, {})
        if not isinstance(v, dict):
            raise self.fail(_join(where, key), f"expected a table, got {_kind(v)}",
                            hint=f"write [{_join(where, key)}] with its keys under it")
        self.known(v, key, _join(where, key))
        return v

    def known(self, data: Mapping[str, Any], section: str, where: str) -> None:
        allowed = _KEYS[section]
        if section == "executor":
            from rocmbuild.nightly.slurm.settings import SETTING_KEYS

            allowed = (*allowed, *SETTING_KEYS)
        for k in data:
            if k not in allowed:
                raise self.fail(_join(where, k), "unknown key",
                                hint="known keys: " + ", ".join(allowed) + " (docs/nightly.md)")

    def text(self, data: Mapping[str, Any], key: str, where: str, default: str | None = None,
             secret: bool = False) -> str | None:
        v = data.get(key, default)
        if v is None or isinstance(v, str):
            if isinstance(v, str) and not v.strip():
                raise self.fail(_join(where, key), "is empty", hint="give a value or leave the "
                                "key out")
            return v
        shown = "a value" if secret else repr(v)
        raise self.fail(_join(where, key), f"expected a string, got {shown} ({_kind(v)})",
                        hint="quote it: key = \"...\"")

    def strings(self, data: Mapping[str, Any], key: str, where: str,
                default: list[str] | None = None) -> list[str]:
        v = data.get(key, default)
        full = _join(where, key)
        if v is None:
            raise self.fail(full, "missing", hint=f'e.g. {key} = ["..."]')
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not v or not all(isinstance(s, str) and s.strip()
                                                        for s in v):
            raise self.fail(full, f"expected a non-empty list of strings, got {v!r}",
                            hint=f'e.g. {key} = ["{(default or ["..."])[0]}"]')
        if len(set(v)) != len(v):
            raise self.fail(full, f"lists a value twice: {v!r}", hint="list each value once")
        return v

    def number(self, data: Mapping[str, Any], key: str, where: str) -> float | None:
        v = data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise self.fail(_join(where, key), f"expected a number >= 0, got {v!r}",
                            hint=f"e.g. {key} = 14")
        return float(v)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(v: object) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def parse_duration(text: str) -> int | None:
    """``"90m"``, ``"2h"``, ``"1d"``, ``"3600"`` (seconds) -> seconds; None when malformed or 0."""
    m = _DURATION.fullmatch(text.strip())
    if not m:
        return None
    seconds = int(float(m.group(1)) * _UNITS[m.group(2)])
    return seconds if seconds > 0 else None


def parse_size(text: str) -> int | None:
    """``"200G"``, ``"512M"``, ``"1.5T"``, ``"1000"`` (bytes) -> bytes (binary units); None when
    malformed."""
    m = _SIZE.fullmatch(text.strip())
    if not m or (m.group(3) and m.group(3).upper() not in ("B", "IB")):
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def cell_id(recipe: str, variant: str | None, source: str, arch: str) -> str:
    """``flash-attn.triton.pypi.gfx942``; ``gfx90a,gfx942`` reads ``gfx90a-gfx942``."""
    stem = Path(recipe).stem if recipe.endswith(".toml") else recipe
    parts = [stem, variant or "default", source, arch.replace(",", "-").replace(":", "_")]
    return ".".join(parts).lower()


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p)


def _matrix(r: _Reader, entries: object, base: Path) -> tuple[Cell, ...]:
    if not isinstance(entries, list) or not entries:
        raise r.fail("matrix", "expected one or more [[matrix]] tables",
                     hint='add [[matrix]] with recipes = ["hip-attention-probe"] and '
                     'archs = ["gfx942"]')
    cells: dict[str, Cell] = {}
    for i, entry in enumerate(entries):
        where = f"matrix[{i}]"
        if not isinstance(entry, dict):
            raise r.fail(where, f"expected a table, got {_kind(entry)}",
                         hint="write each entry as [[matrix]]")
        r.known(entry, "matrix", where)
        stacks = r.strings(entry, "stacks", where, []) if "stacks" in entry else []
        recipes = r.strings(entry, "recipes", where) if "recipes" in entry or not stacks else []
        variants: list[str | None] = list(r.strings(entry, "variants", where, ["default"]))
        sources = r.strings(entry, "sources", where, ["default"])
        archs = r.strings(entry, "archs", where)
        for a in archs:
            if not re.fullmatch(r"gfx[0-9a-z]+(:[a-z+-]+)*(,gfx[0-9a-z]+(:[a-z+-]+)*)*", a):
                raise r.fail(f"{where}.archs", f"{a!r} is not a gfx target list",
                             hint='one string per cell, e.g. archs = ["gfx942", '
                             '"gfx90a,gfx942"] (no "native": a nightly must say what it '
                             "builds)")
        follow = entry.get("follow", False)
        if not isinstance(follow, bool):
            raise r.fail(f"{where}.follow", f"expected true or false, got {follow!r}",
                         hint="follow = true builds what upstream has now; false the recipe's "
                         "pin")
        timeout_s = DEFAULT_TIMEOUT_S
        if "timeout" in entry:
            t = entry["timeout"]
            parsed = parse_duration(t) if isinstance(t, str) else (
                int(t) if isinstance(t, int) and not isinstance(t, bool) and t > 0 else None)
            if parsed is None:
                raise r.fail(f"{where}.timeout", f"{t!r} is not a duration",
                             hint='e.g. timeout = "2h" (s, m, h, d; a bare number is seconds)')
            timeout_s = parsed
        opts = entry.get("options", {})
        if not isinstance(opts, dict) or not all(
                isinstance(k, str) and _NAME.fullmatch(k) and isinstance(v, str | int | bool)
                for k, v in opts.items()):
            raise r.fail(f"{where}.options", "expected a table of name = value",
                         hint='e.g. options = { dropout = "off" }')
        options = tuple(sorted((k, str(v).lower() if isinstance(v, bool) else str(v))
                               for k, v in opts.items()))
        for recipe, variant, source, arch in itertools.product(recipes, variants, sources,
                                                               archs):
            if recipe.endswith(".toml"):
                recipe = str(_resolve(base, recipe))
            v = None if variant == "default" else variant
            cid = cell_id(recipe, v, source, arch)
            if not CELL_ID.fullmatch(cid):
                raise r.fail(f"{where}.recipes", f"{cid!r} is not a usable cell id",
                             hint="recipe, variant and source names of letters, digits, ., _ "
                             "and -")
            if cid in cells:
                raise r.fail(where, f"cell {cid} is already in the matrix",
                             hint="each recipe x variant x source x archs once")
            _add(r, cells, where, Cell(id=cid, recipe=recipe, variant=v, source=source,
                                       arch=arch, follow=follow, options=options,
                                       timeout_s=timeout_s))
        for stack in stacks:
            for c in _stack_cells(r, stack, f"{where}.stacks", base, archs):
                _add(r, cells, where, replace(c, follow=follow, timeout_s=timeout_s))
    return tuple(cells.values())


def _add(r: _Reader, cells: dict[str, Cell], where: str, cell: Cell) -> None:
    if cell.id in cells:
        raise r.fail(where, f"cell {cell.id} is already in the matrix",
                     hint="each recipe x variant x source x archs once (a stack's members too)")
    cells[cell.id] = cell
    if len(cells) > MAX_CELLS:
        raise r.fail("matrix", f"more than {MAX_CELLS} cells",
                     hint="split the matrix over several configs")


def _stack_cells(r: _Reader, name: str, where: str, base: Path, archs: list[str]
                 ) -> list[Cell]:
    """The cells of stack ``name`` (a stack name or a .toml path, docs/stacks.md): one per
    member and arch set, in the group ``<stack>.<archs>``, promoted only all together."""
    from rocmbuild.core.errors import RecipeError
    from rocmbuild.recipe import stack as stackfile

    try:
        st = stackfile.load_stack(stackfile.find(
            str(_resolve(base, name)) if name.endswith(".toml") else name))
    except RecipeError as exc:
        raise r.fail(where, f"stack {name!r}: {exc.problems[0] if exc.problems else exc}",
                     hint=exc.hint or "fix the stack file") from None
    except UsageError as exc:
        raise r.fail(where, exc.message, hint=exc.hint or "name a stack file") from None
    out = []
    for arch in archs:
        group = f"{st.name}.{arch.replace(',', '-').replace(':', '_')}".lower()
        for m in st.all_members:
            if m.release:
                raise r.fail(where, f"stack {st.name}: {m.key}.release: a nightly cell builds "
                             "the line the host picks", hint="drop the release from the stack "
                             "for the nightly, or list the recipe in recipes")
            recipe = str(m.recipe.path.absolute())  # the file the stack named, as a path
            cid = cell_id(recipe, m.variant, m.source, arch)
            if not CELL_ID.fullmatch(cid):
                raise r.fail(where, f"stack {st.name}: {cid!r} is not a usable cell id",
                             hint="recipe, variant and source names of letters, digits, ., _ "
                             "and -")
            out.append(Cell(id=cid, recipe=recipe,
                            variant=m.variant, source=m.source, arch=arch,
                            options=tuple(sorted(m.options)), group=group))
    return out


def workdir_of(path: Path) -> Path:
    """The workspace ``path`` names, read before the full check (the command takes the lock
    first); ``load`` reports whatever is wrong with the file."""
    try:
        data = tomllib.loads(path.read_bytes()[:MAX_BYTES].decode("utf-8"))
        w = data.get("workdir", "build")
        if isinstance(w, str) and w.strip():
            return _resolve(path.absolute().parent, w).absolute()
    except (OSError, ValueError):  # UnicodeDecodeError and TOMLDecodeError are ValueErrors
        pass
    return load(path).workdir


def load(path: Path) -> NightlyConfig:
    """Read and check ``path``; raise UsageError naming the key on the first problem."""
    from rocmbuild.publish.target import parse_index, redact

    r = _Reader(path)
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise UsageError(f"--config: cannot read {path}: {exc.strerror or exc}",
                         hint="give the path of a nightly.toml (docs/nightly.md has a sample)"
                         ) from exc
    if len(raw) > MAX_BYTES:
        raise r.fail("(file)", f"larger than {MAX_BYTES} bytes", hint="is it a nightly.toml?")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise r.fail("(file)", f"not valid TOML: {exc}",
                     hint="check the line it names (docs/nightly.md has a sample)") from exc
    r.known(data, "", "")
    base = path.absolute().parent
    cells = _matrix(r, data.get("matrix"), base)

    pub = r.table(data, "publish", "")
    index = r.text(pub, "index", "publish", secret=True)
    if index is None:
        raise r.fail("publish.index", "missing",
                     hint='where to publish: a directory (index = "/srv/wheels") or a server URL')
    try:
        target = parse_index(index, f"{path.name}: publish.index")
    except UsageError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None
    if target.path is not None:
        index = str(target.path if target.path.is_absolute() else base / target.path)
    stage = r.text(pub, "stage", "publish", "staging") or "staging"
    promote_to = r.text(pub, "promote_to", "publish", DEFAULT_STAGE) or DEFAULT_STAGE
    for key, name in (("stage", stage), ("promote_to", promote_to)):
        if not _NAME.fullmatch(name):
            raise r.fail(f"publish.{key}", f"{name!r} is not a stage name",
                         hint="letters, digits, ., _ and -, e.g. staging")
    if stage == promote_to:
        raise r.fail("publish.promote_to", f"is the staging stage {stage!r} itself",
                     hint="stage wheels in one stage and serve them from another")

    rep = r.table(data, "reports", "")
    reports = _resolve(base, r.text(rep, "dir", "reports", "reports") or "reports")
    history = rep.get("history", DEFAULT_HISTORY)
    if isinstance(history, bool) or not isinstance(history, int) or not 1 <= history <= 10000:
        raise r.fail("reports.history", f"expected a number of runs 1..10000, got {history!r}",
                     hint="e.g. history = 30")

    ret = r.table(data, "retention", "")
    max_size = None
    if "max_size" in ret:
        ms = ret["max_size"]
        max_size = parse_size(ms) if isinstance(ms, str) else (
            ms if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0 else None)
        if max_size is None:
            raise r.fail("retention.max_size", f"{ms!r} is not a size",
                         hint='e.g. max_size = "200G" (K, M, G, T: binary units)')
    keep_days = r.number(ret, "keep_days", "retention")

    ex = r.table(data, "executor", "")
    kind = r.text(ex, "kind", "executor", "local") or "local"
    if kind not in ("local", "slurm"):
        raise r.fail("executor.kind", f"{kind!r} is not local or slurm",
                     hint='kind = "local" runs the cells here; "slurm" submits an sbatch array')
    from rocmbuild.nightly.slurm.settings import settings_from_table

    slurm = settings_from_table({k: v for k, v in ex.items() if k != "kind"},
                                f"{path.name}: executor", base)
    executor = ExecutorConfig(kind=kind, slurm=slurm)
    time_s = slurm.max_time_s
    if time_s is not None:
        for c in cells:
            if c.timeout_s >= time_s:
                raise r.fail("executor.time", f"cell {c.id}'s timeout ({c.timeout_s}s) is not "
                             f"below the job's time ({time_s}s)",
                             hint="give the matrix entry a shorter timeout or the job more time")

    notify = r.table(data, "notify", "")
    url = r.text(notify, "url", "notify", secret=True)
    if url is not None and not re.match(r"https?://[^\s]+$", url):
        raise r.fail("notify.url", f"{redact(url.split('?')[0])[:40]!r}... is not an http(s) URL",
                     hint="the webhook's URL, e.g. https://hooks.example.com/...; it is a "
                     "secret and never printed")

    workdir = _resolve(base, r.text(data, "workdir", "", "build") or "build")
    cache = r.text(data, "cache_dir", "")
    pypi = r.text(data, "pypi", "", DEFAULT_PYPI) or DEFAULT_PYPI
    if not re.match(r"https?://\S+$", pypi):
        raise r.fail("pypi", f"{redact(pypi)!r} is not an http(s) URL",
                     hint="the simple index's URL, e.g. https://pypi.org/simple/")
    return NightlyConfig(
        path=path.absolute(), cells=cells, index=index, reports=reports, workdir=workdir,
        cache_dir=_resolve(base, cache) if cache else None, stage=stage,
        promote_to=promote_to, history=history, max_size=max_size, keep_days=keep_days,
        executor=executor, notify_url=url, pypi=pypi.rstrip("/") + "/")
