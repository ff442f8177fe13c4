"""The recipe model is the one source of the schema: docs/recipes.md and
schemas/recipe.schema.json are generated from it and must be current, the JSON schema accepts the
shipped recipes and rejects bad ones (checked with the real jsonschema package), and every key is
documented."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from rocmbuild.programs.kernelgate import ADAPTER_NAMES
from rocmbuild.recipe import schema
from rocmbuild.recipe.check import Leaf, Tree, tree
from rocmbuild.recipe.keys import TYPES, kernels, keys
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.tables import Patch, Source, Variant

REPO = Path(__file__).parents[3]
RECIPES = sorted((REPO / "recipes").glob("*.toml"))
BAD = REPO / "tests" / "recipes"


def validator() -> Draft202012Validator:
    doc = json.loads((REPO / schema.JSON_SCHEMA).read_text())
    Draft202012Validator.check_schema(doc)
    return Draft202012Validator(doc)


def test_generated_files_are_current() -> None:
    assert schema.stale(REPO) == [], "run `python -m rocmbuild.recipe.schema` and commit"


def test_check_fails_on_stale_files_and_write_fixes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert schema.main(["--check", "--root", str(tmp_path)]) == 1  # missing counts as stale
    assert "docs/recipes.md is stale" in capsys.readouterr().err
    assert schema.main(["--root", str(tmp_path)]) == 0
    assert schema.main(["--check", "--root", str(tmp_path)]) == 0
    doc = tmp_path / schema.DOCS
    doc.write_text(doc.read_text().replace("Peak memory", "Peak memroy"))
    assert schema.stale(tmp_path) == [schema.DOCS]
    assert schema.main(["--check", "--root", str(tmp_path)]) == 1


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_shipped_recipe_validates_against_json_schema(recipe: Path) -> None:
    text = recipe.read_text()
    assert text.splitlines()[0] == "#:schema ../schemas/recipe.schema.json"
    assert (recipe.parent / "../schemas/recipe.schema.json").resolve().is_file()
    errors = [e.message for e in validator().iter_errors(tomllib.loads(text))]
    assert errors == []


# Fixtures whose problem a schema can see (not patch files, checksums or cross-references).
SCHEMA_VISIBLE = [
    "bad-bad-sha256", "bad-bad-url", "bad-env-not-string", "bad-env-placeholder",
    "bad-host-requires", "bad-mem-zero", "bad-no-name", "bad-no-source", "bad-patch-no-reason",
    "bad-patch-when", "bad-schema-missing", "bad-schema-version", "bad-short-commit",
    "bad-two-sources", "bad-unknown-arch", "bad-unknown-backend", "bad-unknown-kernel",
    "bad-unknown-nested-key", "bad-unknown-top-key", "bad-wrong-type", "bad-many",
]


@pytest.mark.parametrize("name", SCHEMA_VISIBLE)
def test_json_schema_rejects_bad_fixture(name: str) -> None:
    data = tomllib.loads((BAD / f"{name}.toml").read_text())
    assert list(validator().iter_errors(data)), f"{name} passes the JSON schema"


def test_json_schema_accepts_a_git_source_only_with_its_commit() -> None:
    base = tomllib.loads((REPO / "recipes/pytorch.toml").read_text())
    v = validator()
    del base["source"]["commit"]
    assert not v.is_valid(base)
    base["source"]["commit"] = "0" * 40
    assert v.is_valid(base)
    base["build"]["env"]["X"] = "{{literal}} {archs_comma}"
    assert v.is_valid(base)
    base["build"]["env"]["X"] = "{arch}"
    assert not v.is_valid(base)


def _leaves(node: Tree) -> list[tuple[str, Leaf]]:
    out: list[tuple[str, Leaf]] = []
    for name, child in node.items():
        if isinstance(child, dict):
            out += [(f"{name}.{n}", leaf) for n, leaf in _leaves(child)]
        else:
            out.append((name, child))
    return out


def test_every_key_is_documented_with_a_valid_example() -> None:
    docs = (REPO / schema.DOCS).read_text()
    for cls in (Recipe, Source, Variant, Patch):
        for f, k in keys(cls):
            assert k.type in TYPES, (cls.__name__, f.name)
            assert k.doc.strip(), (cls.__name__, f.name)
            if k.type not in ("table", "tables", "array"):
                assert k.example, (cls.__name__, f.name)
                tomllib.loads(f"{k.toml.rsplit('.', 1)[-1]} = {k.example}")
                assert f"`{k.toml.rsplit('.', 1)[-1]} = {k.example}`" in docs
    for loc, leaf in _leaves(tree(Recipe)):
        if leaf.key.type not in ("tables", "array"):
            table = loc.rsplit(".", 1)[0] if "." in loc else ""
            assert not table or f"### `[{table}]`" in docs, loc


def test_validate_kernel_names_the_gate_adapters() -> None:
    assert kernels() == ("auto", "none", *ADAPTER_NAMES)
    prop = json.loads((REPO / schema.JSON_SCHEMA).read_text())["properties"]["validate"]
    assert prop["properties"]["kernel"]["enum"] == list(kernels())


def test_the_example_in_the_docs_loads_and_validates(tmp_path: Path) -> None:
    from rocmbuild.recipe.load import load

    docs = (REPO / schema.DOCS).read_text()
    example = docs.split("## Writing a recipe", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    f = tmp_path / "demo.toml"
    f.write_text(example)
    recipe = load(f)
    assert (recipe.name, recipe.validate_kernel, recipe.source.kind) == ("demo", "none", "git")
    assert validator().is_valid(tomllib.loads(example))
