"""The Slurm executor's settings: ``[executor]`` of nightly.toml when ``kind = "slurm"``, read
and checked (``settings_from_table``), and the resources one task asks for (``shape_of``: cpus,
memory, GPUs, time, partition), which group the tasks into arrays."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmbuild.core import fsutil, quantity, settings
from rocmbuild.nightly import userpath
from rocmbuild.nightly.model import Task

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
_GRES = re.compile(r"[a-z][a-z0-9_]{0,31}(?::[A-Za-z0-9_.-]{1,64})?:[1-9][0-9]{0,2}")
_NAME_HINT = "letters, digits and . _ : + - (a partition, account or job name)"


def _name(v: Any, table: Mapping[str, Any], base: Path) -> str:
    if not isinstance(v, str) or not _NAME.fullmatch(v):
        raise settings.Bad(f"{str(v)[:60]!r} is not a Slurm name")
    return v


def _gpu_only(key: str, table: Mapping[str, Any]) -> None:
    if table.get("gpu_partition") is None:
        raise settings.Bad("is set without gpu_partition",
                           "set gpu_partition (the partition of the GPU nodes that validate), "
                           f"or drop {key}")


def _gres(v: Any, table: Mapping[str, Any], base: Path) -> str:
    if not isinstance(v, str) or not _GRES.fullmatch(v):
        raise settings.Bad(f"{str(v)[:60]!r} is not a GRES of sbatch --gres")
    _gpu_only("gpu_gres", table)
    return v


def _gpu_mem(v: Any, table: Mapping[str, Any], base: Path) -> int:
    _gpu_only("gpu_mem", table)
    try:
        n = quantity.size(v)
    except quantity.BadQuantity as exc:
        raise settings.Bad(str(exc)) from None
    if n < 1 << 20:
        raise settings.Bad(f"{n} bytes is less than Slurm's 1 MiB step",
                           'the memory of one validation task, e.g. gpu_mem = "16G"')
    return n


def _sbatch_args(v: Any, table: Mapping[str, Any], base: Path) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
        raise settings.Bad("must be a list of sbatch options")
    for a in v:
        if not a.startswith("-") or "\0" in a or "\n" in a:
            raise settings.Bad(f"{a[:60]!r} is not an sbatch option",
                               "one option per string, its value joined: --qos=normal, -q "
                               "normal written -qnormal")
        own = own_option(a)
        if own is not None:
            raise settings.Bad(f"sbatch reads {a[:60]!r} as {own}, which the executor sets "
                               "itself", "the executor sets --array, --output, --chdir, "
                               "--export and --job-name (the job_name key) itself; leave them "
                               "out")
    return tuple(v)


def _shared_dir(v: Any, table: Mapping[str, Any], base: Path) -> Path:
    if not isinstance(v, str) or not v.strip():
        raise settings.Bad("must be a path")
    try:
        p = userpath.checked(v, base)
    except userpath.BadPath as exc:
        raise settings.Bad(str(exc), "a directory every node mounts, as a plain absolute "
                           "path") from None
    blocker = fsutil.in_the_way(p)
    if blocker is not None:
        raise settings.Bad(f"{blocker} is a file, not a directory")
    return p


def _span(v: Any) -> float:
    try:
        return quantity.duration(v)
    except quantity.BadQuantity as exc:
        raise settings.Bad(str(exc)) from None


@dataclass(frozen=True)
class SlurmSettings:
    """``[executor]`` of nightly.toml when ``kind = "slurm"`` (``settings.model``: each key is
    declared here once, with its check and hint)."""

    partition: str | None = settings.setting(None, _name, hint=_NAME_HINT)
    """Partition for cells without GPUs (None: the cluster's default)."""
    gpu_partition: str | None = settings.setting(None, _name, hint=_NAME_HINT)
    """Partition of the cells' validation: set, each cell's build runs on ``partition`` and its
    validation as a second array on this one (``--gres`` = ``gpu_gres``, each task after its
    build task: ``--dependency=aftercorr``), so a GPU node is held only for validation. None:
    build and validate in one task on ``partition`` (a wheel that host cannot validate is left
    pending, for ``nightly --validate-pending``)."""
    account: str | None = settings.setting(None, _name, hint=_NAME_HINT)
    """``--account``, where the site charges jobs to one."""
    extra_args: tuple[str, ...] = settings.setting(
        (), _sbatch_args, key="sbatch_args",
        hint='e.g. sbatch_args = ["--qos=normal", "--constraint=mi300x"]')
    """More sbatch arguments, as they are (``--qos=normal``, ``--constraint=mi300x``)."""
    max_time_s: int | None = settings.setting(None, lambda v, t, b: math.ceil(_span(v)),
                                              key="time", hint=quantity.DURATION_HINT)
    """The partition's time limit: no task asks for more, whatever its cell's timeout."""
    shared_dir: Path | None = settings.setting(None, _shared_dir,
                                               hint="a directory every node mounts")
    """A path every node sees (the run directory, workspace and cache live under it); tasks
    start in it."""
    poll_s: float = settings.setting(2.0, lambda v, t, b: _span(v), key="poll",
                                     hint=quantity.DURATION_HINT)
    """How often ``wait`` asks squeue."""
    job_name: str = settings.setting("rocmbuild-nightly", _name, hint=_NAME_HINT)
    """The arrays' ``--job-name``."""
    gpu_gres: str = settings.setting(
        "gpu:1", _gres, hint='NAME[:TYPE]:COUNT, e.g. gpu_gres = "gpu:1" or "gpu:mi300x:1"')
    """``--gres`` of a validation task."""
    gpu_mem_bytes: int = settings.setting(16 << 30, _gpu_mem, key="gpu_mem",
                                          hint=quantity.SIZE_HINT)
    """``--mem`` of a validation task (a venv with the wheel and torch, the kernel gate):
    without one, a partition that counts memory would give it the whole node, one validation
    per GPU node."""


SETTING_KEYS = ("partition", "gpu_partition", "gpu_gres", "gpu_mem", "account", "sbatch_args",
                "time", "shared_dir", "poll", "job_name")
"""The keys of nightly.toml's ``[executor]`` table that ``settings_from_table`` reads
(``settings.keys(SlurmSettings)``, in the order the unknown-key hint lists them)."""
_CHECKED = ("gpu_gres", "gpu_mem", "sbatch_args", "shared_dir", "time", "poll", "partition",
            "gpu_partition", "account", "job_name")
"""The order the keys are checked in (the first problem is the error)."""

OWN = {"array": "a", "chdir": "D", "dependency": "d", "export": "", "job-name": "J", "output": "o",
       "parsable": "", "wrap": "", "help": "h", "usage": "u", "version": "V",
       "test-only": ""}
"""sbatch's options that the executor sets itself (or that submit nothing), long name ->
short letter: sbatch_args must not set them under any spelling."""
_NO_ARG = set("hHkOQsuvVW")
"""sbatch's short options that take no argument (so another may follow in one word)."""


def own_option(arg: str) -> str | None:
    """The executor's own sbatch option ``arg`` would be read as, or None. sbatch parses with
    getopt_long: a long option may be any unambiguous prefix (``--arr=1``, ``--out=x``), short
    options may be bundled and take their value joined (``-a1``, ``-Qo/x``)."""
    if arg.startswith("--"):
        given = arg[2:].split("=", 1)[0]
        if not given:
            return "--"  # ends sbatch's options: what follows would be the script
        for name in OWN:
            if name.startswith(given):
                return f"--{name}"
        return None
    shorts = {v: k for k, v in OWN.items() if v}
    for ch in arg[1:]:
        if ch in shorts:
            return f"--{shorts[ch]}"
        if ch not in _NO_ARG:
            return None  # an option with a value: the rest of the word is the value
    return "-" if arg == "-" else None


def settings_from_table(table: Mapping[str, Any], where: str, base: Path,
                        r: settings.Reader | None = None) -> SlurmSettings:
    """SlurmSettings from nightly.toml's ``[executor]`` table (``where`` names it in errors,
    e.g. ``nightly.toml: executor``; a relative ``shared_dir`` is taken from ``base``, the
    config file's directory): ``settings.model``, every problem collected. Without ``r`` the
    first is raised as a UsageError; with it (the config's reader) they join the config's, and
    the caller raises. Keys not in SETTING_KEYS are left to the caller."""
    shown, _, at = where.rpartition(": ")
    own = r is None
    r = settings.Reader(shown) if r is None else r
    s = settings.model(SlurmSettings, table, at, r, base, unknown=False, order=_CHECKED)
    if own:
        r.stop()
    return s


@dataclass(frozen=True)
class Shape:
    """What one array asks for, per task."""

    cpus: int
    mem_mb: int
    """0: no ``--mem`` (the partition's default)."""
    gpus: int
    time_min: int
    partition: str | None

    def sbatch_args(self, settings: SlurmSettings) -> list[str]:
        args = [f"--cpus-per-task={self.cpus}", f"--time={self.time_min}"]
        if self.mem_mb:
            args.append(f"--mem={self.mem_mb}M")
        if self.gpus:
            args.append(f"--gres={settings.gpu_gres}")
        if self.partition:
            args.append(f"--partition={self.partition}")
        if settings.account:
            args.append(f"--account={settings.account}")
        return args


def shape_of(task: Task, settings: SlurmSettings) -> Shape:
    """The resources a task asks for: ``--cpus-per-task`` = cpus, ``--mem`` = its memory in MiB
    (rounded up), ``--gres`` = ``gpu_gres`` on the GPU partition when it needs GPUs, ``--time``
    = its timeout in minutes (rounded up, at most ``max_time_s``)."""
    time_s = task.time_s if settings.max_time_s is None else min(task.time_s,
                                                                 settings.max_time_s)
    gpus = max(0, task.gpus)
    return Shape(
        cpus=max(1, task.cpus),
        mem_mb=math.ceil(max(0, task.mem_bytes) / (1 << 20)),
        gpus=gpus,
        time_min=max(1, math.ceil(time_s / 60)),
        partition=(settings.gpu_partition or settings.partition) if gpus else settings.partition,
    )
