"""One bad-recipe fixture per error message (tests/recipes/bad-*.toml). Each fixture names the
text it must produce in `# expect:` lines; every problem in a file is reported at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmbuild.core.errors import RecipeError
from rocmbuild.recipe.check import Tree, tree
from rocmbuild.recipe.load import load
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.tables import Patch, Source, Variant

FIXTURES = sorted((Path(__file__).parents[2] / "recipes").glob("bad-*.toml"))


def expectations(path: Path) -> list[str]:
    return [line.split("# expect:", 1)[1].strip() for line in path.read_text().splitlines()
            if line.startswith("# expect:")]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_bad_recipe_reports_expected_problem(fixture: Path) -> None:
    wanted = expectations(fixture)
    assert wanted, f"{fixture} has no # expect: line"
    with pytest.raises(RecipeError) as info:
        load(fixture)
    problems = info.value.problems
    for text in wanted:
        hits = [p for p in problems if text in p]
        assert hits, f"expected {text!r} in {problems}"
        # one line each, naming the file
        assert all("\n" not in p and fixture.name in p for p in hits)
    assert len(problems) >= len(wanted)


def test_every_fixture_is_a_distinct_message() -> None:
    texts = [t for f in FIXTURES if f.stem != "bad-many" for t in expectations(f)]
    assert len(texts) == len(set(texts))


def test_shipped_recipes_load() -> None:
    root = Path(__file__).parents[3] / "recipes"
    names = {p.stem for p in root.glob("*.toml")}
    assert {"flash-attn", "pytorch"} <= names
    for p in root.glob("*.toml"):
        recipe = load(p)
        assert recipe.source.pin


WRONG = {"string": 1, "integer": "one", "boolean": "yes", "strings": "x", "env": "x",
         "number": "x", "tables": "x", "array": "x", "conditions": "x"}


def _paths(node: Tree, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    out: list[tuple[tuple[str, ...], object]] = []
    for key, want in node.items():
        if isinstance(want, dict):
            out.append(((*prefix, key), "not a table"))
            out += _paths(want, (*prefix, key))
        else:
            out.append(((*prefix, key), WRONG[want.key.type]))
    return out


def test_every_key_with_a_wrong_type_is_a_recipe_error_not_a_crash(tmp_path: Path) -> None:
    """Each key of the model (recipe, patch, variant, alternative source) given a value of the
    wrong type."""
    import tomllib

    repo = Path(__file__).parents[3]
    base = tomllib.loads((repo / "recipes/flash-attn.toml").read_text())
    (tmp_path / "recipes").mkdir()
    (tmp_path / "patches").symlink_to(repo / "patches")
    f = tmp_path / "recipes" / "r.toml"
    f.write_text(_to_toml(base))
    assert load(f).name == "flash-attn"  # the unmodified recipe loads: each case changes one key
    cases = _paths(tree(Recipe))
    cases += _paths(tree(Patch), ("patches", 0))
    cases += _paths(tree(Variant), ("variants", "triton"))
    cases += _paths(tree(Source), ("source", "alternatives", "pypi"))
    assert len(cases) > 50
    for keys, bad in cases:
        data = json.loads(json.dumps(base))
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {}) if isinstance(node, dict) else node[k]
        node[keys[-1]] = bad
        f.write_text(_to_toml(data))
        with pytest.raises(RecipeError):
            load(f)


def _to_toml(data: dict) -> str:
    """Just enough TOML for these cases: inline everything under the top-level tables."""
    def val(v: object) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {val(x)}' for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v)
    return "\n".join(f'"{k}" = {val(v)}' for k, v in data.items()) + "\n"
