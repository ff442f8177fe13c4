"""Load recipes/*.toml into frozen dataclasses, reporting every problem at once.

Each problem is one line: ``<file>: <key.path>: <what> (did you mean X?)``.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import string
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmbuild import config, log
from rocmbuild.arch import KNOWN_ARCHS
from rocmbuild.errors import RecipeError, UsageError
from rocmbuild.recipe.model import (
    BACKENDS,
    HOST_REQUIREMENTS,
    PLACEHOLDERS,
    SCHEMA_VERSION,
    WHEN_KEYS,
    Patch,
    Recipe,
    Source,
    Variant,
)

HEX40 = re.compile(r"^[0-9a-f]{40}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")

# Variables rocmbuild knows by name. An env key that is not one of these but is one typo away
# from one is reported (GPU_ARCH -> GPU_ARCHS); other names pass, since recipes may set anything.
KNOWN_ENV = (
    "GPU_ARCHS",
    "MAX_JOBS",
    "BUILD_TARGET",
    "FLASH_ATTENTION_FORCE_BUILD",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE",
    "FLASH_ATTENTION_SKIP_CK_BUILD",
    "FLASH_ATTENTION_FORCE_CXX11_ABI",
    "PYTORCH_ROCM_ARCH",
    "USE_ROCM",
    "USE_CUDA",
    "BUILD_TEST",
    "USE_FLASH_ATTENTION",
    "USE_MEM_EFF_ATTENTION",
    "USE_NCCL",
    "USE_RCCL",
    "USE_KINETO",
    "USE_MPI",
    "USE_DISTRIBUTED",
    "BUILD_DEBUG_INFO",
    "ROCM_PATH",
    "HIP_PATH",
    "ROCM_HOME",
    "HIP_PLATFORM",
    "HIP_CXX",
    "HIP_ARCHS",
    "HIP_FLAGS",
    "CMAKE_BUILD_PARALLEL_LEVEL",
    "CMAKE_ARGS",
    "PYTORCH_BUILD_VERSION",
    "PYTORCH_BUILD_NUMBER",
    "CMAKE_PREFIX_PATH",
)

SCHEMA: dict[str, Any] = {
    "schema_version": int,
    "package": {"name": str, "description": str, "version": str},
    "target": {"rocm": str},
    "source": {
        "git": str,
        "commit": str,
        "ref": str,
        "submodules": list,
        "sdist": dict,
        "url": str,
        "sha256": str,
        "path": str,
        "alternatives": dict,
    },
    "arch": {"supported": list, "env": dict},
    "build": {
        "backend": str,
        "no_build_isolation": bool,
        "mem_per_job_gb": (int, float),
        "disk_gb": (int, float),
        "env": dict,
        "python_requires": list,
        "host_requires": list,
        "hipify": list,
        "cmake_args": list,
        "pip_args": list,
        "default_variant": str,
    },
    "variants": dict,
    "patches": list,
    "validate": {"imports": list, "kernel": str},
}
SOURCE_KEYS = ("git", "commit", "ref", "submodules", "sdist", "url", "sha256", "path")
VARIANT_KEYS = {
    "description": str,
    "env": dict,
    "mem_per_job_gb": (int, float),
    "host_requires": list,
    "disk_gb": (int, float),
    "runtime_env": dict,
}
PATCH_KEYS = {"file": str, "sha256": str, "reason": str, "when": dict, "link": str}
TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    dict: "a table",
    (int, float): "a number",
}


def _suggest(key: str, choices: Any, cutoff: float = 0.75) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def bad(self, key: str, msg: str) -> None:
        self.problems.append(f"{self.path}: {key}: {msg}")

    def table(self, data: dict[str, Any], schema: dict[str, Any], prefix: str) -> None:
        for key, value in data.items():
            full = f"{prefix}{key}"
            if key not in schema:
                self.bad(full, "unknown key" + _suggest(key, schema))
                continue
            want = schema[key]
            if isinstance(want, dict):
                if not isinstance(value, dict):
                    self.bad(full, f"expected a table, got {type(value).__name__}")
                else:
                    self.table(value, want, full + ".")
            elif not self.typed(value, want):
                self.bad(full, f"expected {TYPE_NAMES[want]}, got {type(value).__name__}")

    @staticmethod
    def typed(value: Any, want: Any) -> bool:
        if want is int or want == (int, float):
            return isinstance(value, want) and not isinstance(value, bool)
        return isinstance(value, want)

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            if isinstance(value, list):
                self.bad(key, "expected a list of strings")
            return ()
        return tuple(value)

    def env(self, value: Any, key: str) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, dict):
            return ()
        out = []
        for name, val in value.items():
            k = f"{key}.{name}"
            if not isinstance(val, str):
                self.bad(k, f'expected a string, got {type(val).__name__} (quote it: "{val}")')
                continue
            if name not in KNOWN_ENV:
                close = difflib.get_close_matches(name, KNOWN_ENV, n=1, cutoff=0.9)
                if close:
                    self.bad(k, f"unknown variable (did you mean {close[0]}?)")
                    continue
            self.placeholders(val, k)
            out.append((name, val))
        return tuple(out)

    def placeholders(self, text: str, key: str) -> None:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            self.bad(key, f"bad placeholder syntax in {text!r}: {exc} (write {{{{ for a brace)")
            return
        for f in fields:
            if f not in PLACEHOLDERS:
                self.bad(
                    key,
                    f"unknown placeholder {{{f}}}"
                    + _suggest(f, PLACEHOLDERS)
                    + f"; known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                )

    def source(self, data: Any, key: str) -> Source | None:
        if not isinstance(data, dict):
            self.bad(key, "expected a table with one of git, sdist, path")
            return None
        for k in data:
            if k not in SOURCE_KEYS and not (key == "source" and k == "alternatives"):
                self.bad(f"{key}.{k}", "unknown key" + _suggest(k, SOURCE_KEYS))
        kinds = [k for k in ("git", "sdist", "path") if k in data]
        if len(kinds) != 1:
            what = "none" if not kinds else " and ".join(kinds)
            self.bad(key, f"needs exactly one of git, sdist, path (found {what})")
            return None
        kind = kinds[0]
        if kind == "git":
            url, commit = data.get("git"), data.get("commit", "")
            if not isinstance(url, str) or not url:
                self.bad(f"{key}.git", "expected a repository URL")
            if not isinstance(commit, str) or not HEX40.match(commit):
                self.bad(
                    f"{key}.commit",
                    f"must be a full 40-hex commit sha, got {commit!r} "
                    "(a tag or short sha is not a pin: `git rev-parse <tag>^{commit}`)",
                )
            subs = data.get("submodules", [])
            if subs is True:
                subs = ["*"]
            return Source(
                "git",
                url=str(url),
                commit=str(commit),
                ref=str(data.get("ref", "")),
                submodules=self.strings(subs, f"{key}.submodules"),
            )
        if kind == "sdist":
            sd = data["sdist"]
            if isinstance(sd, str):
                sd = {"url": sd, "sha256": data.get("sha256", "")}
            if not isinstance(sd, dict):
                self.bad(f"{key}.sdist", "expected { url = ..., sha256 = ... }")
                return None
            for k in sd:
                if k not in ("url", "sha256"):
                    self.bad(f"{key}.sdist.{k}", "unknown key" + _suggest(k, ("url", "sha256")))
            url, sha = sd.get("url", ""), sd.get("sha256", "")
            if not isinstance(url, str) or not re.match(r"^(https?|file)://", url):
                self.bad(
                    f"{key}.sdist.url", f"expected an https://, http:// or file:// URL, got {url!r}"
                )
            if not isinstance(sha, str) or not HEX64.match(sha):
                self.bad(
                    f"{key}.sdist.sha256",
                    "must be the archive's 64-hex sha256 (`sha256sum <file>`)",
                )
            return Source("sdist", url=str(url), sha256=str(sha))
        p = data["path"]
        if not isinstance(p, str):
            self.bad(f"{key}.path", "expected a string")
            return None
        if not (self.path.parent / p).is_dir():
            self.bad(f"{key}.path", f"{(self.path.parent / p)} is not a directory")
        return Source("path", path=p)

    def number(self, value: Any, key: str, default: float) -> float:
        if value is None:
            return default
        if not self.typed(value, (int, float)):
            return default  # type problem already reported
        if value <= 0:
            self.bad(key, f"must be > 0, got {value}")
            return default
        return float(value)

    def host_requires(self, value: Any, key: str) -> tuple[str, ...]:
        items = self.strings(value, key)
        for item in items:
            base = re.split(r"[<>=]", item, maxsplit=1)[0]
            if base not in HOST_REQUIREMENTS:
                self.bad(
                    key,
                    f"unknown requirement {item!r}"
                    + _suggest(base, HOST_REQUIREMENTS)
                    + f"; known: {', '.join(HOST_REQUIREMENTS)}",
                )
        return items


def find_recipe(name: str) -> Path:
    """A recipe by name (searched in config.recipe_dirs()) or by path."""
    p = Path(name)
    if p.suffix == ".toml" or "/" in name:
        if not p.is_file():
            raise UsageError(f"recipe file {name} not found", hint="check the path")
        return p
    for d in config.recipe_dirs():
        cand = d / f"{name}.toml"
        if cand.is_file():
            return cand
    names = available()
    raise UsageError(
        f"unknown recipe {name!r}" + _suggest(name, names),
        hint="available: " + (", ".join(names) or "none") + " (`rocmbuild recipes`)",
    )


def available() -> list[str]:
    names: list[str] = []
    for d in config.recipe_dirs():
        if d.is_dir():
            names += [p.stem for p in sorted(d.glob("*.toml")) if p.stem not in names]
    return names


def _display(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def load(path: Path) -> Recipe:
    """Parse and check a recipe. Raises RecipeError listing every problem."""
    shown = _display(path)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeError(
            [f"{shown}: invalid TOML: {exc}"],
            hint="fix the syntax; see recipes/flash-attn.toml for an example",
        ) from exc
    c = _Checker(shown)
    c.table(data, SCHEMA, "")
    sv = data.get("schema_version")
    if sv is None:
        c.bad("schema_version", f"missing (add `schema_version = {SCHEMA_VERSION}` at the top)")
    elif sv != SCHEMA_VERSION:
        c.bad(
            "schema_version", f"unsupported version {sv!r}; this rocmbuild reads {SCHEMA_VERSION}"
        )
    pkg = data.get("package", {}) if isinstance(data.get("package"), dict) else {}
    name = pkg.get("name")
    if not isinstance(name, str) or not name:
        c.bad("package.name", 'missing (the distribution name, e.g. "flash-attn")')
        name = path.stem
    source = c.source(data.get("source"), "source") if "source" in data else None
    if "source" not in data:
        c.bad("source", "missing (a [source] table with git, sdist or path)")
    alternatives: dict[str, Source] = {}
    alts = (
        data.get("source", {}).get("alternatives", {})
        if isinstance(data.get("source"), dict)
        else {}
    )
    if isinstance(alts, dict):
        for alt_name, alt in alts.items():
            if alt_name == "default":
                c.bad("source.alternatives.default", "'default' is reserved for [source]")
            s = c.source(alt, f"source.alternatives.{alt_name}")
            if s is not None:
                alternatives[alt_name] = s
    arch = data.get("arch", {}) if isinstance(data.get("arch"), dict) else {}
    supported = c.strings(arch.get("supported", []), "arch.supported")
    for a in supported:
        if a not in KNOWN_ARCHS:
            c.bad("arch.supported", f"unknown GPU architecture {a!r}" + _suggest(a, KNOWN_ARCHS))
    arch_env = c.env(arch.get("env", {}), "arch.env")
    build = data.get("build", {}) if isinstance(data.get("build"), dict) else {}
    backend = build.get("backend", "pip-wheel")
    if isinstance(backend, str) and backend not in BACKENDS:
        c.bad(
            "build.backend",
            f"unknown backend {backend!r}"
            + _suggest(backend, BACKENDS)
            + f"; known: {', '.join(BACKENDS)}",
        )
    variants: dict[str, Variant] = {}
    raw_variants = data.get("variants", {}) if isinstance(data.get("variants"), dict) else {}
    for vname, v in raw_variants.items():
        key = f"variants.{vname}"
        if not isinstance(v, dict):
            c.bad(key, "expected a table")
            continue
        c.table(v, VARIANT_KEYS, key + ".")
        variants[vname] = Variant(
            name=vname,
            description=str(v.get("description", "")),
            env=c.env(v.get("env", {}), f"{key}.env"),
            mem_per_job_gb=c.number(v.get("mem_per_job_gb"), f"{key}.mem_per_job_gb", 0) or None,
            host_requires=(
                c.host_requires(v["host_requires"], f"{key}.host_requires")
                if "host_requires" in v
                else None
            ),
            disk_gb=c.number(v.get("disk_gb"), f"{key}.disk_gb", 0) or None,
            runtime_env=c.env(v.get("runtime_env", {}), f"{key}.runtime_env"),
        )
    default_variant = build.get("default_variant", next(iter(variants), "default"))
    if variants and default_variant not in variants:
        c.bad(
            "build.default_variant",
            f"{default_variant!r} is not a variant"
            + _suggest(str(default_variant), variants, 0.5)
            + f"; variants: {', '.join(variants)}",
        )
    patches = _patches(c, data.get("patches", []), path, variants, alternatives)
    validate = data.get("validate", {}) if isinstance(data.get("validate"), dict) else {}
    hipify = c.strings(build.get("hipify", []), "build.hipify")
    for i, arg in enumerate(hipify):
        c.placeholders(arg, f"build.hipify[{i}]")
    cmake_args = c.strings(build.get("cmake_args", []), "build.cmake_args")
    for i, arg in enumerate(cmake_args):
        c.placeholders(arg, f"build.cmake_args[{i}]")
    version = pkg.get("version", "")
    if backend == "cmake" and not version:
        c.bad("package.version", "missing (the cmake backend needs the wheel version, "
              "e.g. version = \"1.0.0\")")
    fields = {
        "mem_per_job_gb": c.number(build.get("mem_per_job_gb"), "build.mem_per_job_gb", 2.0),
        "disk_gb": c.number(build.get("disk_gb"), "build.disk_gb", 5.0),
        "env": c.env(build.get("env", {}), "build.env"),
        "python_requires": c.strings(build.get("python_requires", []), "build.python_requires"),
        "host_requires": c.host_requires(build.get("host_requires", []), "build.host_requires"),
        "pip_args": c.strings(build.get("pip_args", []), "build.pip_args"),
        "validate_imports": c.strings(validate.get("imports", []), "validate.imports"),
    }
    if c.problems or source is None:
        raise RecipeError(
            c.problems or [f"{shown}: source: missing"],
            hint="fix the keys above; `rocmbuild plan <recipe> --arch gfx942` "
            "checks a recipe without building",
        )
    return Recipe(
        path=path,
        name=name,
        description=str(pkg.get("description", "")),
        source=source,
        alternatives=alternatives,
        supported_archs=supported,
        arch_env=arch_env,
        rocm_default=str(data.get("target", {}).get("rocm", "6.2")),
        backend=str(backend),
        no_build_isolation=bool(build.get("no_build_isolation", True)),
        hipify=hipify,
        cmake_args=cmake_args,
        version=str(version),
        default_variant=str(default_variant),
        variants=variants,
        patches=patches,
        validate_kernel=str(validate.get("kernel", "")),
        raw_sha256=hashlib.sha256(raw).hexdigest(),
        **fields,  # type: ignore[arg-type]
    )


def _patches(
    c: _Checker,
    items: Any,
    path: Path,
    variants: dict[str, Variant],
    alternatives: dict[str, Source],
) -> tuple[Patch, ...]:
    if not isinstance(items, list):
        return ()
    out: list[Patch] = []
    valid: dict[str, Callable[[str], bool]] = {
        "variant": lambda v: v in variants,
        "source": lambda v: v == "default" or v in alternatives,
        "arch": lambda v: v in KNOWN_ARCHS,
        "gpu_vendor": lambda v: v in ("amd", "nvidia"),
    }
    for i, item in enumerate(items):
        key = f"patches[{i}]"
        if not isinstance(item, dict):
            c.bad(key, "expected a table ([[patches]] with file, sha256, reason)")
            continue
        c.table(item, PATCH_KEYS, key + ".")
        for req in ("file", "sha256", "reason"):
            if req not in item:
                c.bad(f"{key}.{req}", "missing")
        f = path.parent / str(item.get("file", ""))
        sha = str(item.get("sha256", ""))
        if "file" in item:
            if not f.is_file():
                c.bad(f"{key}.file", f"{f} not found")
            elif "sha256" in item:
                actual = hashlib.sha256(f.read_bytes()).hexdigest()
                if actual != sha:
                    c.bad(f"{key}.sha256", f"does not match {item['file']} (file has {actual})")
        when: list[tuple[str, tuple[str, ...]]] = []
        raw_when = item.get("when")
        when_table: dict[str, Any] = raw_when if isinstance(raw_when, dict) else {}
        for wk, wv in when_table.items():
            if wk not in WHEN_KEYS:
                c.bad(
                    f"{key}.when.{wk}",
                    "unknown condition"
                    + _suggest(wk, WHEN_KEYS)
                    + f"; known: {', '.join(WHEN_KEYS)}",
                )
                continue
            values = (wv,) if isinstance(wv, str) else c.strings(wv, f"{key}.when.{wk}")
            for v in values:
                if not valid[wk](v):
                    c.bad(f"{key}.when.{wk}", f"{v!r} is not a known {wk.replace('_', ' ')}")
            when.append((wk, tuple(values)))
        out.append(
            Patch(
                file=f,
                sha256=sha,
                reason=str(item.get("reason", "")),
                when=tuple(when),
                link=str(item.get("link", "")),
            )
        )
    return tuple(out)


def cli_list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for name in available():
        recipe = load(find_recipe(name))
        rows.append(
            {
                "name": name,
                "package": recipe.name,
                "description": recipe.description,
                "default_variant": recipe.default_variant,
                "variants": {v.name: v.description for v in recipe.variants.values()},
                "sources": ["default", *recipe.alternatives],
                "archs": list(recipe.supported_archs),
                "path": str(recipe.path),
            }
        )
    if args.json:
        log.out.print_json(json.dumps(rows))
        return 0
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("recipe", "variants (default first)", "sources", "archs"):
        table.add_column(col)
    for r in rows:
        variants = sorted(r["variants"], key=lambda v: v != r["default_variant"])  # type: ignore
        table.add_row(
            r["name"],
            ", ".join(variants) or "-",
            ", ".join(r["sources"]),
            ", ".join(r["archs"]) or "any",
        )
    log.out.print(table)
    return 0
