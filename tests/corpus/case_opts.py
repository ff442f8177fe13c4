"""Bad recipe options: ``--opt`` naming another recipe, an unknown option, a value the option
does not accept, an option of another variant, a malformed flag; and bad [options] tables."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"
RECIPE = """schema_version = 1
[package]
name = "demo"
[source]
path = "tree"
[options.dims]
env = "DIMS"
default = "{default}"
help = "head dims"
choices = ["64", "128"]
"""


def _opt(cid: str, needle: str, *opts: str, variant: tuple[str, ...] = ()) -> Case:
    argv = ("plan", "flash-attn", "--arch", "gfx942", *variant,
            *(a for o in opts for a in ("--opt", o)))
    return Case(cid, argv, EXIT["usage"], needle, "options", writes_nothing=True)


CASES = [
    _opt("opt-other-recipe", "--opt: 'pytorch.opt_dim=128' names recipe 'pytorch'",
         "pytorch.opt_dim=128"),
    _opt("opt-unknown-name", "--opt: flash-attn has no option 'opt_dims' (did you mean opt_dim?)",
         "flash-attn.opt_dims=128"),
    _opt("opt-bad-value", "--opt: flash-attn.opt_dim: '96' is not", "flash-attn.opt_dim=96"),
    _opt("opt-no-value", "--opt: 'flash-attn.opt_dim' is not RECIPE.NAME=VALUE",
         "flash-attn.opt_dim"),
    _opt("opt-other-variant", "--opt: flash-attn.opt_dim does not apply to variant 'triton'",
         "flash-attn.opt_dim=128", variant=("--variant", "triton")),
    Case("opt-default-not-allowed", ("plan", f"{{dir}}/{R}", "--arch", "gfx942"),
         EXIT["recipe"], "r.toml: options.dims.default: '96' is not", "options",
         files={R: RECIPE.format(default="96"), "recipes/tree/setup.py": "\n"},
         writes_nothing=True),
    Case("units-ninja-no-cmakelists", ("plan", f"{{dir}}/{R}", "--arch", "gfx942", "--units"),
         EXIT["build"], 'r.toml: build.unit_count = "ninja", but the fetched tree has no '
         "CMakeLists.txt", "options",
         files={R: RECIPE.format(default="64").replace(
             "[options.dims]", '[build]\nunit_count = "ninja"\n[options.dims]'),
             "recipes/tree/setup.py": "\n"},
         writes_nothing=True),
]
