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

from rocmbuild.core import fsutil, quantity
from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import userpath
from rocmbuild.nightly.model import Task


@dataclass(frozen=True)
class SlurmSettings:
    """``[executor]`` of nightly.toml when ``kind = "slurm"``."""

    partition: str | None = None
    """Partition for cells without GPUs (None: the cluster's default)."""
    gpu_partition: str | None = None
    """Partition of the cells' validation: set, each cell's build runs on ``partition`` and its
    validation as a second array on this one (``--gres`` = ``gpu_gres``, each task after its
    build task: ``--dependency=aftercorr``), so a GPU node is held only for validation. None:
    build and validate in one task on ``partition`` (a wheel that host cannot validate is left
    pending, for ``nightly --validate-pending``)."""
    account: str | None = None
    """``--account``, where the site charges jobs to one."""
    extra_args: tuple[str, ...] = ()
    """More sbatch arguments, as they are (``--qos=normal``, ``--constraint=mi300x``)."""
    max_time_s: int | None = None
    """The partition's time limit: no task asks for more, whatever its cell's timeout."""
    shared_dir: Path | None = None
    """A path every node sees (the run directory, workspace and cache live under it); tasks
    start in it."""
    poll_s: float = 2.0
    """How often ``wait`` asks squeue."""
    job_name: str = "rocmbuild-nightly"
    gpu_gres: str = "gpu:1"
    """``--gres`` of a validation task."""
    gpu_mem_bytes: int = 16 << 30
    """``--mem`` of a validation task (a venv with the wheel and torch, the kernel gate):
    without one, a partition that counts memory would give it the whole node, one validation
    per GPU node."""


SETTING_KEYS = ("partition", "gpu_partition", "gpu_gres", "gpu_mem", "account", "sbatch_args",
                "time", "shared_dir", "poll", "job_name")
"""The keys of nightly.toml's ``[executor]`` table that ``settings_from_table`` reads."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
_GRES = re.compile(r"[a-z][a-z0-9_]{0,31}(?::[A-Za-z0-9_.-]{1,64})?:[1-9][0-9]{0,2}")

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


def settings_from_table(table: Mapping[str, Any], where: str, base: Path) -> SlurmSettings:
    """SlurmSettings from nightly.toml's ``[executor]`` table (``where`` names it in errors,
    e.g. ``nightly.toml: executor``; a relative ``shared_dir`` is taken from ``base``, the
    config file's directory). Keys not in SETTING_KEYS are left to the caller."""
    def bad(key: str, what: str, hint: str) -> UsageError:
        return UsageError(f"{where}.{key}: {what}", hint=hint)

    def name(key: str) -> str | None:
        v = table.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not _NAME.fullmatch(v):
            raise bad(key, f"{str(v)[:60]!r} is not a Slurm name",
                      "letters, digits and . _ : + - (a partition, account or job name)")
        return v

    def span(key: str) -> float | None:
        v = table.get(key)
        if v is None:
            return None
        try:
            return quantity.duration(v)
        except quantity.BadQuantity as exc:
            raise bad(key, str(exc), quantity.DURATION_HINT) from None

    gres = table.get("gpu_gres", SlurmSettings.gpu_gres)
    if not isinstance(gres, str) or not _GRES.fullmatch(gres):
        raise bad("gpu_gres", f"{str(gres)[:60]!r} is not a GRES of sbatch --gres",
                  'NAME[:TYPE]:COUNT, e.g. gpu_gres = "gpu:1" or "gpu:mi300x:1"')
    for key in ("gpu_gres", "gpu_mem"):
        if key in table and table.get("gpu_partition") is None:
            raise bad(key, "is set without gpu_partition",
                      "set gpu_partition (the partition of the GPU nodes that validate), or "
                      f"drop {key}")
    gpu_mem = table.get("gpu_mem", SlurmSettings.gpu_mem_bytes)
    try:
        gpu_mem = quantity.size(gpu_mem)
    except quantity.BadQuantity as exc:
        raise bad("gpu_mem", str(exc), quantity.SIZE_HINT) from None
    if gpu_mem < 1 << 20:
        raise bad("gpu_mem", f"{gpu_mem} bytes is less than Slurm's 1 MiB step",
                  'the memory of one validation task, e.g. gpu_mem = "16G"')
    args = table.get("sbatch_args", [])
    example = 'e.g. sbatch_args = ["--qos=normal", "--constraint=mi300x"]'
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise bad("sbatch_args", "must be a list of sbatch options", example)
    for a in args:
        if not a.startswith("-") or "\0" in a or "\n" in a:
            raise bad("sbatch_args", f"{a[:60]!r} is not an sbatch option",
                      "one option per string, its value joined: --qos=normal, -q normal "
                      "written -qnormal")
        own = own_option(a)
        if own is not None:
            raise bad("sbatch_args", f"sbatch reads {a[:60]!r} as {own}, which the executor "
                      "sets itself", "the executor sets --array, --output, --chdir, --export "
                      "and --job-name (the job_name key) itself; leave them out")
    shared_dir = None
    shared = table.get("shared_dir")
    if shared is not None:
        if not isinstance(shared, str) or not shared.strip():
            raise bad("shared_dir", "must be a path", "a directory every node mounts")
        try:
            shared_dir = userpath.checked(shared, base)
        except userpath.BadPath as exc:
            raise bad("shared_dir", str(exc), "a directory every node mounts, as a plain "
                      "absolute path") from None
        blocker = fsutil.in_the_way(shared_dir)
        if blocker is not None:
            raise bad("shared_dir", f"{blocker} is a file, not a directory",
                      "a directory every node mounts")
    limit, poll = span("time"), span("poll")
    return SlurmSettings(
        partition=name("partition"), gpu_partition=name("gpu_partition"), gpu_gres=gres,
        gpu_mem_bytes=gpu_mem,
        account=name("account"), extra_args=tuple(args),
        max_time_s=None if limit is None else math.ceil(limit),
        shared_dir=shared_dir,
        poll_s=2.0 if poll is None else poll,
        job_name=name("job_name") or SlurmSettings.job_name,
    )


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
