"""Each Plan field says once (``model.part``) whether it is in the JSON, the provenance and the
cache key. Every field shown in the JSON is changed in turn on a real plan: the key changes
exactly when its ``Part`` says it is in the key, and the JSON and the provenance hold exactly
the entries the parts name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rocmbuild.plan import key
from rocmbuild.plan.model import (
    BuildEnvSpec,
    CompilerPin,
    Part,
    Plan,
    RocmRuntime,
    RocmTarget,
    in_key,
    part,
)
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from rocmbuild.recipe.tables import Download, Hipify, Patch
from tests.unit.plan.test_model import HOST


def ck() -> Plan:
    fa = load(find_recipe("flash-attn")).on_line("2.8-fork")
    return render(fa, Target(arch="gfx942", variant="ck"), HOST)


PLAN = ck()

# Values unlike the plan's for the fields whose type a generic change does not fit
OTHER: dict[str, Any] = {
    "recipe_path": Path("/elsewhere/flash-attn.toml"),
    "source": dataclasses.replace(PLAN.source, commit="f" * 40),
    "patches": (Patch(file=Path("/x.patch"), sha256="0" * 64, reason="r"),),
    "host": dataclasses.replace(PLAN.host, python="3.99"),
    "validate": dataclasses.replace(PLAN.validate, imports=("other",)),
    "cmake_wheel": "pip-wheel",  # shown only when it is pip-wheel
    "hipify_step": Hipify(tool="perl"),
    "runtime": RocmRuntime("none"),
    "downloads": (Download(name="d", url="https://example.invalid/d", sha256="1" * 64,
                           env="D"),),
    "build_env": BuildEnvSpec(("wheel",)),
    "depends": (PLAN,),
    "rocm": dataclasses.replace(PLAN.rocm, version="9.9"),  # its own fields: below
    "root": Path("/opt/rocm-9.9"),
    "compiler": CompilerPin("/usr/bin/other", "1.0"),
}


def other(name: str, value: Any) -> Any:
    """A value of field ``name`` unlike ``value``."""
    if name in OTHER:
        return OTHER[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str) or value is None:
        return f"{value or ''}-other"
    if isinstance(value, dict):
        return {**value, "OTHER": "1"}
    assert isinstance(value, tuple), name
    return (*value, ("o", "v") if name == "options" else ("o",) if name == "commands" else "o")


def parts(cls: type) -> list[tuple[str, Part]]:
    return [(f.name, f.metadata["part"]) for f in dataclasses.fields(cls)]


def key_of(plan: Plan) -> str:
    return key.cache_key(plan, plan.env_key)


@pytest.mark.parametrize(("name", "where"), [p for p in parts(Plan) if p[1].json])
def test_a_field_changes_the_key_exactly_when_it_is_in_the_key(name: str, where: Part) -> None:
    changes = {name: other(name, getattr(PLAN, name))}
    if name == "env":  # recorded as env_key ({jobs} unfilled), which changes with it
        changes["env_key"] = other(name, PLAN.env_key)
    changed = dataclasses.replace(PLAN, **changes)
    assert changed.to_json() != PLAN.to_json()  # the change shows
    assert (key_of(changed) != key_of(PLAN)) is where.key
    assert (changed.inputs_json() != PLAN.inputs_json()) is where.provenance


@pytest.mark.parametrize(("name", "where"), parts(RocmTarget))
def test_the_rocm_targets_fields_say_the_same(name: str, where: Part) -> None:
    rocm = dataclasses.replace(PLAN.rocm, **{name: other(name, getattr(PLAN.rocm, name))})
    changed = dataclasses.replace(PLAN, rocm=rocm)
    assert changed.inputs_json()["rocm"] != PLAN.inputs_json()["rocm"]
    assert (key_of(changed) != key_of(PLAN)) is where.key


def test_the_records_hold_what_the_parts_name() -> None:
    shown = {w.name or n for n, w in parts(Plan) if w.json}
    recorded = {w.name or n for n, w in parts(Plan) if w.provenance}
    keyed = {w.name or n for n, w in parts(Plan) if w.key}
    then = {t for _, w in parts(Plan) for t in w.then}
    assert set(PLAN.to_json()) <= shown | then
    assert set(PLAN.inputs_json()) <= recorded | then
    assert set(in_key(PLAN.inputs_json())) <= keyed | then
    # a field no record holds is in none of them
    for name, where in parts(Plan):
        if not where.json:
            assert name not in PLAN.to_json() and not (where.provenance or where.key)


def test_what_the_key_holds_the_provenance_holds() -> None:
    """``verify`` recomputes a wheel's key from its provenance: a field cannot be in the key
    and not recorded."""
    with pytest.raises(ValueError, match="in the provenance"):
        part(provenance=False)
    with pytest.raises(ValueError, match="in the JSON"):
        part(json=False, key=False)
    assert key.key_of_inputs(PLAN.inputs_json()) == PLAN.cache_key == key_of(PLAN)
