"""``nightly.toml`` -> ``NightlyConfig``: the matrix (expanded to cells), where to publish, the
reports, retention, the executor and the optional webhook. Each table is a ``settings.model``
class, its keys declared once (``nightly/matrix.py``: ``[[matrix]]``; ``nightly/tables.py``:
``[publish]``, ``[reports]``, ``[retention]``, ``[executor].kind``, ``[notify]``, the top-level
keys; ``nightly/slurm/settings.py``: the Slurm keys): ``load`` reads them all, every problem
kept with its dotted key, then checks what spans keys. Every problem is one UsageError line
naming the file and key (``nightly.toml: matrix[2].archs: ...``) with a hint: the first found.

Relative paths in the file are relative to the file's directory.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from rocmbuild.core import fsutil, log, settings
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import matrix, tables, userpath
from rocmbuild.nightly.model import CELL_ID, Cell
from rocmbuild.nightly.tables import (
    DEFAULT_HISTORY,
    DEFAULT_PYPI,
    DEFAULT_STAGE,
    ExecutorConfig,
    kind_of,
)

# Nothing of rocmbuild.publish at import time (it is heavy): a second nightly must be refused
# within a second, and the command takes the lock after reading only this module.
MAX_BYTES = 1 << 20  # a config file is small
MAX_CELLS = 1000
DEFAULT_TIMEOUT_S = matrix.DEFAULT_TIMEOUT_S
T = TypeVar("T")

_KEYS: dict[str, tuple[str, ...]] = {
    "": ("matrix", "publish", "reports", "retention", "executor", "notify",
         *settings.keys(tables.TopLevel)),
    "matrix": matrix.KEYS,
    "publish": settings.keys(tables.Publish),
    "reports": settings.keys(tables.Reports),
    "retention": settings.keys(tables.Retention),
    "executor": settings.keys(ExecutorConfig),  # and slurm.SETTING_KEYS
    "notify": settings.keys(tables.Notify),
}


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


def _table(r: settings.Reader, data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The top-level table ``key`` ({}: none, or not a table, a problem kept), its unknown keys
    kept as problems."""
    v = data.get(key, {})
    if not isinstance(v, dict):
        r.bad(key, f"expected a table, got {kind_of(v)}",
              hint=f"write [{key}] with its keys under it")
        return {}
    _known(r, v, key, key)
    return v


def _known(r: settings.Reader, data: Mapping[str, Any], section: str, where: str) -> None:
    allowed = _KEYS[section]
    if section == "executor":
        from rocmbuild.nightly.slurm.settings import SETTING_KEYS

        allowed = (*allowed, *SETTING_KEYS)
    r.known(data, allowed, where, hint="known keys: " + ", ".join(allowed) + " (docs/nightly.md)")


def _path(r: settings.Reader, key: str, text: str, base: Path) -> Path:
    """A recipe's or stack's path in the matrix; a problem stops the reading."""
    try:
        return tables.checked_path(text, base, directory=False)
    except settings.Bad as exc:
        raise r.fail(key, exc.what, exc.hint) from None


def cell_id(recipe: str, variant: str | None, source: str, arch: str) -> str:
    """``flash-attn.triton.pypi.gfx942``; ``gfx90a,gfx942`` reads ``gfx90a-gfx942``."""
    stem = Path(recipe).stem if recipe.endswith(".toml") else recipe
    parts = [stem, variant or "default", source, arch.replace(",", "-").replace(":", "_")]
    return ".".join(parts).lower()


def _matrix(r: settings.Reader, entries: object, base: Path) -> tuple[Cell, ...]:
    if not isinstance(entries, list) or not entries:
        raise r.fail("matrix", "expected one or more [[matrix]] tables",
                     hint='add [[matrix]] with recipes = ["hip-attention-probe"] and '
                     'archs = ["gfx942"]')
    cells: dict[str, Cell] = {}
    for i, entry in enumerate(entries):
        where = f"matrix[{i}]"
        if not isinstance(entry, dict):
            raise r.fail(where, f"expected a table, got {kind_of(entry)}",
                         hint="write each entry as [[matrix]]")
        _known(r, entry, "matrix", where)
        e = settings.model(matrix.Entry, entry, where, r, base, unknown=False,
                           order=matrix.CHECKED)
        recipes, stacks, archs = e.recipes, e.stacks, e.archs
        variants, sources, options = e.variants, e.sources, e.options
        follow, timeout_s = e.follow, e.timeout_s
        for recipe, variant, source, arch in itertools.product(recipes, variants, sources,
                                                               archs):
            if recipe.endswith(".toml"):
                recipe = str(_path(r, f"{where}.recipes", recipe, base))
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


def _add(r: settings.Reader, cells: dict[str, Cell], where: str, cell: Cell) -> None:
    if cell.id in cells:
        raise r.fail(where, f"cell {cell.id} is already in the matrix, from "
                     f"matrix[{cells[cell.id].entry}]",
                     hint="each recipe x variant x source x archs once (a stack's members too)")
    cells[cell.id] = cell
    if len(cells) > MAX_CELLS:
        raise r.fail("matrix", f"more than {MAX_CELLS} cells",
                     hint="split the matrix over several configs")


def _stack_cells(r: settings.Reader, name: str, where: str, base: Path, archs: tuple[str, ...]
                 ) -> list[Cell]:
    """The cells of stack ``name`` (a stack name or a .toml path, docs/stacks.md): one per
    member and arch set, in the group ``<stack>.<archs>``, promoted only all together."""
    from rocmbuild.core.errors import RecipeError
    from rocmbuild.recipe import stack as stackfile

    try:
        st = stackfile.load_stack(stackfile.find(
            str(_path(r, where, name, base)) if name.endswith(".toml") else name))
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


def load(path: Path, raw: bytes | None = None, r: settings.Reader | None = None
         ) -> NightlyConfig:
    """Check the config ``raw`` (None: ``read(path)``; ``path`` names it and its directory is
    the base of relative paths); raise UsageError naming the key on the first problem. Every
    table is read (``settings.model``: each key's problems kept in ``r``, default a Reader
    naming the file) before the first is raised; then the checks across keys."""
    from rocmbuild.nightly.slurm.settings import settings_from_table

    r = settings.Reader(path.name) if r is None else r
    raw = read(path) if raw is None else raw
    data = _parse(path, raw)
    _known(r, data, "", "")
    base = path.absolute().parent
    cells = _matrix(r, data.get("matrix"), base)

    def table(cls: type[T], key: str) -> T:
        return settings.model(cls, _table(r, data, key), key, r, base, unknown=False)

    pub = table(tables.Publish, "publish")
    rep = table(tables.Reports, "reports")
    ret = table(tables.Retention, "retention")
    ex = _table(r, data, "executor")
    executor = replace(settings.model(ExecutorConfig, ex, "executor", r, unknown=False),
                       slurm=settings_from_table({k: v for k, v in ex.items() if k != "kind"},
                                                 f"{path.name}: executor", base, r))
    notify = table(tables.Notify, "notify")
    top = settings.model(tables.TopLevel, data, "", r, base, unknown=False)
    r.stop()
    index = _publish(path.name, pub, base, r)
    _fits_executor(r, executor, rep.dir, cells)
    return NightlyConfig(
        path=path.absolute(), cells=cells, index=index, reports=rep.dir, workdir=top.workdir,
        cache_dir=top.cache_dir, stage=pub.stage, promote_to=pub.promote_to,
        history=rep.history, max_size=ret.max_size, keep_days=ret.keep_days, executor=executor,
        notify_url=notify.url, pypi=top.pypi, sha256=hashlib.sha256(raw).hexdigest())


def _publish(name: str, pub: tables.Publish, base: Path, r: settings.Reader) -> str:
    """``[publish]`` checked across its keys (the publisher's own checks): the index's form and
    the stages' names; the index, a directory made absolute."""
    from rocmbuild.publish.static_index import check_stage_name
    from rocmbuild.publish.target import parse_index

    try:
        target = parse_index(pub.index, f"{name}: publish.index")
    except UsageError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None
    for key, stage in (("stage", pub.stage), ("promote_to", pub.promote_to)):
        check_stage_name(stage, f"{name}: publish.{key}")
    if pub.stage == pub.promote_to:
        raise r.fail("publish.promote_to", f"is the staging stage {pub.stage!r} itself",
                     hint="stage wheels in one stage and serve them from another")
    if target.path is None:
        return pub.index
    return str(target.path if target.path.is_absolute() else base / target.path)


def _fits_executor(r: settings.Reader, executor: ExecutorConfig, reports: Path,
                   cells: tuple[Cell, ...]) -> None:
    """Slurm: the reports under ``shared_dir``, each cell's timeout below the job's time."""
    slurm = executor.slurm
    if slurm is None:
        return
    if executor.kind == "slurm" and slurm.shared_dir is not None \
            and not reports.resolve().is_relative_to(slurm.shared_dir.resolve()):
        raise r.fail("executor.shared_dir", f"the reports dir {reports} is not under it",
                     hint="the nodes write each cell's result into the run directory: put "
                     "reports.dir (and the workspace, cache) under shared_dir")
    time_s = slurm.max_time_s
    for c in cells:
        if time_s is not None and c.timeout_s >= time_s:
            raise r.fail("executor.time", f"cell {c.id}'s timeout ({c.timeout_s}s) is not "
                         f"below the job's time ({time_s}s)",
                         hint="give the matrix entry a shorter timeout or the job more time")
