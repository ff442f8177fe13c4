"""nightly.toml's tables besides ``[[matrix]]`` (``nightly/matrix.py``) and ``[executor]``'s Slurm
keys (``nightly/slurm/settings.py``), one ``settings.model`` class each: ``Publish``,
``Reports``, ``Retention``, ``ExecutorConfig`` (``kind``), ``Notify`` and ``TopLevel``
(``workdir``, ``cache_dir``, ``pypi``). Each key is declared once, with its check and hint, and
documented on its field (docs/nightly.md says the same to users). What is checked across keys
(the stages, the index's form, the reports under ``shared_dir``, a cell's timeout under the
job's time) is ``config.load``'s, after every table is read.

Nothing of rocmbuild.publish here: the command reads this before it takes the lock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rocmbuild.core import fsutil, log, quantity, settings
from rocmbuild.nightly import userpath

if TYPE_CHECKING:
    from rocmbuild.nightly.slurm.settings import SlurmSettings

DEFAULT_STAGE = "stable"
"""publish.static_index.DEFAULT_STAGE (a unit test keeps them equal)."""
DEFAULT_PYPI = "https://pypi.org/simple/"
DEFAULT_HISTORY = 30
PATH_HINT = "write a plain path, absolute or relative to the config file's directory"

T = TypeVar("T")


def kind_of(v: object) -> str:
    """What a TOML value is, in words (``an integer``)."""
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def _text(v: Any, secret: bool = False) -> str:
    """A non-blank string (``secret``: the value is never shown)."""
    if not isinstance(v, str):
        shown = "a value" if secret else repr(v)
        raise settings.Bad(f"expected a string, got {shown} ({kind_of(v)})",
                           'quote it: key = "..."')
    if not v.strip():
        raise settings.Bad("is empty", "give a value or leave the key out")
    return v


def text(v: Any, table: Mapping[str, Any], base: Path) -> str:
    return _text(v)


def secret_text(v: Any, table: Mapping[str, Any], base: Path) -> str:
    return _text(v, secret=True)


def checked_path(v: str, base: Path, directory: bool = True) -> Path:
    """A path nightly.toml names (``userpath.checked``, from ``base``); with ``directory``, a file
    standing where it or one of its parents should be a directory is refused too."""
    try:
        p = userpath.checked(v, base)
    except userpath.BadPath as exc:
        raise settings.Bad(str(exc), PATH_HINT) from None
    blocker = fsutil.in_the_way(p) if directory else None
    if blocker is not None:
        raise settings.Bad(f"{blocker} is a file, not a directory",
                           "name a directory (or move the file away)")
    return p


def directory(v: Any, table: Mapping[str, Any], base: Path) -> Path:
    return checked_path(_text(v), base)


def _quantity(parse: Callable[[object], T]) -> settings.Check:
    """A check of one ``quantity`` parser (its BadQuantity: the problem)."""
    def check(v: Any, table: Mapping[str, Any], base: Path) -> T:
        try:
            return parse(v)
        except quantity.BadQuantity as exc:
            raise settings.Bad(str(exc)) from None
    return check


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


@dataclass(frozen=True)
class Publish:
    """``[publish]``: where wheels go."""

    index: str = settings.setting(
        "", secret_text, required=True,
        hint='where to publish: a directory (index = "/srv/wheels") or a server URL')
    """A directory (a static index with stages) or a server's upload URL (no stages); may carry
    credentials, never shown. ``config.load`` reads its form (``publish.target.parse_index``)."""
    stage: str = settings.setting("staging", text)
    """Where each wheel goes first (a stage name: ``static_index.check_stage_name``)."""
    promote_to: str = settings.setting(DEFAULT_STAGE, text)
    """The served stage green cells are promoted to, in one step; not ``stage`` itself."""


@dataclass(frozen=True)
class Reports:
    """``[reports]``."""

    dir: Path = settings.setting(Path("reports"), directory, hint=PATH_HINT, absent="reports")
    """The run directories (``<dir>/<run id>/``, ``index.html`` and ``rocmbuild.prom`` at the
    top); default ``reports`` beside the config, checked as if written; with Slurm and
    ``shared_dir``, under ``shared_dir``."""
    history: int = settings.setting(
        DEFAULT_HISTORY, _quantity(lambda v: quantity.count(v, 1, 10000, "a number of runs")),
        hint="e.g. history = 30 (1 to 10000)")
    """Runs on the history page."""


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


def _executor_kind(v: Any, table: Mapping[str, Any], base: Path) -> str:
    kind = _text(v)
    if kind not in ("local", "slurm"):
        raise settings.Bad(f"{kind!r} is not local or slurm")
    return kind


@dataclass(frozen=True)
class ExecutorConfig:
    """``[executor]``: its own key, ``kind``, read here; the others are the Slurm settings."""

    kind: str = settings.setting(
        "local", _executor_kind,
        hint='kind = "local" runs the cells here; "slurm" submits an sbatch array')
    """``local`` (cells one after another on this machine) or ``slurm`` (an sbatch array)."""
    slurm: SlurmSettings | None = None
    """The ``[executor]`` table's Slurm settings (``slurm.settings.settings_from_table``: one
    place defines those keys); None only in a config built by hand."""

    @property
    def gpu_partition(self) -> str:
        return (self.slurm.gpu_partition or "") if self.slurm else ""

    @property
    def time_s(self) -> int | None:
        """Slurm: the partition's time limit; every cell's timeout stays below it."""
        return self.slurm.max_time_s if self.slurm else None


def _webhook(v: Any, table: Mapping[str, Any], base: Path) -> str:
    _text(v, secret=True)  # the value is never shown: a webhook URL carries a token
    problem = url_problem(v.strip())
    if problem:
        raise settings.Bad(f"the webhook URL {problem}")
    return str(v)


@dataclass(frozen=True)
class Notify:
    """``[notify]``."""

    url: str | None = settings.setting(
        None, _webhook, hint="the webhook's URL, e.g. https://hooks.example.com/...; it is a "
        "secret and never printed")
    """A webhook POSTed the run's summary (a secret: never printed, logged or reported)."""


def _pypi(v: Any, table: Mapping[str, Any], base: Path) -> str:
    url = _text(v)
    problem = url_problem(url)
    if problem:
        raise settings.Bad(f"{log.redact(url, strict=True)[:100]!r} {problem}")
    return url.rstrip("/") + "/"


@dataclass(frozen=True)
class TopLevel:
    """The keys at the top of nightly.toml."""

    workdir: Path = settings.setting(Path("build"), directory, hint=PATH_HINT, absent="build")
    """The workspace: sources, logs, wheels, the cache, ``nightly.lock``; default ``build``
    beside the config, checked as if written."""
    cache_dir: Path | None = settings.setting(None, directory, hint=PATH_HINT)
    """The wheel cache (None: ``<workdir>/cache``)."""
    pypi: str = settings.setting(DEFAULT_PYPI, _pypi,
                                 hint="the simple index's URL, e.g. https://pypi.org/simple/")
    """The simple index (PEP 691 JSON) that ``follow = true`` sdist cells ask."""
