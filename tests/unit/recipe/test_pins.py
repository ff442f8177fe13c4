"""The pins `recipes --upstream` and the nightly's drift section compare with upstream
(recipe/pins.py): every release line of the shipped recipes, each with its sources, and for a
nightly cell's source every line that has it (the host picks the line at build time). Read from
the shipped recipe files; nothing here asks upstream (tests/integration/test_upstream_drift.py
does, against local repositories and an index on 127.0.0.1)."""

from __future__ import annotations

from rocmbuild.recipe import pins
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe


def _pins(name: str, only: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    recipe = load(find_recipe(name))
    return [(p.line, p.pin.kind, p.pin.commit or p.pin.url.rsplit("/", 1)[-1])
            for p in pins.pins(recipe, name, only=only)]


def test_every_line_of_the_shipped_recipes_is_a_pin() -> None:
    assert _pins("flash-attn") == [
        ("main", "git", "0251105a2fb19d2957484b7f023cd8c115286ced"),
        ("2.8.3", "git", "0e60e39473e8df549a20fb5353760f7a65b30e2d"),
        ("2.8.3/pypi", "sdist", "flash_attn-2.8.3.post1.tar.gz"),
        ("2.8-fork", "git", "b3ae4966b2567811880db10d9e040a775b99c7d7"),
        ("2.8-fork/pypi", "sdist", "flash_attn-2.8.3.post1.tar.gz")]
    assert [line for line, _, _ in _pins("pytorch")] == ["2.15", "2.14", "2.13", "2.9"]
    assert _pins("pytorch")[0][2] == "d0f2af8b66b20da4baa50644c0cd3f887a2eae2e"
    assert _pins("aiter") == [("default", "git", "de07f3885ee5f2030ba72b6cc5940d674fd457cf")]
    assert _pins("vllm") == [("default", "sdist", "vllm-0.34.0.tar.gz")]


def test_a_cells_source_on_every_line_that_has_it() -> None:
    flash = load(find_recipe("flash-attn"))
    assert pins.for_source(flash, "default") == ("main", "2.8.3", "2.8-fork")
    assert [line for line, _, _ in _pins("flash-attn", pins.for_source(flash, "pypi"))] == [
        "2.8.3/pypi", "2.8-fork/pypi"]
    assert pins.for_source(load(find_recipe("vllm")), "default") == ("default",)
