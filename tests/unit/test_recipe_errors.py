"""One bad-recipe fixture per error message (tests/recipes/bad-*.toml). Each fixture names the
text it must produce in `# expect:` lines; every problem in a file is reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmbuild.errors import RecipeError
from rocmbuild.recipe.load import load
from tests.conftest import rocmbuild

FIXTURES = sorted((Path(__file__).parents[1] / "recipes").glob("bad-*.toml"))


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


def test_cli_exit_code_and_one_line_per_problem(tmp_path: Path) -> None:
    many = Path(__file__).parents[1] / "recipes" / "bad-many.toml"
    res = rocmbuild("plan", str(many), "--arch", "gfx942")
    assert res.returncode == 3
    errors = [line for line in res.stderr.splitlines() if line.startswith("recipe error:")]
    assert len(errors) == 3, res.stderr
    assert "Traceback" not in res.stderr
    assert "hint:" in res.stderr


def test_shipped_recipes_load() -> None:
    root = Path(__file__).parents[2] / "recipes"
    names = {p.stem for p in root.glob("*.toml")}
    assert {"flash-attn", "pytorch"} <= names
    for p in root.glob("*.toml"):
        recipe = load(p)
        assert recipe.source.pin
