"""Bad inputs of build.rocm_runtime and the [bundle] table (docs/bundling.md): a misspelt mode,
a misspelt key, data globs that would leave the ROCm root. All refused by `plan`, before
anything is fetched."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "r.toml"


def _recipe(build: str = "", extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
version = "1.0"
[source]
path = "tree"
[build]
backend = "cmake"
{build}
{extra}"""


def _plan(cid: str, needle: str, text: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"], needle,
                "bundle", files={R: text, "tree/CMakeLists.txt": "project(demo)\n"},
                writes_nothing=True)


CASES: list[Case] = [
    _plan("bundle-mode-typo", "r.toml: build.rocm_runtime: unknown ROCm runtime 'bundled'",
          _recipe('rocm_runtime = "bundled"')),
    _plan("bundle-mode-not-string", "r.toml: build.rocm_runtime",
          _recipe("rocm_runtime = true")),
    _plan("bundle-key-typo", "r.toml: bundle.lib", _recipe('rocm_runtime = "bundle"',
                                                           '[bundle]\nlib = ["libx.so*"]')),
    _plan("bundle-data-dotdot", "r.toml: bundle.data[0]",
          _recipe('rocm_runtime = "bundle"', '[bundle]\ndata = ["../../etc/*"]')),
    _plan("bundle-data-absolute", "r.toml: bundle.data[1]",
          _recipe('rocm_runtime = "bundle"', '[bundle]\ndata = ["lib/x/*", "/etc/*"]')),
    _plan("bundle-libs-not-list", "r.toml: bundle.libs",
          _recipe('rocm_runtime = "bundle"', '[bundle]\nlibs = "libamdhip64.so*"')),
]
