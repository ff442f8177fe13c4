"""The validation steps in order, over wheels validated together in one fresh venv: install,
guard, import, audit per wheel, then the kernel gate; failing wheels copied to <workdir>/broken/
(the given file is never moved or changed) and recorded failed in the cache, and
the reports written."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rocmbuild import __version__
from rocmbuild.artifacts import audit
from rocmbuild.artifacts.results import Status
from rocmbuild.artifacts.wheel import WheelInfo, built_build_only
from rocmbuild.cache import store as cache
from rocmbuild.core import config, fsutil, log
from rocmbuild.core.digest import sha256_file
from rocmbuild.core.errors import CacheError, RocmbuildError, ToolchainError, ValidationError
from rocmbuild.core.log import redact
from rocmbuild.validate import baseline as baseline_cmp
from rocmbuild.validate import install as inst
from rocmbuild.validate import kernels as kernel_step
from rocmbuild.validate import modelrun, upstream
from rocmbuild.validate import report as render
from rocmbuild.validate.model import (
    Environment,
    KernelsSummary,
    Step,
    ValidateOptions,
    ValidationReport,
    WheelReport,
)


def _audit_once(path: Path, archs: Sequence[str], device: bool
                ) -> tuple[audit.WheelAudit | None, str]:
    """The code-object audit of ``path`` for ``archs`` (the one audit of a wheel here: the
    audit step and the import step's device-code libraries both read it), or None and why it
    raised."""
    try:
        return audit.audit_wheel(path, archs, device=device), ""
    except Exception as exc:  # noqa: BLE001 - an audit crash is a failed audit with its text
        return None, f"audit raised {type(exc).__name__}: {exc}"


def _audit(found: audit.WheelAudit | None, crash: str, archs: Sequence[str],
           device: bool = True) -> Step:
    """The audit step for ``archs``; ``device=False`` (rocmbuild.json says rocm_runtime none):
    that no member carries device code, whatever the archs."""
    if not archs and device:
        return Step(Status.SKIPPED, "no archs: pass --arch or validate a wheel with rocmbuild.json")
    if found is None:
        return Step(Status.FAILED, crash)
    return Step(Status.SUCCESS if found.ok else Status.FAILED, "; ".join(found.problems),
                found.to_json())


def _runtime_env(infos: Sequence[WheelInfo]) -> dict[str, str]:
    """Environment the wheels need at import time: rocmbuild.json's ``runtime_env`` (from the
    recipe variant, e.g. FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE for the flash-attn Triton one)."""
    env: dict[str, str] = {}
    for w in infos:
        runtime = (w.provenance or {}).get("runtime_env") or {}
        env.update({str(k): str(v) for k, v in runtime.items()})
    return env


def _extra_requirements(infos: Sequence[WheelInfo], opts: ValidateOptions
                        ) -> tuple[list[str], str]:
    """``validate --with`` plus each wheel's recorded ``[validate] requires``, and where they
    came from (for the error line)."""
    reqs = list(opts.with_requirements)
    origins = ["validate --with"] if reqs else []
    for w in infos:
        recorded = (w.provenance or {}).get("validate_requires") or []
        if isinstance(recorded, list) and recorded:
            reqs += [str(r) for r in recorded if str(r) not in reqs]
            origins.append(f"{w.path.name}: [validate] requires")
    return reqs, " and ".join(origins)


_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _modules(w: WheelInfo) -> tuple[str, ...]:
    """What the import step imports from a wheel: its top-level modules and the submodules its
    recipe's [validate] imports named (recorded in rocmbuild.json's plan; e.g. a prebuilt
    extension, `deepspeed.ops.adam.cpu_adam_op`). The recorded list is untrusted: only dotted
    names under one of the wheel's own top-level modules are taken."""
    plan = (w.provenance or {}).get("plan")
    val = plan.get("validate") if isinstance(plan, dict) else None
    named = val.get("imports") if isinstance(val, dict) else None
    extra = [m for m in (named if isinstance(named, list) else [])
             if isinstance(m, str) and len(m) <= 200 and _MODULE.fullmatch(m)
             and m.split(".")[0] in w.top_level]
    return tuple(dict.fromkeys([*w.top_level, *extra]))


def _raise_if_host_lacks(infos: Sequence[WheelInfo], imports: Mapping[str, Any]) -> None:
    """A module the wheels import that none of them provides and the venv lacks is the host's
    problem (exit 10), not the wheel's: nothing is copied to broken/."""
    own = {m for w in infos for m in w.top_level}
    for w in infos:
        for mod in _modules(w):
            r = imports.get(mod) or {}
            missing = None if r.get("ok", True) else inst.missing_host_module(
                str(r.get("error", "")), own)
            if missing:
                raise ToolchainError(
                    f"{w.path.name}: import {mod} needs the module {missing!r}, which this "
                    "host's validation environment lacks (a runtime dependency the wheel does "
                    "not declare)",
                    hint=(TRITON_HINT if missing == "triton" else "")
                    + f"install it here (`pip install {missing}`), or pass `validate --with "
                    f"{missing}`, or add it to the recipe's [validate] requires; the wheel was "
                    "not copied to broken/")


TRITON_HINT = ("a Triton-kernel wheel needs triton and a GPU: a ROCm torch brings its matching "
               "triton (pytorch-triton-rocm), a CPU-only torch has none, so validate it on the "
               "GPU host; on this host, to check install and import only (the kernel gate is "
               "skipped without a GPU), ")


def _floors(infos: Sequence[WheelInfo]) -> dict[str, dict[str, float]]:
    """The wheels' recorded [validate.floor.<arch>] tables, by arch."""
    out: dict[str, dict[str, float]] = {}
    for w in infos:
        for arch in ((w.provenance or {}).get("validate_floor") or {}):
            out.setdefault(str(arch), {}).update(baseline_cmp.floor_for(w.provenance, str(arch)))
    return out


def _source_tree(src_root: Path, prov: Mapping[str, Any] | None) -> Path | None:
    """Where the build of this wheel left its source tree: <workdir>/src/<recipe>/<key[:16]>."""
    recipe, key = (prov or {}).get("recipe"), (prov or {}).get("cache_key")
    if not recipe or not key or not upstream.safe_relative(f"{recipe}/{key}"):
        return None
    return src_root / str(recipe) / str(key)[:16]


def _install_step(installed: bool, out: str, venv: inst.Venv) -> Step:
    if not installed:
        return Step(Status.FAILED, "pip install failed", "\n".join(out.splitlines()[-20:]))
    return Step(Status.SUCCESS, f"installed in an isolated venv (torch from "
                f"{venv.torch_from or 'system site-packages'})")


def _guard_step(w: WheelInfo, env_torch: Mapping[str, Any] | None) -> Step:
    g = inst.guard(w.provenance, dict(env_torch) if env_torch is not None else None, w.native,
                   w.path.name)
    if g.problems:
        return Step(Status.FAILED, "; ".join(g.problems) + ". " + inst.guard_hint(w.provenance),
                    g.checked)
    if g.warnings:
        return Step(Status.WARNING, "; ".join(g.warnings), g.checked)
    return Step(Status.SUCCESS, "torch version, HIP and C++ ABI match", g.checked)


def _device_libs(found: audit.WheelAudit | None) -> list[str]:
    """The file names of the wheel's shared libraries that carry HIP device code (none when the
    audit raised: the audit step reports that)."""
    if found is None:
        return []
    return sorted({o.name.rsplit("/", 1)[-1] for o in found.objects if o.archs})


def _import_step(w: WheelInfo, installed: bool, imports: Mapping[str, Any],
                 guard: Step, mapped: Sequence[str] | None = None,
                 env_torch: Mapping[str, Any] | None = None,
                 device_libs: Sequence[str] = ()) -> Step:
    if not installed:
        return Step(Status.SKIPPED, "install failed")
    bad = {m: r for m, r in imports.items() if m in _modules(w) and not r["ok"]}
    if not bad:
        done = "imported " + ", ".join(_modules(w))
        # Imported, yet none of its GPU libraries (HIP device code) is mapped: the package fell
        # back to what runs without them (bitsandbytes on a CPU torch). Which one, this host
        # decides: said, as the guard says a torch mismatch, not failed. (Some loading lazily is
        # normal: a torch wheel maps its core at import, not every bundled library.)
        if device_libs and mapped is not None and not set(device_libs) & set(mapped):
            t = env_torch or {}
            host = (f"torch {t.get('version')}" + (f" for HIP {t['hip']}" if t.get("hip")
                                                    else ", not a ROCm build")
                    + ("" if t.get("gpu") else ", no GPU")) if t else "no torch"
            return Step(Status.WARNING,
                        f"{done}, which loaded none of its libraries "
                        f"with device code ({', '.join(device_libs)}): on this host ({host}) it "
                        "runs its fallback without them; a host with a ROCm torch and the ROCm "
                        "the wheel was built for loads them", {"not_loaded": list(device_libs)})
        return Step(Status.SUCCESS, done)
    text = "; ".join(f"import {m}: {r['error']}" for m, r in bad.items())
    if guard.status.failed:
        text += " (see the guard: the wheel does not match this torch)"
    return Step(Status.FAILED, text, {m: r.get("traceback") for m, r in bad.items()})


def run(wheels: Sequence[Path], archs: Sequence[str] = (),
        options: ValidateOptions | None = None) -> ValidationReport:
    """Validate ``wheels`` together (one fresh venv). ``archs`` for the audit; empty: each wheel's
    rocmbuild.json "archs". Failing wheels stay where they are: a copy goes to <workdir>/broken/
    (unless options.copy_broken is False) and a cached build's entry is recorded as failed; the
    reports named in the options are written. Never raises for a failed check, only for bad
    input (UsageError, ValidationError for an unreadable wheel or an OSError on the workdir or a
    report path)."""
    opts = options or ValidateOptions()
    try:
        where = config.workspace(opts.workdir).root
        with fsutil.os_errors(ValidationError, "validate", where, OS_HINT):
            return _run(wheels, archs, opts)
    except RocmbuildError as exc:
        write_stopped(exc, opts.json_out, wheels)
        raise


def write_stopped(exc: RocmbuildError, json_out: Path | None, wheels: Sequence[Path]) -> None:
    """A validation that stopped before its report (a host problem, a bad baseline, an
    unreadable wheel, a bad flag) still leaves ``--json-file``: status ``error``, the error's
    kind, exit code, message and hint (user:password of a URL redacted). A run that failed
    validation (exit 8) is not this: it wrote its whole report before raising."""
    if json_out is None:
        return
    data = {"rocmbuild_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "status": "error", "wheels": [Path(w).name for w in wheels],
            "error": {"kind": exc.kind, "exit_code": exc.exit_code,
                      "message": redact(exc.message), "hint": redact(exc.hint or "")},
            "failures": [redact(f"{exc.kind}: {exc.message}")]}
    try:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        fsutil.write_atomic(json_out, json.dumps(data, indent=1))
    except OSError as err:  # the error being reported says more than this one
        log.warn(f"{json_out}: the error report could not be written: {err.strerror or err}")


OS_HINT = ("check that the workdir (--workdir / ROCMBUILD_WORKDIR) and the report paths "
           "(--json-file / --md / --html) are writable, with free space, and move away a file "
           "that stands where a directory belongs")


def _run(wheels: Sequence[Path], archs: Sequence[str], opts: ValidateOptions
         ) -> ValidationReport:
    t0 = time.monotonic()
    kernel_step.check_options(opts)
    for report_path in opts.outputs:  # one that cannot be written fails now, not after the
        report_path.parent.mkdir(parents=True, exist_ok=True)  # venv and the kernels
    baseline = baseline_cmp.load_baseline(opts.baseline) if opts.baseline else None
    infos = [inst.read_wheel(Path(w)) for w in wheels]
    for w in infos:
        if built_build_only(w):
            raise ValidationError(
                f"{w.path.name}: cannot be imported: it was compiled against a build-only ROCm "
                "torch, whose libc10_hip and libtorch_hip are link stubs (it proves the build "
                "compiles and links, nothing more)",
                hint="build it on a ROCm host with a real ROCm torch, then validate that wheel")
    ws = config.workspace(opts.workdir)
    store_file = baseline_cmp.store_path(ws.root)
    store = (baseline_cmp.read_store(store_file)
             if opts.baseline_store and baseline is None else None)
    variant = next((str(w.provenance.get("variant")) for w in infos
                    if w.provenance and w.provenance.get("variant")), "")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ws.root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"validate-{stamp}-", dir=ws.root))
    logf = ws.logs / f"validate-{stamp}.log"
    try:
        log.step(f"creating the validation venv (log {logf})")
        venv = inst.create_venv(tmp / "venv", logf, opts.torch_from)
        env_extra = _runtime_env(infos)
        if infos:
            log.step(f"installing {', '.join(w.path.name for w in infos)} with pip")
        installed, out = inst.install(venv, infos) if infos else (True, "")
        extra = _extra_requirements(infos, opts)
        if installed and extra[0]:
            log.step(redact(f"installing {' '.join(extra[0])} ({extra[1]})"))
            inst.install_extra(venv, *extra)
        modules = sorted({m for w in infos for m in _modules(w)})
        log.step(f"importing {', '.join(modules) or 'torch'} in the venv")
        probe = inst.probe(venv, modules, env_extra)
        _raise_if_host_lacks(infos, probe["imports"])
        env_torch = probe.get("torch")
        steps: dict[Path, dict[str, Step]] = {}
        for w in infos:
            s = steps[w.path] = {"install": _install_step(installed, out, venv)}
            s["guard"] = _guard_step(w, env_torch)
            want = list(archs) or list((w.provenance or {}).get("archs") or [])
            runtime = (w.provenance or {}).get("rocm_runtime")
            device = not (isinstance(runtime, dict) and runtime.get("mode") == "none")
            found, crash = (_audit_once(w.path, want, device)
                            if w.native or want or not device else (None, ""))
            s["import"] = _import_step(w, installed, probe["imports"], s["guard"],
                                       probe.get("mapped"), env_torch,
                                       _device_libs(found) if w.native else ())
            if want:
                log.step(f"auditing {w.path.name} for {', '.join(want)}")
            s["audit"] = _audit(found, crash, want, device)

        if not opts.kernels:
            kernels = KernelsSummary(Status.SKIPPED, "--no-kernels")
        elif not installed:
            kernels = KernelsSummary(Status.SKIPPED, "install failed")
        else:
            names = kernel_step.pick(opts, infos, env_torch)
            if names:
                log.step(f"kernel gate: {', '.join(names)}"
                         + (" (quick)" if opts.quick else ""))
            kernels = kernel_step.run_kernels(venv, names, opts, env_extra, tmp, baseline, store,
                                              variant, _floors(infos))
        if installed:
            model_check = modelrun.model_step(venv, infos, opts, env_extra, tmp)
            stack_check = modelrun.stack_step(venv, infos, opts, env_extra, tmp)
        else:
            model_check = stack_check = Step(Status.SKIPPED, "install failed")
        for i, w in enumerate(infos):
            if not installed:
                steps[w.path]["upstream"] = Step(Status.SKIPPED, "install failed")
                continue
            tree = opts.upstream_src or _source_tree(ws.src, w.provenance)
            st, why, detail = upstream.step(
                venv, w.provenance, tree, opts.upstream_tests, opts.upstream_time_s,
                tmp / f"upstream-{i}", env_extra, bool((env_torch or {}).get("gpu")))
            steps[w.path]["upstream"] = Step(st, why, detail)
    finally:
        if not opts.keep_venv:
            shutil.rmtree(tmp, ignore_errors=True)

    reports = []
    for w in infos:
        s = steps[w.path]
        if kernels.status.failed:  # the kernels came from these wheels
            s["kernels"] = Step(Status.FAILED, kernels.reason)
        if model_check.status.failed and "flash_attn" in w.top_level:
            s["model"] = Step(Status.FAILED, model_check.reason)
        copy = None
        if any(st.status.failed for st in s.values()):
            copy = _record_failure(w, ws, opts, logf)
        reports.append(WheelReport(w.path.name, w.display_name, str(w.version), s, copy))
    report = ValidationReport(
        wheels=tuple(reports), archs=tuple(archs), kernels=kernels,
        environment=Environment(
            torch=env_torch, torch_error=probe.get("torch_error"), python=probe.get("python"),
            runtime_env=env_extra, venv_torch_from=venv.torch_from, log=logf),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        duration_s=time.monotonic() - t0, paths=opts.outputs, model_check=model_check,
        stack_check=stack_check)
    if report.ok and opts.baseline_store and not opts.inject_fault:
        baseline_cmp.record(store_file, kernels.runs, variant, report.created)
    write_reports(report, opts)
    return report


def _record_failure(w: WheelInfo, ws: config.Workspace, opts: ValidateOptions, logf: Path
                    ) -> Path | None:
    """A failing wheel stays where it is, unchanged; its bytes are copied to ``broken/`` (where
    publish looks; unless ``copy_broken`` is off) and, when it is a cached build (rocmbuild.json's
    cache_key names an entry with the same sha256), that entry is recorded as failed."""
    copy = None
    if opts.copy_broken and w.path.is_file():
        copy = ws.broken / w.path.name
        if copy.resolve() != w.path.resolve():  # validating broken/<wheel> itself
            ws.broken.mkdir(parents=True, exist_ok=True)
            with fsutil.atomic_path(copy) as tmp:
                shutil.copyfile(w.path, tmp)
    key = str((w.provenance or {}).get("cache_key") or "")
    if not re.fullmatch(r"[0-9a-f]{64}", key):  # read from the wheel: untrusted
        return copy
    report = str(opts.md_out or opts.json_out or logf)
    try:
        entry = cache.lookup(ws.cache, key)
        if entry is not None and entry.sha256 == sha256_file(w.path):
            cache.record_validation(ws.cache, entry, cache.Validation("failed", report,
                                                                      time.time()))
    except CacheError as exc:  # the report still says what failed; the record is extra
        log.warn(f"{exc.message} (the failed validation is not recorded in the cache)")
    return copy


def write_reports(report: ValidationReport, opts: ValidateOptions) -> None:
    """The JSON, Markdown and HTML reports the options name (parent directories made): each is
    rendered and written to a temporary file before any is renamed into place (a failure
    while writing leaves none), and the JSON is renamed last, once the others are in place.
    So ``run``'s error stub (``write_stopped``) never replaces a complete ``--json-file``."""
    import contextlib

    data = report.to_json()
    writers: tuple[tuple[Path | None, Callable[[dict[str, Any]], str]], ...] = (
        (opts.json_out, lambda d: json.dumps(d, indent=1, default=str)),
        (opts.md_out, render.to_markdown), (opts.html_out, render.to_html))
    texts = [(path, text(data)) for path, text in writers if path]
    with contextlib.ExitStack() as stack:  # exits in reverse: the JSON's rename comes last
        for path, blob in texts:
            path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(fsutil.atomic_path(path)).write_text(blob, encoding="utf-8")


def raise_if_failed(rep: ValidationReport, opts: ValidateOptions, *, shown: bool = True) -> None:
    """ValidationError (exit 8) with one line: the first failure, how many more, where the
    wheels went, and where to read the rest (the table above when ``shown``, else the report
    files)."""
    if rep.ok:
        return
    copies = [str(w.broken_copy) for w in rep.wheels if w.broken_copy]
    where = (["the report table above"] if shown else []) + [str(p) for p in (
        (opts.json_out,) if shown else (opts.md_out, opts.json_out)) if p]
    raise ValidationError(
        f"validation failed: {rep.failures[0]}"
        + (f" (+{len(rep.failures) - 1} more)" if len(rep.failures) > 1 else ""),
        hint=("a copy is in " + ", ".join(copies) + "; " if copies else "")
        + "read " + (" and ".join(where) or f"the log {rep.environment.log}"))
