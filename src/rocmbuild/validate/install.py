"""Isolated install, import check and torch compatibility guard.

A fresh venv is made with ``--system-site-packages``. The host's torch is never reinstalled from
an index: when it lives outside the base interpreter's site-packages (a venv or conda env), its
directory is added to the new venv through a ``.pth`` file (``--torch-from`` names it explicitly).
Wheels go in with ``--no-deps``; their declared requirements, except torch, are installed next
(already-satisfied ones are found on the inherited paths and not fetched).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmbuild.artifacts import wheel
from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core import fsutil, hostenv, untrusted
from rocmbuild.core.errors import ToolchainError, UsageError, ValidationError
from rocmbuild.core.run import redact, run

# Requirements never installed from an index by the validator.
NEVER_INSTALL = {"torch", "pytorch-triton-rocm"}


def read_wheel(path: Path) -> WheelInfo:
    """``rocmbuild.artifacts.wheel.read_wheel``, its errors as this command's: a missing or
    non-.whl path
    is a UsageError, a malformed wheel a ValidationError."""
    if not path.is_file():
        raise UsageError(f"{path}: no such wheel file", hint="pass paths to .whl files")
    if path.suffix != ".whl":
        raise UsageError(f"{path}: not a .whl file", hint="pass paths to .whl files")
    try:
        info = wheel.read_wheel(path)
    except wheel.WheelFormatError as exc:
        raise ValidationError(exc.message, hint=exc.hint) from exc
    _check_shape(info)
    return info


# rocmbuild.json keys the validator reads, and the JSON shape each must have.
_PROVENANCE_SHAPES: dict[str, tuple[type, ...]] = {
    "archs": (list,), "runtime_env": (dict,), "torch": (dict, type(None)),
    "rocm_version": (str, type(None)), "recipe": (str, type(None)),
}


def _check_shape(info: WheelInfo) -> None:
    """What pip and the validator will read, checked before any venv exists: the dist-info's
    text files as UTF-8, and rocmbuild.json's keys in their shapes."""
    import zipfile

    path = info.path
    bad = f"rebuild {path.name}; it is not a wheel pip can install"
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            dist_info = next(n.split("/")[0] for n in names
                             if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            for name in ("METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt"):
                member = f"{dist_info}/{name}"
                if member in names:
                    try:
                        zf.read(member).decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise ValidationError(f"{path}: {member} is not UTF-8 text ({exc.reason} "
                                              f"at byte {exc.start})", hint=bad) from exc
    except (OSError, zipfile.BadZipFile, StopIteration) as exc:
        raise ValidationError(f"{path}: not a readable wheel ({exc})", hint=bad) from exc
    prov = info.provenance or {}
    where = f"{path}: {dist_info}/{wheel.PROVENANCE}"
    for key, types in _PROVENANCE_SHAPES.items():
        value = prov.get(key)
        if key in prov and not isinstance(value, types):
            raise ValidationError(f"{where}: {key} has the wrong shape "
                                  f"({type(value).__name__})",
                                  hint="rebuild the wheel with rocmbuild")
    if not all(isinstance(a, str) for a in prov.get("archs") or []) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in (prov.get("runtime_env") or {}).items()):
        raise ValidationError(f"{where}: archs / runtime_env hold non-strings",
                              hint="rebuild the wheel with rocmbuild")


def requirements_to_install(wheels: list[WheelInfo]) -> list[str]:
    """Declared requirements of all wheels, minus torch and minus the wheels themselves."""
    own = {canonicalize_name(w.name) for w in wheels}
    out: list[str] = []
    for w in wheels:
        for spec in w.requires_dist:
            try:
                req = Requirement(spec)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            cname = canonicalize_name(req.name)
            if cname in NEVER_INSTALL or cname in own:
                continue
            if str(req) not in out:
                out.append(str(req))
    return out


# ----------------------------------------------------------------------------- the venv


@dataclass
class Venv:
    root: Path
    python: Path
    torch_from: Path | None
    log: Path
    pip: list[str]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        # The host's variables through the allow-list only (hostenv.VALIDATE_PASS).
        env = hostenv.passed(os.environ, hostenv.VALIDATE_PASS)
        env.pop("PYTHONPATH", None)  # nothing of the caller's may shadow the wheels under test
        env.pop("PYTHONHOME", None)
        env["VIRTUAL_ENV"] = str(self.root)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env.update(extra or {})
        return env


def host_torch_dir() -> Path | None:
    """The directory holding the torch package this interpreter would import (not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def create_venv(root: Path, log: Path, torch_from: Path | None = None) -> Venv:
    if torch_from is not None:
        torch_from = torch_from.absolute()
        if not (torch_from / "torch" / "__init__.py").is_file():
            raise UsageError(f"--torch-from {torch_from}: no torch package in that directory",
                             hint="name the site-packages directory that contains torch/")
    else:
        torch_from = host_torch_dir()
    base = [sys.executable, "-m", "venv", "--system-site-packages", "--clear"]
    pip: list[str] | None = None
    r = run([*base, str(root)], log_path=log, check=False)
    if r.returncode != 0:
        # No ensurepip for the base interpreter (e.g. Debian without python3-venv): make the
        # venv without pip and drive it with this interpreter's pip (`pip --python`).
        run([*base, "--without-pip", str(root)], log_path=log,
            hint=f"could not create a venv with {sys.executable}; read {log}")
        pip = [sys.executable, "-m", "pip", "--python", str(root / "bin" / "python")]
    py = root / "bin" / "python"
    site = next((root / "lib").glob("python3*/site-packages"))
    if torch_from is not None:
        # Appended after the venv's own site-packages, so the wheels under test win.
        fsutil.write_atomic(site / "_rocmbuild_torch.pth", f"{torch_from}\n")
    return Venv(root, py, torch_from, log, pip or [str(py), "-m", "pip"])


def install(venv: Venv, wheels: list[WheelInfo]) -> tuple[bool, str]:
    """Install wheels with --no-deps, then their requirements except torch. (ok, output tail)."""
    pip = [*venv.pip, "install", "--no-input"]
    r = run([*pip, "--no-deps", *[str(w.path) for w in wheels]], env=venv.env(),
            log_path=venv.log, check=False)
    if r.returncode != 0:
        return False, r.output
    reqs = requirements_to_install(wheels)
    if reqs:
        r = run([*pip, *reqs], env=venv.env(), log_path=venv.log, check=False)
        if r.returncode != 0:
            return False, redact(f"installing requirements {' '.join(reqs)} failed:\n{r.output}")
    return True, r.output


def install_extra(venv: Venv, reqs: list[str], origin: str) -> None:
    """Install validation requirements (``validate --with``, ``[validate] requires``) into the
    venv from the configured index / find-links (pip's own config and PIP_* variables). A
    failure is the host's (exit 10), not the wheel's."""
    if not reqs:
        return
    r = run([*venv.pip, "install", "--no-input", *reqs], env=venv.env(), log_path=venv.log,
            check=False)
    if r.returncode != 0:
        cause = next((ln.strip() for ln in reversed(r.output.splitlines())
                      if ln.strip().startswith("ERROR:")), f"pip exited with {r.returncode}")
        raise ToolchainError(
            redact(f"{origin}: cannot install {' '.join(reqs)} into the validation venv: {cause}"),
            hint="check the name and that the configured index / find-links (pip.conf, "
            f"PIP_INDEX_URL, PIP_FIND_LINKS) carries it; pip's output is in {venv.log}")


_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'")


def missing_host_module(error: str, own: set[str]) -> str | None:
    """The top-level module an import error says is missing, when none of the wheels under test
    provides it (a runtime dependency the host lacks); else None."""
    m = _MISSING_MODULE.match(error)
    if m is None:
        return None
    top = m.group(1).split(".")[0]
    return None if top in own else top


_PROBE = r"""
import importlib, json, sys, traceback
res = {"python": sys.version.split()[0], "torch": None, "imports": {}}
try:
    import torch
    res["torch"] = {
        "version": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "path": torch.__file__,
        "gpu": bool(torch.cuda.is_available()),
    }
except Exception as exc:
    res["torch_error"] = f"{type(exc).__name__}: {exc}"
for mod in sys.argv[1:]:
    try:
        m = importlib.import_module(mod)
        res["imports"][mod] = {"ok": True, "file": getattr(m, "__file__", None)}
    except BaseException as exc:
        res["imports"][mod] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                               "traceback": traceback.format_exc()[-2000:]}
try:  # the shared libraries the imports mapped (which of a wheel's native libraries loaded)
    with open("/proc/self/maps") as maps:
        res["mapped"] = sorted({ln.split()[-1].rsplit("/", 1)[-1] for ln in maps
                                if len(ln.split()) >= 6 and ".so" in ln.split()[-1]})
except OSError:
    pass
print("@@ROCMBUILD@@" + json.dumps(res))
"""


def probe(venv: Venv, modules: list[str], extra_env: dict[str, str] | None = None
          ) -> dict[str, Any]:
    """Import torch and each module inside the venv; returns torch facts and import results."""
    r = run([str(venv.python), "-c", _PROBE, *modules], env=venv.env(extra_env),
            log_path=venv.log, capture=True, check=False, cwd=venv.root)
    for line in r.output.splitlines():
        if line.startswith("@@ROCMBUILD@@"):  # printed by _PROBE, after importing the wheels
            try:
                found = untrusted.obj(untrusted.loads(line[len("@@ROCMBUILD@@"):]), "probe")
                imports = untrusted.obj(found.get("imports"), "probe.imports")
                if not all(isinstance(v, dict) and isinstance(v.get("ok"), bool)
                           for v in imports.values()):
                    raise untrusted.BadJson("probe.imports: expected {ok: true|false} each")
                if found.get("torch") is not None:
                    untrusted.obj(found["torch"], "probe.torch")
            except untrusted.BadJson as exc:
                return _probe_failed(modules, f"the import probe printed a line that is not "
                                     f"its report ({exc})")
            return found
    tail = "\n".join(r.output.splitlines()[-15:])
    return _probe_failed(modules, f"the import probe crashed (exit {r.returncode}): {tail}")


def _probe_failed(modules: list[str], why: str) -> dict[str, Any]:
    return {"torch": None, "imports": {m: {"ok": False, "error": why} for m in modules}}


# ----------------------------------------------------------------------------- the guard


@dataclass
class GuardResult:
    problems: list[str] = field(default_factory=list)  # failures
    warnings: list[str] = field(default_factory=list)
    checked: dict[str, Any] = field(default_factory=dict)


def _release(v: str) -> str:
    try:
        return Version(v).base_version
    except InvalidVersion:
        return v.split("+")[0]


def _major_minor(v: str | None) -> str | None:
    if not v:
        return None
    parts = re.findall(r"\d+", v)
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def guard(meta: dict[str, Any] | None, env_torch: dict[str, Any] | None, native: bool,
          wheel_name: str = "wheel") -> GuardResult:
    """Compare what the wheel was built against (rocmbuild.json) with the venv's torch.

    Mismatches fail a wheel with native code (it is bound to torch's C++ ABI); for a pure-Python
    wheel they are warnings.
    """
    g = GuardResult()
    if meta is None:
        g.warnings.append(f"{wheel_name}: no rocmbuild.json in the wheel; compatibility guard "
                          "skipped")
        return g
    built = meta.get("torch") or {}
    if env_torch is None:
        g.problems.append("torch cannot be imported in the validation venv")
        return g
    issues: list[str] = []
    want_v, have_v = built.get("version"), env_torch.get("version")
    g.checked["torch.version"] = {"wheel": want_v, "env": have_v}
    if want_v and have_v and _release(want_v) != _release(have_v):
        issues.append(f"torch version: wheel built against {want_v}, environment has {have_v}")
    want_hip = built.get("hip") or None
    rocm = meta.get("rocm_version")
    have_hip = env_torch.get("hip")
    g.checked["torch.hip"] = {"wheel": want_hip, "rocm_version": rocm, "env": have_hip}
    if want_hip and not have_hip:
        issues.append(f"HIP: wheel built for a ROCm torch (HIP {want_hip}), environment torch "
                      f"{have_v} is not a ROCm build")
    elif want_hip and _major_minor(want_hip) != _major_minor(have_hip):
        issues.append(f"HIP: wheel built for HIP {want_hip}, environment torch has HIP {have_hip}")
    elif not want_hip and rocm and have_hip and native and (
            _major_minor(str(rocm)) != _major_minor(have_hip)):
        issues.append(f"ROCm: wheel built for ROCm {rocm}, environment torch has HIP {have_hip}")
    want_abi, have_abi = built.get("cxx11_abi"), env_torch.get("cxx11_abi")
    g.checked["cxx11_abi"] = {"wheel": want_abi, "env": have_abi}
    if want_abi is not None and have_abi is not None and bool(want_abi) != bool(have_abi):
        issues.append(f"_GLIBCXX_USE_CXX11_ABI: wheel {int(bool(want_abi))}, environment torch "
                      f"{int(bool(have_abi))}")
    if native:
        g.problems.extend(issues)
    else:
        g.warnings.extend(f"{i} (pure-Python wheel: not ABI-bound, warning only)" for i in issues)
    return g


def guard_hint(meta: dict[str, Any] | None) -> str:
    recipe = (meta or {}).get("recipe") or "<recipe>"
    built = ((meta or {}).get("torch") or {}).get("version") or "the wheel's torch"
    return (f"install torch {built} in this environment, or rebuild the wheel against this "
            f"torch: `rocmbuild build {recipe}` on this host")
