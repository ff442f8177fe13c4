"""Validate built wheels: isolated install and import, torch compatibility guard, code-object
audit, and the attention kernel gate on a GPU. Entry point for the pipeline:

    from rocmbuild import validate
    report = validate.run(wheels, archs, validate.ValidateOptions(...))
    report.ok  # False on any failure; failing wheels were moved to <workdir>/broken/

``run`` never raises for a failed check (only for bad input); the CLI turns ``not ok`` into
exit code 8 (ValidationError).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild import __version__, config, fsutil, log
from rocmbuild.errors import UsageError, ValidationError
from rocmbuild.results import StageResult, Status
from rocmbuild.run import run as run_cmd
from rocmbuild.validate import gate as baseline_gate
from rocmbuild.validate import install as inst
from rocmbuild.validate.attention import ADAPTERS, FAULTS
from rocmbuild.wheel import WheelInfo

ATTENTION_SCRIPT = Path(__file__).with_name("attention.py")
KERNEL_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class ValidateOptions:
    workdir: str | None = None  # workspace root (default ./build, ROCMBUILD_WORKDIR)
    torch_from: Path | None = None  # site-packages dir holding torch; default: the host's torch
    kernels: bool = True  # run the GPU kernel gate (SKIPPED anyway without a GPU)
    kernel: str = "auto"  # auto | flash-attn | sdpa | hipattn
    quick: bool = False
    inject_fault: str | None = None  # scale | no-causal | nan (self-test of the gate)
    cross_check: bool = False  # also time with triton.testing.do_bench
    baseline: Path | None = None
    json_out: Path | None = None
    md_out: Path | None = None
    html_out: Path | None = None
    move_broken: bool = True
    keep_venv: bool = False


@dataclass
class Step:
    status: str  # passed | failed | skipped | warning
    reason: str = ""
    detail: Any = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status, "reason": self.reason}
        if self.detail is not None:
            d["detail"] = self.detail
        return d


@dataclass
class WheelReport:
    wheel: str
    name: str
    version: str
    steps: dict[str, Step] = field(default_factory=dict)
    moved_to: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.steps.values())

    def to_json(self) -> dict[str, Any]:
        return {"wheel": self.wheel, "name": self.name, "version": self.version,
                "status": "passed" if self.ok else "failed",
                "steps": {k: v.to_json() for k, v in self.steps.items()},
                "moved_to": self.moved_to}


@dataclass
class ValidationReport:
    wheels: list[WheelReport]
    archs: list[str]
    kernels: dict[str, Any]
    environment: dict[str, Any]
    created: str
    duration_s: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(w.ok for w in self.wheels) and self.kernels.get("status") != "failed"

    @property
    def failures(self) -> list[str]:
        out = [f"{w.wheel}: {k}: {s.reason}" for w in self.wheels for k, s in w.steps.items()
               if s.status == "failed"]
        if self.kernels.get("status") == "failed":
            out.append(f"kernels: {self.kernels.get('reason', '')}")
        return out

    def stage_result(self) -> StageResult:
        """For the pipeline's --validate step: FAILED on any failure, else SUCCESS."""
        status = Status.SUCCESS if self.ok else Status.FAILED
        return StageResult(status, self.duration_s, "; ".join(self.failures[:3]),
                           artifacts={"report": self.to_json(), "paths": dict(self.paths)})

    def to_json(self) -> dict[str, Any]:
        return {"rocmbuild_version": __version__, "created": self.created,
                "status": "passed" if self.ok else "failed", "archs": self.archs,
                "duration_s": round(self.duration_s, 2), "environment": self.environment,
                "wheels": [w.to_json() for w in self.wheels], "kernels": self.kernels,
                "failures": self.failures}


def _audit(path: Path, archs: Sequence[str]) -> Step:
    try:
        from rocmbuild.audit import audit_wheel  # type: ignore[attr-defined]
    except ImportError:
        return Step("skipped", "audit module not available")
    if not archs:
        return Step("skipped", "no archs: pass --arch or validate a wheel with rocmbuild.json")
    try:
        a = audit_wheel(path, archs)
    except Exception as exc:  # noqa: BLE001 - an audit crash is a failed audit with its text
        return Step("failed", f"audit raised {type(exc).__name__}: {exc}")
    return Step("passed" if a.ok else "failed", "; ".join(a.problems), a.to_json())


def _pick_kernels(opts: ValidateOptions, infos: list[WheelInfo],
                  env_torch: dict[str, Any] | None) -> list[str]:
    if opts.kernel != "auto":
        return [opts.kernel]
    kernels = []
    if any("flash_attn" in w.top_level for w in infos):
        kernels.append("flash-attn")
    if env_torch and env_torch.get("hip"):
        kernels.append("hipattn")  # the toolchain's own smoke test; SKIPPED when not importable
    return kernels


def _runtime_env(infos: list[WheelInfo]) -> dict[str, str]:
    """Environment the wheels need at import time: rocmbuild.json's ``runtime_env`` (from the
    recipe variant, e.g. FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE for the flash-attn Triton one)."""
    env: dict[str, str] = {}
    for w in infos:
        runtime_env = (w.provenance or {}).get("runtime_env") or {}
        env.update({str(k): str(v) for k, v in runtime_env.items()})
    return env


def _kernel_run(venv: inst.Venv, kernel: str, opts: ValidateOptions, env: dict[str, str],
                workdir: Path) -> dict[str, Any]:
    out = workdir / f"kernel-{kernel}.json"
    argv = [str(venv.python), str(ATTENTION_SCRIPT), "--kernel", kernel, "--json", str(out)]
    if opts.quick:
        argv.append("--quick")
    if opts.inject_fault:
        argv += ["--inject-fault", opts.inject_fault]
    if opts.cross_check:
        argv.append("--cross-check")
    r = run_cmd(argv, env=venv.env(env), log_path=venv.log, check=False, cwd=workdir,
                timeout=KERNEL_TIMEOUT_S, on_line=lambda s: log.debug(s))
    if not out.is_file():
        tail = "\n".join(r.output.splitlines()[-10:])
        return {"kernel": kernel, "status": "failed",
                "reason": f"the kernel gate process exited {r.returncode} without a report: "
                          f"{tail}"}
    return json.loads(out.read_text())


def run(wheels: Sequence[Path], archs: Sequence[str] = (),
        options: ValidateOptions | None = None) -> ValidationReport:
    """Validate ``wheels`` together (one fresh venv). ``archs`` for the audit; empty: each wheel's
    rocmbuild.json "archs". Failing wheels are moved to <workdir>/broken/ (unless
    options.move_broken is False). Raises UsageError/ValidationError only for bad input."""
    opts = options or ValidateOptions()
    t0 = time.monotonic()
    if opts.kernel != "auto" and opts.kernel not in ADAPTERS:
        raise UsageError(f"--kernel: unknown kernel {opts.kernel!r}",
                         hint=f"choose from auto, {', '.join(ADAPTERS)}")
    if opts.inject_fault and opts.inject_fault not in FAULTS:
        raise UsageError(f"--inject-fault: unknown fault {opts.inject_fault!r}",
                         hint=f"choose from {', '.join(FAULTS)}")
    baseline = baseline_gate.load_baseline(opts.baseline) if opts.baseline else None
    infos = [inst.read_wheel(Path(w)) for w in wheels]
    ws = config.workspace(opts.workdir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ws.root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"validate-{stamp}-", dir=ws.root))
    logf = ws.logs / f"validate-{stamp}.log"
    reports = {w.path: WheelReport(w.path.name, w.display_name, str(w.version)) for w in infos}

    venv = inst.create_venv(tmp / "venv", logf, opts.torch_from)
    env_extra = _runtime_env(infos)
    installed, out = inst.install(venv, infos) if infos else (True, "")
    probe = inst.probe(venv, sorted({m for w in infos for m in w.top_level}), env_extra)
    env_torch = probe.get("torch")
    for w in infos:
        rep = reports[w.path]
        if not installed:
            rep.steps["install"] = Step("failed", "pip install failed",
                                        "\n".join(out.splitlines()[-20:]))
        else:
            rep.steps["install"] = Step("passed", f"installed in an isolated venv (torch from "
                                        f"{venv.torch_from or 'system site-packages'})")
        g = inst.guard(w.provenance, env_torch, w.native, w.path.name)
        if g.problems:
            rep.steps["guard"] = Step("failed", "; ".join(g.problems) + ". "
                                      + inst.guard_hint(w.provenance), g.checked)
        elif g.warnings:
            rep.steps["guard"] = Step("warning", "; ".join(g.warnings), g.checked)
        else:
            rep.steps["guard"] = Step("passed", "torch version, HIP and C++ ABI match", g.checked)
        if installed:
            bad = {m: r for m, r in probe["imports"].items() if m in w.top_level and not r["ok"]}
            if bad:
                text = "; ".join(f"import {m}: {r['error']}" for m, r in bad.items())
                if rep.steps["guard"].status == "failed":
                    text += " (see the guard: the wheel does not match this torch)"
                rep.steps["import"] = Step("failed", text,
                                           {m: r.get("traceback") for m, r in bad.items()})
            else:
                rep.steps["import"] = Step("passed", "imported " + ", ".join(w.top_level))
        else:
            rep.steps["import"] = Step("skipped", "install failed")
        want = list(archs) or list((w.provenance or {}).get("archs") or [])
        rep.steps["audit"] = _audit(w.path, want)

    kernels: dict[str, Any] = {"runs": []}
    if not opts.kernels:
        kernels.update(status="skipped", reason="--no-kernels")
    elif not installed:
        kernels.update(status="skipped", reason="install failed")
    else:
        names = _pick_kernels(opts, infos, env_torch)
        if not names:
            kernels.update(status="skipped", reason="no attention kernel among these wheels "
                           "(pass --kernel sdpa to check the harness itself)")
        for k in names:
            res = _kernel_run(venv, k, opts, env_extra, tmp)
            if baseline is not None and res.get("status") != "skipped":
                res["baseline"] = baseline_gate.compare(res, baseline)
                if res["baseline"]["status"] == "failed":
                    res["status"] = "failed"
                    res.setdefault("failures", []).extend(res["baseline"]["problems"])
            kernels["runs"].append(res)
        if names:
            statuses = [r.get("status") for r in kernels["runs"]]
            if "failed" in statuses:
                failed = [r for r in kernels["runs"] if r.get("status") == "failed"]
                reasons = [r.get("reason") or "; ".join((r.get("failures") or [])[:3])
                           for r in failed]
                kernels.update(status="failed", reason=" | ".join(
                    f"{r['kernel']}: {why}" for r, why in zip(failed, reasons, strict=True)))
            elif "passed" in statuses:
                kernels.update(status="passed", reason="")
            else:
                kernels.update(status="skipped", reason="; ".join(
                    f"{r['kernel']}: {r.get('reason', '')}" for r in kernels["runs"]))

    report = ValidationReport(
        wheels=list(reports.values()), archs=list(archs), kernels=kernels,
        environment={"torch": env_torch, "torch_error": probe.get("torch_error"),
                     "python": probe.get("python"), "runtime_env": env_extra,
                     "venv_torch_from": str(venv.torch_from) if venv.torch_from else None,
                     "log": str(logf)},
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    if kernels.get("status") == "failed":  # the kernels came from these wheels
        for wr in report.wheels:
            wr.steps["kernels"] = Step("failed", kernels.get("reason", ""))
    if opts.move_broken:
        for w in infos:
            rep = reports[w.path]
            if not rep.ok and w.path.exists():
                ws.broken.mkdir(parents=True, exist_ok=True)
                dest = ws.broken / w.path.name
                shutil.move(str(w.path), dest)
                rep.moved_to = str(dest)
    if not opts.keep_venv:
        shutil.rmtree(tmp, ignore_errors=True)
    report.duration_s = time.monotonic() - t0
    _write_outputs(report, opts)
    return report


def _write_outputs(report: ValidationReport, opts: ValidateOptions) -> None:
    from rocmbuild.validate import report as render

    data = report.to_json()
    for path, text in ((opts.json_out, lambda: json.dumps(data, indent=1, default=str)),
                       (opts.md_out, lambda: render.to_markdown(data)),
                       (opts.html_out, lambda: render.to_html(data))):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fsutil.write_atomic(Path(path), text())
            report.paths[str(path)] = "written"


def cli_validate(args: argparse.Namespace) -> int:
    from rocmbuild.arch import parse_archs
    from rocmbuild.validate import report as render

    if not args.wheels and args.kernel == "auto":
        raise UsageError("validate: no wheels given",
                         hint="pass .whl files, or --kernel sdpa to check the harness alone")
    archs = parse_archs(args.arch) if args.arch else ()
    opts = ValidateOptions(
        workdir=args.workdir, torch_from=Path(args.torch_from) if args.torch_from else None,
        kernels=args.kernels, kernel=args.kernel, quick=args.quick,
        inject_fault=args.inject_fault, cross_check=args.cross_check,
        baseline=Path(args.baseline) if args.baseline else None,
        json_out=Path(args.json) if args.json else None,
        md_out=Path(args.md) if args.md else None,
        html_out=Path(args.html) if args.html else None,
        move_broken=not args.keep_broken, keep_venv=args.keep_venv)
    rep = run([Path(w) for w in args.wheels], archs, opts)
    log.out.print(render.to_markdown(rep.to_json()), markup=False)
    raise_if_failed(rep, opts)
    return 0


def raise_if_failed(rep: ValidationReport, opts: ValidateOptions) -> None:
    """One line for the CLI: the first failure, how many more, and where the wheels went."""
    if not rep.ok:
        moved = [w.moved_to for w in rep.wheels if w.moved_to]
        raise ValidationError(
            f"validation failed: {rep.failures[0]}"
            + (f" (+{len(rep.failures) - 1} more)" if len(rep.failures) > 1 else ""),
            hint=("moved to " + ", ".join(moved) + "; " if moved else "")
            + "read the report table above" + (f" and {opts.json_out}" if opts.json_out else ""))
