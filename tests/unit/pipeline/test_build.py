"""The pipeline's stage tuple (``pipeline.build.STAGES``): every stage module runs once, each
entry's ``run`` imports the stage of its own name and calls its ``run(plan, ctx)``, those have
the signature the pipeline calls, and the pipeline's module (and the hit's ``pipeline.deliver``)
import no stage at the top: a cache hit stays cheap."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import typing
from pathlib import Path

from rocmbuild.artifacts.results import StageResult
from rocmbuild.pipeline.build import BUILD_STAGES, STAGES, VALIDATE_STAGE
from rocmbuild.plan.model import Plan
from rocmbuild.stages.context import Context
from tests.unit.test_architecture import STAGES as STAGE_MODULES


def test_every_stage_module_runs_once_and_validate_last() -> None:
    names = [s.name for s in STAGES]
    assert sorted(names) == sorted(STAGE_MODULES) and len(set(names)) == len(names)
    assert [s.name for s in VALIDATE_STAGE] == ["validate"] and BUILD_STAGES == STAGES[:-1]


def _imports_and_call(fn: object) -> tuple[list[tuple[str | None, list[str]]], str]:
    """The ``from x import y`` statements of ``fn`` and the function its return calls."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    froms = [(n.module, [a.name for a in n.names]) for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom)]
    rets = [n for n in ast.walk(tree) if isinstance(n, ast.Return)]
    assert len(rets) == 1 and isinstance(rets[0].value, ast.Call), ast.dump(tree)
    return froms, ast.unparse(rets[0].value)


def test_each_entry_runs_the_stage_of_its_name() -> None:
    for stage in STAGES:
        froms, call = _imports_and_call(stage.run)
        assert froms == [("rocmbuild.stages", [stage.name])], stage.name
        assert call == f"{stage.name}.run(plan, ctx)", stage.name


def test_each_stage_exports_run_plan_ctx() -> None:
    for stage in STAGES:
        run = importlib.import_module(f"rocmbuild.stages.{stage.name}").run
        assert list(inspect.signature(run).parameters) == ["plan", "ctx"], stage.name
        assert typing.get_type_hints(run) == {"plan": Plan, "ctx": Context,
                                              "return": StageResult}, stage.name


def _top_imports(module: str) -> set[str]:
    """The rocmbuild modules ``module`` imports when it is imported: its module-level import
    statements, outside ``if TYPE_CHECKING:`` (``from x import y`` also gives ``x.y``)."""
    tree = ast.parse(Path(importlib.import_module(module).__file__ or "").read_text())
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)})
    return {m for m in out if m.startswith("rocmbuild.")}


def test_importing_the_pipeline_imports_no_stage() -> None:
    """Only the context (the stages' shared types); each stage when it first runs."""
    stages = {m for m in _top_imports("rocmbuild.pipeline.build")
              if m.startswith("rocmbuild.stages")}
    assert stages == {"rocmbuild.stages.context", "rocmbuild.stages.context.Context",
                      "rocmbuild.stages.context.need"}


def test_the_hit_module_imports_only_core_and_cache() -> None:
    """What the memo's short path imports through ``pipeline.deliver`` (no recipe model, plan,
    stage or ``pipeline.build``; test_noop_memo checks the whole process)."""
    assert {m.split(".")[1] for m in _top_imports("rocmbuild.pipeline.deliver")} == {
        "core", "cache"}
