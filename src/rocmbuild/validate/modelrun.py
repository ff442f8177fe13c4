"""The model check and the stack step as rocmbuild runs them: the ``modelcheck`` program copied
into the validation venv, one process per check, its JSON read back (untrusted: it ran the
wheels' code) into a ``Step`` whose detail keeps only the keys and types we know."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.core import log, untrusted
from rocmbuild.core.run import run as run_cmd
from rocmbuild.programs import modelcheck
from rocmbuild.validate import install as inst
from rocmbuild.validate.model import Step, ValidateOptions

PROGRAM_DIR = Path(modelcheck.__file__).parent
PROGRAM_MODULE = "rocmbuild_modelcheck"
TIMEOUT_S = 3600.0
REPORT_MAX = 16 << 20
_TEXT = 2000


def install_program(venv: inst.Venv) -> None:
    """Copy the modelcheck package into the venv's site-packages as PROGRAM_MODULE."""
    site = next((venv.root / "lib").glob("python3*/site-packages"))
    shutil.copytree(PROGRAM_DIR, site / PROGRAM_MODULE, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


def _num(x: object) -> float | None:
    """A number from the report ("inf"/"nan" as the program writes them), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    return None


def _map(x: object) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _text(x: object) -> str:
    return str(x)[:_TEXT] if isinstance(x, str | int | float) else ""


def _nums(d: object, keys: Sequence[str]) -> dict[str, float | None]:
    src = d if isinstance(d, Mapping) else {}
    return {k: _num(src.get(k)) for k in keys}


def _strings(d: object) -> dict[str, str | None]:
    src = d if isinstance(d, Mapping) else {}
    return {_text(k): (_text(v) if v is not None else None) for k, v in list(src.items())[:50]}


def _case(c: Mapping[str, Any]) -> dict[str, Any]:
    grads, worst = _map(c.get("grads")), _map(c.get("worst"))
    return {
        "size": _text(c.get("size")), "model": _text(c.get("model")),
        "attention": _text(c.get("attention")), "seq": _num(c.get("seq")),
        "dtype": _text(c.get("dtype")), "padded": bool(c.get("padded")),
        "seed": _num(c.get("seed")), "status": Status.parse(c.get("status")).value,
        "reason": _text(c.get("reason")),
        "loss": _nums(c.get("loss"), ("test", "sdpa", "eager")),
        "logits": _nums(c.get("logits"), ("test_sdpa", "test_eager", "sdpa_eager", "ratio")),
        "logits_rows": _nums(c.get("logits_rows"),
                             ("test_sdpa", "test_eager", "sdpa_eager", "ratio")),
        "grads": {"params": _num(grads.get("params")),
                  "worst_ratio": _num(grads.get("worst_ratio")),
                  **{k: _nums(grads.get(k), ("max", "median"))
                     for k in ("test_sdpa", "test_eager", "sdpa_eager")}},
        "worst": {"quantity": _text(worst.get("quantity")),
                  **_nums(worst, ("ratio", "test_sdpa", "test_eager", "sdpa_eager"))},
        "seconds": _num(c.get("seconds"))}


def _part(p: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": Status.parse(p.get("status")).value,
                           "reason": _text(p.get("reason"))}
    for k, v in p.items():
        if k not in out and _num(v) is not None:
            out[_text(k)] = _num(v)
    if isinstance(p.get("jit_built"), list):
        out["jit_built"] = [_text(x) for x in p["jit_built"][:50]]
    return out


def read_report(d: object, what: str) -> Step:
    """The program's JSON as a Step: its status and reason, and a detail of known keys."""
    if not isinstance(d, Mapping):
        raise TypeError(f"a {what} report is a JSON object, not {type(d).__name__}")
    status = Status.parse(d["status"])
    detail: dict[str, Any] = {
        "device": _strings(d.get("device")), "versions": _strings(d.get("versions")),
        "failures": [_text(f) for f in (d.get("failures") or [])[:100]]}
    if what == "model":
        detail |= {"multiple": _num(d.get("multiple")), "fault": _text(d.get("fault") or ""),
                   "cases": [_case(c) for c in (d.get("cases") or []) if isinstance(c, Mapping)]}
    else:
        parts, loaded = _map(d.get("parts")), _map(d.get("loaded"))
        members = _map(loaded.get("members"))
        detail |= {"parts": {_text(k): _part(v) for k, v in parts.items()
                             if isinstance(v, Mapping)},
                   "loaded": {_text(k): [_text(x) for x in v[:200]]
                              for k, v in members.items() if isinstance(v, list)},
                   "runtime": [_text(x) for x in (loaded.get("runtime") or [])[:200]]}
    reason = _text(d.get("reason")) or "; ".join(detail["failures"][:3])
    if d.get("traceback"):
        detail["traceback"] = _text(d["traceback"])
    return Step(status, reason, detail)


def run_program(venv: inst.Venv, what: str, args: Sequence[str], env: Mapping[str, str],
                workdir: Path) -> Step:
    """One program process (``model`` or ``stack``); no (readable) report is a FAILED step
    carrying the output's tail."""
    out = workdir / f"{what}-check.json"
    argv = [str(venv.python), "-m", PROGRAM_MODULE, what, "--json", str(out), *args]
    r = run_cmd(argv, env=venv.env(dict(env)), log_path=venv.log, check=False, cwd=workdir,
                timeout=TIMEOUT_S, on_line=lambda s: log.debug(s))
    if not out.is_file():
        tail = "\n".join(r.output.splitlines()[-10:])
        return Step(Status.FAILED, f"the {what} check exited {r.returncode} without a report: "
                    f"{tail}")
    try:
        return read_report(untrusted.read_json(out, REPORT_MAX), what)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Step(Status.FAILED, f"the {what} check wrote an unreadable report {out}: "
                    f"{str(exc)[:200]}")


def model_step(venv: inst.Venv, infos: Sequence[WheelInfo], opts: ValidateOptions,
               env: Mapping[str, str], workdir: Path) -> Step:
    """The model check of the attention wheel among ``infos`` (flash_attn), or why it did not
    run."""
    if not opts.model:
        return Step(Status.SKIPPED, "--no-model")
    if not any("flash_attn" in w.top_level for w in infos):
        return Step(Status.SKIPPED, "no attention wheel (flash_attn) among these wheels")
    args = ["--quick"] if opts.quick else []
    if opts.inject_fault in modelcheck.FAULTS:
        args += ["--inject-fault", opts.inject_fault]
    install_program(venv)
    log.step("model check: a small decoder with the wheel's attention against SDPA and eager"
             + (" (quick)" if opts.quick else ""))
    return run_program(venv, "model", args, env, workdir)


def stack_step(venv: inst.Venv, infos: Sequence[WheelInfo], opts: ValidateOptions,
               env: Mapping[str, str], workdir: Path) -> Step:
    """The stack step over the wheels validated together, or why it did not run."""
    if not opts.stack_step:
        return Step(Status.SKIPPED, "not a stack (validate --stack runs it)")
    archs = sorted({str(a) for w in infos if "bitsandbytes" in w.top_level
                    for a in ((w.provenance or {}).get("archs") or [])
                    if isinstance(a, str) and a.isalnum()})
    install_program(venv)
    log.step("stack step: one training step with flash-attn, peft, bitsandbytes, DeepSpeed")
    return run_program(venv, "stack", ["--bnb-archs", ",".join(archs)] if archs else [], env,
                       workdir)
