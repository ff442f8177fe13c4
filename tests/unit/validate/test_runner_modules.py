"""Which modules the validator imports from a wheel: its top-level modules and the recipe's
[validate] imports recorded in rocmbuild.json (untrusted: only dotted names under the wheel's own
top-level modules)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from packaging.version import Version

from rocmbuild.artifacts.wheel import WheelInfo
from rocmbuild.validate.runner import _modules


def info(prov: dict[str, Any] | None, top: tuple[str, ...] = ("deepspeed",)) -> WheelInfo:
    fields: dict[str, Any] = {f.name: None for f in dataclasses.fields(WheelInfo)}
    fields.update(path=Path("x.whl"), version=Version("1.0"), provenance=prov, top_level=top)
    return WheelInfo(**fields)


def test_recorded_imports_are_added_after_the_top_level() -> None:
    prov = {"plan": {"validate": {"imports": ["deepspeed", "deepspeed.ops.adam.cpu_adam_op"]}}}
    assert _modules(info(prov)) == ("deepspeed", "deepspeed.ops.adam.cpu_adam_op")


def test_without_a_recorded_plan_only_the_top_level() -> None:
    assert _modules(info(None)) == ("deepspeed",)
    assert _modules(info({"plan": "x"})) == ("deepspeed",)
    assert _modules(info({"plan": {"validate": {"imports": "deepspeed.ops"}}})) == ("deepspeed",)


def test_untrusted_names_are_dropped() -> None:
    bad = ["os", "deepspeed.ops;rm", "deepspeed..x", 7, None, "deepspeed." + "a" * 300,
           "__import__('os')", "deepspeed.ok"]
    prov = {"plan": {"validate": {"imports": bad}}}
    assert _modules(info(prov)) == ("deepspeed", "deepspeed.ok")
