"""The package's own tests: the upstream test files a recipe names (per variant), copied from the
cached source tree into the validation run, a seeded sample of N cases per test function, run
with pytest in the validation venv under a time cap, reported per test function.

A failed case fails the step (and the wheel) with the test id to rerun; a case the time cap left
unrun is "not reached", never a pass; a case upstream's own marks skip is "skipped".
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmbuild.artifacts.results import Status
from rocmbuild.core import fsutil, untrusted
from rocmbuild.core.errors import UsageError
from rocmbuild.core.run import run as run_cmd
from rocmbuild.validate import install as inst
from rocmbuild.validate.kernels import GATE_MODULE, install_gate

PLUGIN = f"{GATE_MODULE}.upstream_plugin"
LOG_MAX = 64 << 20
"""The largest upstream-test outcome log read back (bytes)."""


@dataclass(frozen=True)
class UpstreamSpec:
    """What rocmbuild.json says under ``validate_upstream``: test files relative to the source
    tree, and the environment they need."""

    tests: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    gpu: bool = True  # the tests need a GPU: SKIPPED without one

    @classmethod
    def from_provenance(cls, prov: Mapping[str, Any] | None) -> UpstreamSpec:
        d = (prov or {}).get("validate_upstream")
        if d is None:  # what the tag stage writes: the plan's inputs, plan.validate.upstream
            plan = (prov or {}).get("plan")
            check = plan.get("validate") if isinstance(plan, Mapping) else None
            d = check.get("upstream") if isinstance(check, Mapping) else None
        d = d or {}
        if not isinstance(d, Mapping):
            return cls()
        return cls(tuple(str(t) for t in d.get("tests") or ()),
                   {str(k): str(v) for k, v in (d.get("env") or {}).items()},
                   bool(d.get("gpu", True)))


@dataclass(frozen=True)
class FunctionResult:
    """One test function: how many cases it has, and what became of the sampled ones."""

    function: str
    cases: int
    sampled: int
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_reached: int = 0
    failures: tuple[str, ...] = ()  # test ids to rerun, with the last line of the error

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "cases": self.cases, "sampled": self.sampled,
                "passed": self.passed, "failed": self.failed, "skipped": self.skipped,
                "not_reached": self.not_reached, "failures": list(self.failures)}


def safe_relative(rel: str) -> bool:
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts


def copy_tests(tree: Path, tests: Sequence[str], dest: Path) -> list[Path]:
    """Copy the named files from ``tree`` into ``dest`` (same relative paths); a file that is
    missing, a link, or outside the tree is a UsageError naming it."""
    out = []
    root = tree.resolve()
    for rel in tests:
        src = tree / rel
        if not safe_relative(rel) or src.is_symlink() or not src.resolve().is_relative_to(root):
            raise UsageError(f"validate_upstream tests: {rel!r} is not a file inside the source "
                             f"tree {tree}", hint="name test files relative to the tree's top")
        if not src.is_file():
            raise UsageError(f"validate_upstream tests: {rel} not found in the source tree {tree}",
                             hint="check the recipe's upstream_tests against the source, or pass "
                             "--upstream-src DIR")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        out.append(target)
    return out


def function_of(node_id: str) -> str:
    """``tests/t.py::test_f[a-b]`` -> ``tests/t.py::test_f``."""
    return node_id.split("[", 1)[0]


def sample(node_ids: Sequence[str], per_function: int, seed: int) -> list[str]:
    """A seeded sample of ``per_function`` cases of each test function (the strata), interleaved
    across functions so that a time cap cuts every function short rather than skipping the
    last ones. Same ids and seed, same sample."""
    groups: dict[str, list[str]] = {}
    for nid in node_ids:
        groups.setdefault(function_of(nid), []).append(nid)
    picks = []
    for fn, ids in groups.items():
        rng = random.Random(f"{seed}:{fn}")
        chosen = set(rng.sample(ids, min(per_function, len(ids))))
        picks.append([i for i in ids if i in chosen])
    out = []
    for i in range(max((len(p) for p in picks), default=0)):
        out += [p[i] for p in picks if i < len(p)]
    return out


def summarize(node_ids: Sequence[str], chosen: Sequence[str],
              outcomes: Mapping[str, dict[str, Any]]) -> list[FunctionResult]:
    cases: dict[str, int] = {}
    for nid in node_ids:
        cases[function_of(nid)] = cases.get(function_of(nid), 0) + 1
    rows = []
    for fn, n in cases.items():
        mine = [c for c in chosen if function_of(c) == fn]
        got = [outcomes.get(c) for c in mine]
        fails = tuple(f"{c}: {o.get('message', '')}".rstrip(": ") for c, o in zip(
            mine, got, strict=True) if o and o["outcome"] == "failed")
        rows.append(FunctionResult(
            fn, n, len(mine), passed=sum(1 for o in got if o and o["outcome"] == "passed"),
            failed=len(fails), skipped=sum(1 for o in got if o and o["outcome"] == "skipped"),
            not_reached=sum(1 for o in got if not o), failures=fails))
    return rows


def _read_log(path: Path) -> dict[str, dict[str, Any]]:
    """Each test's outcome; a failure in setup/call/teardown wins over a pass."""
    out: dict[str, dict[str, Any]] = {}
    try:  # written by the plugin, in the venv that runs the package's tests: untrusted
        blob = fsutil.read_capped(path, LOG_MAX)
    except (OSError, fsutil.TooLarge):
        return out  # no log (nothing ran), or not one: every case reads "not reached"
    for line in blob.splitlines():
        try:
            rec = untrusted.obj(untrusted.loads(line), "")
            untrusted.text(rec.get("id"), "id")
            untrusted.text(rec.get("message", ""), "message")
        except untrusted.BadJson:
            continue
        if rec.get("outcome") not in ("passed", "failed", "skipped"):
            continue
        prev = out.get(rec["id"])
        if prev is None or rec["outcome"] == "failed":
            out[rec["id"]] = rec
    return out


def run_upstream(venv: inst.Venv, tree: Path, spec: UpstreamSpec, per_function: int,
                 time_cap_s: float, workdir: Path, env: Mapping[str, str],
                 seed: int | None = None) -> tuple[Status, str, dict[str, Any]]:
    """Copy, collect, sample, run. Returns (status, one-line reason, JSON detail)."""
    seed = int(time.time()) if seed is None else seed
    dest = workdir / "upstream"
    files = copy_tests(tree, spec.tests, dest)
    full_env = venv.env({**dict(env), **dict(spec.env)})
    rel = [str(f.relative_to(dest)) for f in files]
    collect = run_cmd([str(venv.python), "-m", "pytest", "--collect-only", "-q",
                       "-p", "no:cacheprovider", *rel], env=full_env, log_path=venv.log,
                      capture=True, check=False, cwd=dest, timeout=max(120.0, time_cap_s))
    node_ids = [ln.strip() for ln in collect.output.splitlines() if "::" in ln
                and not ln.startswith(("ERROR", "FAILED", " "))]
    if not node_ids:
        tail = "; ".join(collect.output.strip().splitlines()[-3:])
        return Status.FAILED, (f"upstream tests: none collected from {', '.join(rel)} (pytest "
                               f"exit {collect.returncode}: {tail})"), {"seed": seed}
    chosen = sample(node_ids, per_function, seed)
    install_gate(venv)  # the pytest plugin lives in the gate package
    log = workdir / "upstream.jsonl"
    log.unlink(missing_ok=True)
    t0 = time.monotonic()
    r = run_cmd([str(venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
                 f"--rb-log={log}", f"--rb-deadline={time.time() + time_cap_s}", *chosen],
                env=full_env, log_path=venv.log, capture=True, check=False, cwd=dest,
                timeout=time_cap_s + 120)
    rows = summarize(node_ids, chosen, _read_log(log))
    total = {k: sum(getattr(x, k) for x in rows)
             for k in ("passed", "failed", "skipped", "not_reached")}
    detail = {"seed": seed, "files": rel, "per_function": per_function,
              "time_cap_s": time_cap_s, "seconds": round(time.monotonic() - t0, 1),
              "collected": len(node_ids), "sampled": len(chosen), "pytest_exit": r.returncode,
              **total, "functions": [x.to_json() for x in rows]}
    counts = (f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped, "
              f"{total['not_reached']} not reached of {len(chosen)} sampled ({len(node_ids)} "
              f"cases, seed {seed})")
    if not any(getattr(x, k) for x in rows for k in ("passed", "failed", "skipped")) and (
            r.returncode not in (0, 1, 5)):
        tail = "; ".join(r.output.strip().splitlines()[-3:])
        return Status.FAILED, (f"upstream tests: pytest exited {r.returncode} without running "
                               f"a case: {tail}"), detail
    if total["failed"]:
        first = next(f for x in rows for f in x.failures)
        return Status.FAILED, (f"upstream tests: {counts}; first failure: {first}; rerun in "
                               f"the source tree: python -m pytest "
                               f"'{first.split(': ', 1)[0]}'"), detail
    if not total["passed"]:
        return Status.SKIPPED, f"upstream tests: nothing passed: {counts}", detail
    return Status.SUCCESS, f"upstream tests: {counts}", detail


def step(venv: inst.Venv, prov: Mapping[str, Any] | None, tree: Path | None,
         per_function: int, time_cap_s: float, workdir: Path, env: Mapping[str, str],
         gpu: bool) -> tuple[Status, str, dict[str, Any] | None]:
    """The per-wheel step: SKIPPED with the reason when off, not named by the recipe, without a
    GPU (when the tests need one) or without the source tree."""
    spec = UpstreamSpec.from_provenance(prov)
    if per_function <= 0:
        return Status.SKIPPED, "--upstream-tests 0", None
    if not spec.tests:
        return Status.SKIPPED, "the recipe names no upstream tests for this variant", None
    if spec.gpu and not gpu:
        return Status.SKIPPED, "no GPU: the upstream tests need one", None
    if tree is None or not tree.is_dir():
        return Status.SKIPPED, (f"the source tree is not here ({tree}): build the wheel in this "
                                "workspace or pass --upstream-src DIR"), None
    try:
        return run_upstream(venv, tree, spec, per_function, time_cap_s, workdir, env)
    except UsageError as exc:  # a test file the recipe names is not in the tree
        return Status.FAILED, f"{exc} (hint: {exc.hint})", None
