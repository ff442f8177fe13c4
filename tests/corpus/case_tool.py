"""Bad inputs of the "tool" class: the user's own recipe directories (--recipes DIR,
ROCMBUILD_RECIPE_PATH) and the completion command."""

from __future__ import annotations

from tests.corpus import EXIT, Case

BAD_TOML = 'schema_version = 1\n[package\nname = "mine"\n'

CASES = [
    Case("recipes-dir-missing", ("--recipes", "{dir}/nowhere", "recipes"), EXIT["usage"],
         "--recipes: ", "tool", writes_nothing=True),
    Case("recipes-dir-is-a-file", ("--recipes", "{dir}/f.toml", "recipes"), EXIT["usage"],
         "--recipes: ", "tool", files={"f.toml": ""}, writes_nothing=True),
    Case("recipes-dir-after-command", ("plan", "flash-attn", "--recipes", "{dir}/nowhere"),
         EXIT["usage"], "--recipes: ", "tool", writes_nothing=True),
    Case("recipes-dir-bad-recipe", ("--recipes", "{dir}/mine", "plan", "mine", "--arch",
                                    "gfx942"), EXIT["recipe"], "mine.toml", "tool",
         files={"mine/mine.toml": BAD_TOML}, writes_nothing=True),
    Case("recipe-path-env-missing", ("recipes",), EXIT["usage"], "ROCMBUILD_RECIPE_PATH",
         "tool", env={"ROCMBUILD_RECIPE_PATH": "{dir}/nowhere"}, writes_nothing=True),
    Case("completion-no-shell", ("completion",), EXIT["usage"], "completion", "tool",
         writes_nothing=True),
    Case("completion-unknown-shell", ("completion", "fish"), EXIT["usage"], "fish", "tool",
         writes_nothing=True),
]
