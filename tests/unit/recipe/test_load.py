"""``load.files_read``: what the no-op memo re-hashes for a plan, and when a plan gets no memo."""

from __future__ import annotations

from rocmbuild.plan import planning
from rocmbuild.plan.render import Target
from rocmbuild.recipe.load import files_read, load
from rocmbuild.recipe.search import find_recipe
from tests.unit.plan.test_render import HOST


def test_a_plan_without_dependencies_keeps_its_memo_when_another_line_has_some() -> None:
    """flash-attn's main line depends on aiter for Triton; the fork line's plans do not, so the
    README's command (the fork's Triton variant from the sdist) is still served by the memo."""
    recipe = load(find_recipe("flash-attn"))
    fork = planning.plan(recipe, Target(arch="gfx942", variant="triton", source="pypi"), HOST)
    assert fork.release == "2.8-fork" and not fork.depends
    files = files_read(recipe, depends_on_others=bool(fork.depends))
    assert files is not None and files[0] == recipe.path.absolute()
    assert all(p.file in files for p in recipe.patches)
    main = planning.plan(recipe, Target(arch="gfx942", variant="triton", release="main"), HOST)
    assert main.depends and files_read(recipe, depends_on_others=bool(main.depends)) is None
