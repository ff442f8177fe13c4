"""Every setting rocmbuild reads, resolved in one place, with one precedence:

    command-line flag > environment variable > ``[tool.rocmbuild]`` in ./pyproject.toml > default

``SETTINGS`` lists the settings that have a flag (and maybe a variable and a pyproject key);
``ENV`` lists every environment variable rocmbuild reads, flag or not, with what it does. No other
module reads ``os.environ`` for configuration: they call ``env()`` / ``env_int()`` / ... here,
and a unit test keeps it so. A bad value is a usage error naming the variable or the file and key.

``[tool.rocmbuild]`` in the current directory's pyproject.toml holds per-project defaults, as
cibuildwheel's and scikit-build-core's tables do::

    [tool.rocmbuild]
    workdir = "build/rocm"
    cache-dir = "/scratch/rocmbuild-cache"
    index = "/srv/wheels"
    arch = "gfx90a,gfx942"
    jobs = 8
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.core.errors import UsageError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Setting:
    """One setting: its flag, variable, pyproject key, kind and help. The command line's flags
    are made from these (``commands.common.add_setting``): the help written here is the only
    one."""

    flag: str
    env: str | None
    config: str | None
    """Key in ``[tool.rocmbuild]``, when the setting may live there."""
    kind: str
    """``str``, ``int``, ``bool``, ``path`` (a directory, created when missing), ``dir`` (an
    existing directory), ``arch`` (an --arch list), ``version`` (X.Y[.Z]) or ``build-tag``
    (PEP 427: digits, then letters)."""
    doc: str
    """What the flag does: its help, and the variable's line in ``ENV``."""
    default: str
    """The default, as the help says it."""
    choices: tuple[str, ...] = ()
    short: str | None = None
    """The one-letter flag besides ``flag`` (``-j``)."""
    metavar: str | None = None
    per_command: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Command -> (doc, default) where the flag means or defaults to something else there
    (``audit --arch`` checks the archs given; it reads no GPU)."""

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.short, self.flag) if self.short else (self.flag,)

    def help(self, command: str | None = None) -> str:
        """The flag's help in ``command``: what it does, then where else the value may come
        from and its default (``[env ROCMBUILD_JOBS; pyproject [tool.rocmbuild] jobs; default
        ...]``)."""
        doc, default = self.per_command.get(command or "", (self.doc, self.default))
        where = [f"env {self.env}"] if self.env else []
        if self.config:
            where.append(f"pyproject [tool.rocmbuild] {self.config}")
        return f"{doc} [{'; '.join([*where, f'default {default}'])}]"


GPU_VENDORS = ("amd", "nvidia")
"""The GPU vendors a plan may target (--gpu-vendor, a patch's ``when.gpu_vendor``, a wheel's
provenance); amd is the default."""

BUILD_TAG = r"[0-9]+[A-Za-z_]*"
"""A wheel build tag as rocmbuild accepts it (PEP 427: it must start with a digit)."""

_S = Setting
SETTINGS: dict[str, Setting] = {
    "workdir": _S("--workdir", "ROCMBUILD_WORKDIR", "workdir", "path",
                  "workspace for sources, logs, wheels, index, reports", "./build"),
    "cache_dir": _S("--cache-dir", "ROCMBUILD_CACHE_DIR", "cache-dir", "path",
                    "download, git and wheel cache", "<workdir>/cache"),
    "arch": _S("--arch", "ROCMBUILD_ARCH", "arch", "arch",
               "comma-separated gfx targets, e.g. gfx90a,gfx942; 'native' reads the local GPUs "
               "from /sys/class/kfd", "native", per_command={
                   "audit": ("gfx targets every HIP .so must carry, e.g. gfx90a,gfx942 (gfx90a "
                             "also matches gfx90a:xnack+)", "none: list what is there"),
                   "doctor": ("gfx targets to test-compile, e.g. gfx942 or gfx90a,gfx942",
                              "the GPUs found, else gfx90a,gfx942 as a warning"),
                   "stack": ("comma-separated gfx targets, e.g. gfx942; one lock per arch",
                             "native"),
                   "validate": ("gfx targets the audit requires",
                                "the wheel's rocmbuild.json archs")}),
    "jobs": _S("--jobs", "ROCMBUILD_JOBS", "jobs", "int", "parallel compile jobs (MAX_JOBS)",
               "min(cpus, usable memory / memory per job)", short="-j", per_command={
                   "stack": ("parallel compile jobs (MAX_JOBS) of every member", "per member")}),
    "index": _S("--index", "ROCMBUILD_INDEX", "index", "str",
                "index directory, or http(s) upload URL of a server", "<workdir>/index",
                per_command={
                    "doctor": ("static index (directory or its http(s) URL) whose per-arch view "
                               "for this host's GPUs to print", "none"),
                    "promote": ("index directory", "<workdir>/index"),
                    "stack": ("the index directory the set is published to",
                              "<workdir>/index")}),
    "variant": _S("--variant", "ROCMBUILD_VARIANT", None, "str",
                  "recipe variant, e.g. ck or triton", "the recipe's", per_command={
                      "doctor": ("with --recipe: the variant to check", "the recipe's")}),
    "release": _S("--release", "ROCMBUILD_RELEASE", None, "str",
                  "the recipe's release line ([releases.<name>]), e.g. main; part of the cache "
                  "key", "the newest line whose host ranges this host satisfies",
                  metavar="NAME"),
    "source": _S("--source", "ROCMBUILD_SOURCE", None, "str",
                 "which source to fetch: 'default' or an alternative named in the recipe, e.g. "
                 "pypi", "default"),
    "rocm_version": _S("--rocm-version", "ROCMBUILD_ROCM_VERSION", None, "version",
                       "ROCm version for the wheel's local label, e.g. 6.2",
                       "the ROCm torch's HIP, then the ROCm root's, then the recipe's target",
                       per_command={"stack": ("ROCm version of the members' labels",
                                              "as build finds it")}),
    "rocm_path": _S("--rocm-path", "ROCM_PATH", None, "dir", "ROCm root, e.g. /opt/rocm",
                    "HIP_PATH, then /opt/rocm"),
    "hip_compiler": _S("--hip-compiler", "ROCMBUILD_HIP_COMPILER", None, "str",
                       "HIP compiler for recipes that compile HIP (cmake backend, the probe): a "
                       "path or a name on PATH",
                       "a ROCm install, then scripts/install-hip-toolchain.sh's", per_command={
                           "doctor": ("HIP compiler to check", "detected"),
                           "stack": ("HIP compiler", "as build finds it"),
                           "verify": ("HIP compiler", "the one the wheel names, then detection")}),
    "gpu_vendor": _S("--gpu-vendor", "ROCMBUILD_GPU_VENDOR", None, "str",
                     "GPU vendor the wheel will run on; nvidia only to check HIP-portable "
                     "(Triton) code on NVIDIA GPUs, selecting patches with when.gpu_vendor",
                     GPU_VENDORS[0], choices=GPU_VENDORS),
    "wheel_dir": _S("--wheel-dir", "ROCMBUILD_WHEEL_DIR", None, "path", "where to put the wheel",
                    "<workdir>/wheels", short="-w", per_command={
                        "stack": ("where the members' wheels go", "<workdir>/wheels")}),
    "validate": _S("--validate", "ROCMBUILD_VALIDATE", None, "bool",
                   "validate the wheel after the build (isolated install, import, torch guard, "
                   "audit, GPU kernel gate; reports in <workdir>/reports/)",
                   "off; the variable takes 1/true/yes/on"),
    "build_tag": _S("--build-tag", "ROCMBUILD_BUILD_TAG", None, "build-tag",
                    "give the wheel a PEP 427 build tag (name-ver-N-py3-...whl), to republish a "
                    "rebuild deliberately; part of the cache key", "none", metavar="N"),
    "torch_from": _S("--torch-from", "ROCMBUILD_TORCH_FROM", None, "dir",
                     "site-packages dir holding the torch to validate against",
                     "the torch this Python imports"),
    "compile_cache": _S("--compile-cache", "ROCMBUILD_COMPILE_CACHE", "compile-cache", "str",
                        "compiler cache in front of the build's compilers "
                        "(docs/compile-cache.md): auto takes ccache, else sccache, else none",
                        "auto", choices=("auto", "ccache", "sccache", "none")),
    "compile_cache_dir": _S("--compile-cache-dir", "ROCMBUILD_COMPILE_CACHE_DIR",
                            "compile-cache-dir", "path",
                            "the compile cache's directory; share it between workspaces and "
                            "nodes", "<cache-dir>/compile/<tool>", metavar="DIR"),
    "simple_url": _S("--simple-url", "ROCMBUILD_INDEX_SIMPLE_URL", None, "str",
                     "server only: its simple API root, used to check existing files",
                     "<index URL>/simple/"),
    "pypi": _S("--pypi", "ROCMBUILD_PYPI", "pypi", "str",
               "the simple index (PEP 691 JSON) to read releases from",
               "https://pypi.org/simple/", metavar="URL"),
    "upstream_timeout": _S("--upstream-timeout", "ROCMBUILD_UPSTREAM_TIMEOUT",
                           "upstream-timeout", "int", "limit of each upstream query", "30",
                           metavar="SECONDS"),
}

ENV: dict[str, str] = {
    **{s.env: f"{s.flag}: {s.doc} (default {s.default})" for s in SETTINGS.values() if s.env},
    "HIP_PATH": "ROCm root, after ROCM_PATH",
    "ROCMBUILD_RECIPE_PATH": "extra recipe directories (os.pathsep-separated), searched first",
    "ROCMBUILD_HIP_FLAGS": "replaces the detected HIP compiler's extra flags (space separated)",
    "ROCMBUILD_TOOLCHAIN_DIR": "where scripts/install-hip-toolchain.sh put toolchain.json "
                               "(default ~/.cache/rocmbuild/hiptc)",
    "ROCMBUILD_SYSFS_ROOT": "sysfs root for --arch native (default /sys; fixture trees)",
    "ROCMBUILD_VERBOSITY": "initial verbosity (0 quiet, 1 normal, 2 streams build output)",
    "ROCMBUILD_RETRY_BACKOFF": "seconds before the first retry of a download or clone "
                               "(default 2, doubling)",
    "ROCMBUILD_OFFLINE": "builds of recipes with build.offline = true: 'recipe' (default: "
                         "without network where a namespace can be made, else with a "
                         "warning), 'require' (an error where it cannot), 'off' (with network)",
    "ROCMBUILD_INDEX_USER": "index server user (else TWINE_USERNAME, else the URL's)",
    "ROCMBUILD_INDEX_PASSWORD": "index server password (else TWINE_PASSWORD, else the URL's)",
    "TWINE_USERNAME": "index server user, as twine reads it",
    "TWINE_PASSWORD": "index server password, as twine reads it",
    "SOURCE_DATE_EPOCH": "the build's time and the wheel's file dates (default: the source's "
                         "commit time or the sdist's newest member; path sources 1980-01-01)",
    "GITHUB_ACTIONS": "set by GitHub Actions (true): stages are folded in ::group:: blocks",
    "ROCMBUILD_PROGRESS_SECONDS": "seconds between progress lines when stderr is not a "
                                  "terminal (default 30; also one at each 10 % of the units)",
    "SLURM_CPUS_PER_TASK": "set by Slurm: caps the cpus MAX_JOBS plans with",
    "SLURM_MEM_PER_CPU": "set by Slurm (MB): caps usable memory at this times the cpus",
    "SLURM_MEM_PER_NODE": "set by Slurm (MB; 0: the whole node): caps usable memory",
    "ROCMBUILD_PREFLIGHT": "the build's resource preflight (disk, memory, compile cache dir, "
                           "link line length): 'on' (default: a problem stops the build), "
                           "'warn' (warn and build), 'off'",
    "CCACHE_DIR": "ccache's cache directory: the preflight checks that it can be written",
    "SCCACHE_DIR": "sccache's local cache directory: the preflight checks that it can be "
                   "written",
    "ROCMBUILD_PUBLISH_PAUSE_AT": "test hook: pause publishing at this step",
    "ROCMBUILD_PUBLISH_PAUSE_MARKER": "test hook: file touched when the pause starts",
    "ROCMBUILD_PUBLISH_PAUSE_SECONDS": "test hook: pause length (default 60)",
}


# Variables read through env() whose values are checked on every read: name -> kind.
ENV_KINDS: dict[str, str] = {
    "SOURCE_DATE_EPOCH": "seconds",
    "ROCMBUILD_TOOLCHAIN_DIR": "path",
}


def env(name: str) -> str | None:
    """The value of a registered variable (unset: None); a bad value of a variable in
    ENV_KINDS is a usage error naming it."""
    if name not in ENV:
        raise KeyError(f"{name} is not in rocmbuild.core.options.ENV: register and document it")
    raw = os.environ.get(name)
    kind = ENV_KINDS.get(name)
    if raw is None or kind is None or raw.strip() == "":
        return raw
    if kind == "seconds" and not re.fullmatch(r"\d+", raw.strip()):
        raise UsageError(f"{name}={raw!r}: expected a whole number of seconds >= 0",
                         hint=f"e.g. {name}=0, or unset it")
    if kind == "path":
        check_dir_path(Path(raw), name)
    return raw


def check_env() -> None:
    """Check at start-up the variables that are read late (in a stage, after minutes of work),
    so a bad value stops the command before it starts."""
    for name in ENV_KINDS:
        env(name)
    env_float("ROCMBUILD_RETRY_BACKOFF", 0.0)
    offline = (env("ROCMBUILD_OFFLINE") or "").strip().lower()
    if offline not in ("", "recipe", "require", "off"):
        raise UsageError(f"ROCMBUILD_OFFLINE={offline!r}: expected recipe, require or off",
                         hint="e.g. ROCMBUILD_OFFLINE=require, or unset it")
    env_float("ROCMBUILD_PROGRESS_SECONDS", 30.0)
    preflight = (env("ROCMBUILD_PREFLIGHT") or "").strip().lower()
    if preflight not in ("", "on", "warn", "off"):
        raise UsageError(f"ROCMBUILD_PREFLIGHT={preflight!r}: expected on, warn or off",
                         hint="e.g. ROCMBUILD_PREFLIGHT=warn, or unset it")
    env_int("SLURM_CPUS_PER_TASK")
    env_int("SLURM_MEM_PER_CPU", minimum=0)
    env_int("SLURM_MEM_PER_NODE", minimum=0)


def env_int(name: str, minimum: int = 1) -> int | None:
    raw = env(name)
    if raw is None or raw.strip() == "":
        return None
    return _int(raw.strip(), name, minimum)


def env_float(name: str, default: float) -> float:
    raw = env(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name}={raw!r}: expected a number of seconds >= 0",
                         hint=f"e.g. {name}=2, or unset it")
    return value


def github_actions() -> bool:
    """Whether this runs under GitHub Actions (GITHUB_ACTIONS set to a true value; any other
    value is not an error: the variable belongs to the runner)."""
    return (env("GITHUB_ACTIONS") or "").strip().lower() in TRUE


def env_bool(name: str) -> bool | None:
    raw = env(name)
    if raw is None:
        return None
    return parse_bool(raw, name)


def parse_bool(raw: str, where: str) -> bool:
    v = raw.strip().lower()
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise UsageError(f"{where}={raw!r}: expected a boolean",
                     hint=f"one of {', '.join(TRUE)} or {', '.join(f for f in FALSE if f)}")


MAX_INT = 10**18
"""The largest integer a setting takes from a variable or pyproject.toml (each command bounds its
own further: --jobs at jobs.MAX_JOBS); a 400-digit value never reaches float() or arithmetic."""


def _int(raw: str, where: str, minimum: int) -> int:
    if len(raw.lstrip("+-")) > 18 and raw.lstrip("+-").isdigit():
        raise UsageError(f"{where}: {raw[:40]!r}... is out of range (at most {MAX_INT})",
                         hint="leave it out to let rocmbuild choose")
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{where}: expected an integer, got {raw!r}",
                         hint=f"e.g. {where.split('=')[0]} 8") from None
    if value < minimum:
        raise UsageError(f"{where}: must be at least {minimum}, got {value}",
                         hint="leave it out to let rocmbuild choose")
    return value


# --------------------------------------------------------------------------- [tool.rocmbuild]

CONFIG_FILE = "pyproject.toml"
CONFIG_MAX_BYTES = 4 << 20


# (path, mtime_ns, size) -> the checked table: every setting a command resolves reads the same
# file, so it is parsed once per content, not once per setting.
_CONFIG_SEEN: dict[tuple[Path, int, int], dict[str, Any]] = {}


def project_config(cwd: Path | None = None) -> dict[str, Any]:
    """``[tool.rocmbuild]`` of ./pyproject.toml, checked: a control character (in a key or a
    value: ``untrusted.controls``, as recipes, stack files and nightly.toml), unknown keys and
    wrong types are usage errors naming the file and key. No file or no table: {}."""
    path = (cwd or Path.cwd()) / CONFIG_FILE
    try:
        st = path.lstat()  # a symlink, even a dangling one, is refused by the read
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc}", hint="fix or remove the file") from exc
    seen = (path, st.st_mtime_ns, st.st_size)
    if seen not in _CONFIG_SEEN:
        _CONFIG_SEEN[seen] = _read_config(path)
    return dict(_CONFIG_SEEN[seen])


def _read_config(path: Path) -> dict[str, Any]:
    """``[tool.rocmbuild]`` of ``path``, checked (``settings.read_toml``; every problem is
    collected by a ``settings.Reader``, the first is the error). A file that never names
    rocmbuild has no such table and is not parsed (a project's pyproject.toml is its own
    business, and parsing it cost every command, a cache hit included, the TOML parser's
    import); a ``\\u`` escape could spell the name in a quoted key, so a file with one is
    parsed."""
    from rocmbuild.core import settings

    kind = settings.TomlKind(
        "pyproject.toml", CONFIG_MAX_BYTES, settings.first_line,
        {"large": "a pyproject.toml is a few kilobytes; fix or remove the file",
         "unreadable": "pyproject.toml must be a regular file (not a FIFO, directory or "
                       "symbolic link); fix or remove it",
         "syntax": "fix the file's syntax, or remove it",
         "control": "[tool.rocmbuild] holds printable text only: retype the key or value "
                    "without it"},
        table="tool.rocmbuild", missing_ok=True,
        wanted=lambda raw: b"rocmbuild" in raw or b"\\u" in raw or b"\\U" in raw)
    try:
        table = settings.read_toml(path, kind)  # a FIFO is refused, never waited on
    except FileNotFoundError:
        return {}
    if table is None:
        return {}
    keys = {s.config: s for s in SETTINGS.values() if s.config}
    r = settings.Reader(str(path))
    for key, value in table.items():
        setting = keys.get(key)
        if setting is None:
            r.bad(f"tool.rocmbuild.{key}", "unknown key",
                  hint="known keys: " + ", ".join(sorted(keys)))
            continue
        try:
            _config_value(setting, value)
        except settings.Bad as exc:
            r.bad(f"tool.rocmbuild.{key}", exc.what,
                  hint=f"{key} = " + ("8" if setting.kind == "int" else '"..."'))
    r.stop()
    return dict(table)


def _config_value(setting: Setting, value: Any) -> Any:
    """One ``[tool.rocmbuild]`` value of ``setting``, or ``settings.Bad``."""
    from rocmbuild.core import settings

    ok = (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INT
          if setting.kind == "int" else isinstance(value, str) and value.strip() != "")
    if not ok:
        want = (f"an integer >= 1 (at most {MAX_INT:.0e})" if setting.kind == "int"
                else "a non-empty string")
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise settings.Bad(f"expected {want}, got {shown}")
    return value


def resolve(name: str, flag_value: Any, default: Any = None) -> Any:
    """One setting: the flag's value, else its variable, else ./pyproject.toml, else default.
    Every value is checked here by the setting's kind, and a bad one is a usage error naming
    where it came from: the flag, the variable or the file and key."""
    setting = SETTINGS[name]
    if flag_value is not None:
        return check(setting, flag_value, setting.flag)
    if setting.env:
        raw = os.environ.get(setting.env)
        if raw is not None and raw.strip() != "":
            if setting.kind == "int":
                return _int(raw.strip(), setting.env, 1)
            if setting.kind == "bool":
                return parse_bool(raw, setting.env)
            return check(setting, raw, setting.env)
    if setting.config:
        cfg = project_config()
        if setting.config in cfg:
            return check(setting, cfg[setting.config],
                         f"{CONFIG_FILE}: tool.rocmbuild.{setting.config}")
    return default


def origin(name: str, flag_value: Any) -> str:
    """Where ``resolve(name, flag_value)`` takes its value from, for messages: the flag, the
    variable, or the file and key (``<flag> (default)`` when none of them is set)."""
    setting = SETTINGS[name]
    if flag_value is not None:
        return setting.flag
    if setting.env and (os.environ.get(setting.env) or "").strip():
        return setting.env
    if setting.config and setting.config in project_config():
        return f"{CONFIG_FILE}: tool.rocmbuild.{setting.config}"
    return f"{setting.flag} (default)"


def check(setting: Setting, value: Any, where: str) -> Any:
    """``value`` of ``setting`` checked by its kind; ``where`` names its origin in errors."""
    if not isinstance(value, str):
        return value  # ints and bools: parsed by argparse, _int or project_config
    if "\0" in value:
        raise UsageError(f"{where}: contains a NUL character", hint="give a plain value")
    if setting.choices and value not in setting.choices:
        raise UsageError(f"{where}: expected one of {', '.join(setting.choices)}, got {value!r}",
                         hint=f"e.g. {where.split(':')[0]} {setting.choices[0]}")
    if setting.kind == "path":
        check_dir_path(Path(value), where)
    elif setting.kind == "dir":
        if not Path(value).is_dir():
            raise UsageError(f"{where}: {value} is not an existing directory",
                             hint="give the directory's path, or leave it out to use the default")
    elif setting.kind == "version":
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", value.strip()):
            raise UsageError(f"{where}: expected a version such as 6.2 or 6.2.4, got {value!r}",
                             hint="the ROCm major.minor[.patch], e.g. 6.2")
    elif setting.kind == "build-tag":
        if not re.fullmatch(BUILD_TAG, value):
            raise UsageError(f"{where}: {value!r} is not a build tag",
                             hint="a number that starts the tag, e.g. 1 (PEP 427: among files of "
                             "one version, pip takes the highest build tag)")
    elif setting.kind == "arch":
        from rocmbuild.core import gfx as arch  # arch reads options: imported here, not at the top

        arch.check_spec(value, where)
    return value


def check_dir_path(path: Path, where: str) -> None:
    """A directory rocmbuild may create: it is one, or its nearest existing parent is one.
    A file in the way is a usage error naming ``where`` (the flag, variable or key)."""
    if str(path).strip() == "":
        raise UsageError(f"{where}: empty path", hint="give a directory, or leave it out")
    p = path.absolute()
    for q in (p, *p.parents):
        try:
            exists = q.exists()
        except OSError as exc:
            raise UsageError(f"{where}: {q}: {exc.strerror or exc}",
                             hint="give a directory you can write") from exc
        if not exists:
            continue
        if not q.is_dir():
            what = "is not a directory" if q == p else f"cannot be created: {q} is not a directory"
            raise UsageError(f"{where}: {p} {what}",
                             hint="give a directory path (a file is in the way)")
        if not os.access(q, os.W_OK | os.X_OK):
            raise UsageError(f"{where}: {q} is not writable",
                             hint="give a directory you can write")
        return
