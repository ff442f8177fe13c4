"""``nightly.toml`` -> ``NightlyConfig``: the matrix (expanded to cells), where to publish, the
reports, retention, the executor and the optional webhook. Every problem is one UsageError line
naming the file and key (``nightly.toml: matrix[2].archs: ...``) with a hint.

Relative paths in the file are relative to the file's directory.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rocmbuild.core import fsutil, log, quantity, settings
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import matrix, userpath
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
DEFAULT_TIMEOUT_S = matrix.DEFAULT_TIMEOUT_S
DEFAULT_HISTORY = 30

_KEYS: dict[str, tuple[str, ...]] = {
    "": ("matrix", "publish", "reports", "retention", "executor", "notify", "workdir",
         "cache_dir", "pypi"),
    "matrix": matrix.KEYS,
    "publish": ("index", "stage", "promote_to"),
    "reports": ("dir", "history"),
    "retention": ("max_size", "keep_days"),
    "executor": ("kind",),  # and slurm.SETTING_KEYS (read when a config is checked)
    "notify": ("url",),
}


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
    sha256: str = ""
    """The sha256 of the bytes this config was read from: the controller writes it into the
    run's manifest, and a cell refuses a config whose bytes changed since (``cell.py``)."""

    def __repr__(self) -> str:
        return (f"NightlyConfig(path={self.path!s}, cells={len(self.cells)}, "
                f"index={log.redact(self.index, strict=True)!r}, "
                f"notify_url={'***' if self.notify_url else None})")

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise UsageError(f"--only/--cell: no cell {cell_id!r} in {self.path.name}",
                         hint="cells: " + ", ".join(c.id for c in self.cells[:20]))


T = TypeVar("T")


def _quantity(parse: Callable[[object], T]) -> settings.Check:
    """A check of one ``quantity`` parser (its BadQuantity: the problem)."""
    def check(v: Any, table: Mapping[str, Any], base: Path) -> T:
        try:
            return parse(v)
        except quantity.BadQuantity as exc:
            raise settings.Bad(str(exc)) from None
    return check


@dataclass(frozen=True)
class Retention:
    """``[retention]``: ``rocmbuild cache prune`` after each run; nothing set keeps all."""

    max_size: int | None = settings.setting(
        None, _quantity(quantity.size),
        hint='e.g. max_size = "200G" (K, M, G, T: binary units)')
    """The cache's size limit (K, M, G, T: binary units)."""
    keep_days: float | None = settings.setting(
        None, _quantity(quantity.days), hint="e.g. keep_days = 14 (0 or more; 0.5 is half a day)")
    """Entries not used for this many days go."""


def _webhook(v: Any, table: Mapping[str, Any], base: Path) -> str:
    if not isinstance(v, str):  # the value is never shown: a webhook URL carries a token
        raise settings.Bad(f"expected a string, got a value ({_kind(v)})",
                           'quote it: key = "..."')
    if not v.strip():
        raise settings.Bad("is empty", "give a value or leave the key out")
    problem = url_problem(v.strip())
    if problem:
        raise settings.Bad(f"the webhook URL {problem}")
    return v


@dataclass(frozen=True)
class Notify:
    """``[notify]``."""

    url: str | None = settings.setting(
        None, _webhook, hint="the webhook's URL, e.g. https://hooks.example.com/...; it is a "
        "secret and never printed")
    """A webhook POSTed the run's summary (a secret: never printed, logged or reported)."""


class _Reader(settings.Reader):
    """nightly.toml's problems (``settings.Reader``): a key of the wrong type, an unknown key or
    a bad list is kept and the reading goes on; a problem the rest cannot be read past raises
    (``fail``), and the error is always the first problem found."""

    def table(self, data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        v = data.get(key, {})
        if not isinstance(v, dict):
            self.bad(settings.join(where, key), f"expected a table, got {_kind(v)}",
                     hint=f"write [{settings.join(where, key)}] with its keys under it")
            return {}
        self.known_keys(v, key, settings.join(where, key))
        return v

    def known_keys(self, data: Mapping[str, Any], section: str, where: str) -> None:
        allowed = _KEYS[section]
        if section == "executor":
            from rocmbuild.nightly.slurm.settings import SETTING_KEYS

            allowed = (*allowed, *SETTING_KEYS)
        self.known(data, allowed, where,
                   hint="known keys: " + ", ".join(allowed) + " (docs/nightly.md)")

    def text(self, data: Mapping[str, Any], key: str, where: str, default: str | None = None,
             secret: bool = False) -> str | None:
        v = data.get(key, default)
        if v is None or isinstance(v, str):
            if isinstance(v, str) and not v.strip():
                raise self.fail(settings.join(where, key), "is empty",
                                hint="give a value or leave the key out")
            return v
        shown = "a value" if secret else repr(v)
        self.bad(settings.join(where, key), f"expected a string, got {shown} ({_kind(v)})",
                 hint="quote it: key = \"...\"")
        return default

    def path_key(self, data: Mapping[str, Any], key: str, where: str, base: Path,
                 default: str | None = None, directory: bool = True) -> Path | None:
        """A path key (``userpath.checked``); with ``directory``, a file standing where it or
        one of its parents should be a directory is refused too."""
        text = self.text(data, key, where, default)
        return None if text is None else self.checked_path(settings.join(where, key), text, base,
                                                           directory)

    def checked_path(self, key: str, text: str, base: Path, directory: bool = False) -> Path:
        try:
            p = userpath.checked(text, base)
        except userpath.BadPath as exc:
            raise self.fail(key, str(exc), hint="write a plain path, absolute or relative to "
                            "the config file's directory") from None
        blocker = fsutil.in_the_way(p) if directory else None
        if blocker is not None:
            raise self.fail(key, f"{blocker} is a file, not a directory",
                            hint="name a directory (or move the file away)")
        return p


def _kind(v: object) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def cell_id(recipe: str, variant: str | None, source: str, arch: str) -> str:
    """``flash-attn.triton.pypi.gfx942``; ``gfx90a,gfx942`` reads ``gfx90a-gfx942``."""
    stem = Path(recipe).stem if recipe.endswith(".toml") else recipe
    parts = [stem, variant or "default", source, arch.replace(",", "-").replace(":", "_")]
    return ".".join(parts).lower()


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL a client can POST or GET (None: it is): said without
    the URL itself, which may carry a token."""
    from urllib.parse import urlsplit

    if re.search(r"[\s\x00-\x1f\x7f]", url):
        return "contains whitespace or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not 0..65535
    except ValueError:
        return "is not a URL (a bad host or port)"
    if parts.scheme.lower() not in ("http", "https"):
        return "is not an http(s) URL"
    if not parts.hostname:
        return "has no host"
    if port == 0:
        return "has port 0"
    return None


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
        r.known_keys(entry, "matrix", where)
        e = settings.model(matrix.Entry, entry, where, r, base, unknown=False,
                           order=matrix.CHECKED)
        recipes, stacks, archs = e.recipes, e.stacks, e.archs
        variants, sources, options = e.variants, e.sources, e.options
        follow, timeout_s = e.follow, e.timeout_s
        for recipe, variant, source, arch in itertools.product(recipes, variants, sources,
                                                               archs):
            if recipe.endswith(".toml"):
                recipe = str(r.checked_path(f"{where}.recipes", recipe, base))
            v = None if variant == "default" else variant
            cid = cell_id(recipe, v, source, arch)
            if not CELL_ID.fullmatch(cid):
                raise r.fail(f"{where}.recipes", f"{cid!r} is not a usable cell id",
                             hint="recipe, variant and source names of letters, digits, ., _ "
                             "and -")
            if cid in cells:
                raise r.fail(where, f"cell {cid} is already in the matrix, from "
                             f"matrix[{cells[cid].entry}]",
                             hint="each recipe x variant x source x archs once (options are "
                             "not in a cell's id: one set of option values per cell)")
            _add(r, cells, where, Cell(id=cid, recipe=recipe, variant=v, source=source,
                                       arch=arch, follow=follow, options=options,
                                       timeout_s=timeout_s, entry=i))
        for stack in stacks:
            for c in _stack_cells(r, stack, f"{where}.stacks", base, archs):
                _add(r, cells, where, replace(c, follow=follow, timeout_s=timeout_s, entry=i))
    return tuple(cells.values())


def _add(r: _Reader, cells: dict[str, Cell], where: str, cell: Cell) -> None:
    if cell.id in cells:
        raise r.fail(where, f"cell {cell.id} is already in the matrix, from "
                     f"matrix[{cells[cell.id].entry}]",
                     hint="each recipe x variant x source x archs once (a stack's members too)")
    cells[cell.id] = cell
    if len(cells) > MAX_CELLS:
        raise r.fail("matrix", f"more than {MAX_CELLS} cells",
                     hint="split the matrix over several configs")


def _stack_cells(r: _Reader, name: str, where: str, base: Path, archs: tuple[str, ...]
                 ) -> list[Cell]:
    """The cells of stack ``name`` (a stack name or a .toml path, docs/stacks.md): one per
    member and arch set, in the group ``<stack>.<archs>``, promoted only all together."""
    from rocmbuild.core.errors import RecipeError
    from rocmbuild.recipe import stack as stackfile

    try:
        st = stackfile.load_stack(stackfile.find(
            str(r.checked_path(where, name, base)) if name.endswith(".toml") else name))
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


def _unreadable(path: Path, exc: Exception) -> UsageError:
    """``--config``'s refusal of a file that cannot be read (``settings.read_bytes``)."""
    if isinstance(exc, fsutil.TooLarge):
        return UsageError(f"--config: {path}: {exc}", hint="is it a nightly.toml?")
    if isinstance(exc, fsutil.NotRegular):
        try:
            pipe = stat.S_ISFIFO(os.stat(path).st_mode)  # stat never blocks on a FIFO
        except OSError:
            pipe = False
        if pipe:
            return UsageError(f"--config: {path}: is a pipe, not a regular file",
                              hint="write the config to a file first and give its path "
                              "(process substitution <(...) gives a pipe, which is refused)")
        return UsageError(f"--config: {path}: {exc.strerror}",
                          hint="give the path of the nightly.toml file itself (not a link to "
                          "it, a directory or a device)")
    return UsageError(f"--config: cannot read {path}: {getattr(exc, 'strerror', '') or exc}",
                      hint="give the path of a nightly.toml file (docs/nightly.md has a sample)")


SECRET_KEYS = ("publish.index", "notify.url")  # may carry user:password@; never shown

TOML = settings.TomlKind(
    "a nightly config", MAX_BYTES, settings.first_line,
    {"syntax": "check the line it names (docs/nightly.md has a sample)",
     "control": "a nightly config holds printable text only: retype the key or value without "
                "it"},
    file_key="(file)", secret_ok=SECRET_KEYS, read_error=_unreadable,
    secret=lambda url: f"{url!r} holds a user name or password, which only "
    f"{' and '.join(SECRET_KEYS)} may")
"""How nightly.toml is read (``settings.read_toml``); the first problem is the error."""


def read(path: Path) -> bytes:
    """The config's bytes, read once (``settings.read_bytes``: a regular file, not through a
    symlink, never blocking on a FIFO); everything after works on them, never the path."""
    return settings.read_bytes(path, TOML)


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    return settings.read_toml(path, TOML, raw, shown=path.name) or {}

def workdir_of(path: Path, raw: bytes) -> Path:
    """The workspace the config (``raw``, read from ``path``) names, read before the full check
    (the command takes the lock first); ``load`` reports whatever is wrong with it."""
    try:
        w = _parse(path, raw).get("workdir", "build")
        if isinstance(w, str) and w.strip():
            return userpath.checked(w, path.absolute().parent).absolute()
    except (UsageError, ValueError):
        pass
    return load(path, raw).workdir


def load(path: Path, raw: bytes | None = None) -> NightlyConfig:
    """Check the config ``raw`` (None: ``read(path)``; ``path`` names it and its directory is
    the base of relative paths); raise UsageError naming the key on the first problem."""
    from rocmbuild.publish.static_index import check_stage_name
    from rocmbuild.publish.target import parse_index

    r = _Reader(path.name)
    raw = read(path) if raw is None else raw
    data = _parse(path, raw)
    r.known_keys(data, "", "")
    base = path.absolute().parent
    cells = _matrix(r, data.get("matrix"), base)

    pub = r.table(data, "publish", "")
    index = r.text(pub, "index", "publish", secret=True)
    if index is None:
        raise r.fail("publish.index", "missing",
                     hint='where to publish: a directory (index = "/srv/wheels") or a server URL')
    r.stop()  # what is found so far comes first
    try:
        target = parse_index(index, f"{path.name}: publish.index")
    except UsageError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None
    if target.path is not None:
        index = str(target.path if target.path.is_absolute() else base / target.path)
    stage = r.text(pub, "stage", "publish", "staging") or "staging"
    promote_to = r.text(pub, "promote_to", "publish", DEFAULT_STAGE) or DEFAULT_STAGE
    r.stop()
    for key, name in (("stage", stage), ("promote_to", promote_to)):
        check_stage_name(name, f"{path.name}: publish.{key}")  # the publisher's own check
    if stage == promote_to:
        raise r.fail("publish.promote_to", f"is the staging stage {stage!r} itself",
                     hint="stage wheels in one stage and serve them from another")

    rep = r.table(data, "reports", "")
    reports = r.path_key(rep, "dir", "reports", base, "reports")
    assert reports is not None
    try:
        history = quantity.count(rep.get("history", DEFAULT_HISTORY), 1, 10000,
                                 "a number of runs")
    except quantity.BadQuantity as exc:
        raise r.fail("reports.history", str(exc), hint="e.g. history = 30 (1 to 10000)"
                     ) from None

    ret = settings.model(Retention, r.table(data, "retention", ""), "retention", r,
                         unknown=False)

    ex = r.table(data, "executor", "")
    kind = r.text(ex, "kind", "executor", "local") or "local"
    if kind not in ("local", "slurm"):
        raise r.fail("executor.kind", f"{kind!r} is not local or slurm",
                     hint='kind = "local" runs the cells here; "slurm" submits an sbatch array')
    from rocmbuild.nightly.slurm.settings import settings_from_table

    slurm = settings_from_table({k: v for k, v in ex.items() if k != "kind"},
                                f"{path.name}: executor", base, r)
    executor = ExecutorConfig(kind=kind, slurm=slurm)
    if kind == "slurm" and slurm.shared_dir is not None \
            and not reports.resolve().is_relative_to(slurm.shared_dir.resolve()):
        raise r.fail("executor.shared_dir", f"the reports dir {reports} is not under it",
                     hint="the nodes write each cell's result into the run directory: put "
                     "reports.dir (and the workspace, cache) under shared_dir")
    time_s = slurm.max_time_s
    if time_s is not None:
        for c in cells:
            if c.timeout_s >= time_s:
                raise r.fail("executor.time", f"cell {c.id}'s timeout ({c.timeout_s}s) is not "
                             f"below the job's time ({time_s}s)",
                             hint="give the matrix entry a shorter timeout or the job more time")

    url = settings.model(Notify, r.table(data, "notify", ""), "notify", r, unknown=False).url

    workdir = r.path_key(data, "workdir", "", base, "build")
    assert workdir is not None
    cache = r.path_key(data, "cache_dir", "", base)
    pypi = r.text(data, "pypi", "", DEFAULT_PYPI) or DEFAULT_PYPI
    problem = url_problem(pypi)
    if problem:
        raise r.fail("pypi", f"{log.redact(pypi, strict=True)[:100]!r} {problem}",
                     hint="the simple index's URL, e.g. https://pypi.org/simple/")
    r.stop()
    return NightlyConfig(
        path=path.absolute(), cells=cells, index=index, reports=reports, workdir=workdir,
        cache_dir=cache, stage=stage,
        promote_to=promote_to, history=history, max_size=ret.max_size, keep_days=ret.keep_days,
        executor=executor, notify_url=url, pypi=pypi.rstrip("/") + "/",
        sha256=hashlib.sha256(raw).hexdigest())
