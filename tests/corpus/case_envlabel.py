"""Bad inputs of the build environment and label keys: ``build.pass_env`` entries that are not
variable names (or would pass everything), ``target.label_torch`` / ``target.rocm_from`` /
``variants.<v>.label_torch`` of the wrong type or value, and a misspelt arch placeholder."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"


def _recipe(target: str = "", build: str = "", extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
[source]
path = "tree"
[target]
{target}
[build]
{build}
{extra}"""


def _plan(cid: str, needle: str, text: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"], needle,
                "envlabel", files={R: text, "recipes/tree/setup.py": "\n"}, writes_nothing=True)


CASES = [
    _plan("pass-env-star", "r.toml: build.pass_env[0]",
          _recipe(build='pass_env = ["*"]')),
    _plan("pass-env-space", "r.toml: build.pass_env[1]",
          _recipe(build='pass_env = ["MY_VAR", "MY VAR"]')),
    _plan("pass-env-assignment", "r.toml: build.pass_env[0]",
          _recipe(build='pass_env = ["MY_VAR=1"]')),
    _plan("pass-env-not-list", "r.toml: build.pass_env", _recipe(build='pass_env = "MY_VAR"')),
    _plan("pass-env-number", "r.toml: build.pass_env", _recipe(build="pass_env = [1]")),
    _plan("label-torch-string", "r.toml: target.label_torch",
          _recipe(target='label_torch = "yes"')),
    _plan("label-torch-typo", "r.toml: target.label_troch",
          _recipe(target="label_troch = true")),
    _plan("rocm-from-unknown", "r.toml: target.rocm_from", _recipe(target='rocm_from = "venv"')),
    _plan("variant-label-torch-int", "r.toml: variants.py.label_torch",
          _recipe(extra="[variants.py]\nlabel_torch = 1\n")),
    _plan("arch-name-placeholder", "r.toml: arch.env.GPU_ARCHS",
          _recipe(extra='[arch]\nenv = { GPU_ARCHS = "{arch_name}" }\n')),
]
