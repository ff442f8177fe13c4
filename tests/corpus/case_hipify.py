"""Bad [hipify] tables (issue 15): unknown tool or key, wrong types, keys of another tool, a
project_dir or header directory outside the tree, [hipify] next to build.hipify, and
tool = "perl" on a host without hipify-perl (a toolchain error at the hipify stage, before any
build). Each is one line naming the recipe file and the key."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"


def _recipe(hipify: str, build: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
version = "1.0"
[source]
path = "tree"
[build]
{build}
[hipify]
{hipify}"""


_TREE = {"recipes/tree/k.cu": "__global__ void k() {}\n",
         "recipes/tree/setup.py": "raise SystemExit('not reached')\n"}


def _plan(cid: str, needle: str, hipify: str, build: str = "") -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"],
                f"r.toml: {needle}", "hipify", files={R: _recipe(hipify, build), **_TREE},
                writes_nothing=True)


CASES: list[Case] = [
    _plan("hipify-unknown-tool", "hipify.tool: unknown hipify tool 'hipify-clang'",
          'tool = "hipify-clang"'),
    _plan("hipify-tool-typo", "hipify.tool: unknown hipify tool 'torchh' (did you mean torch?)",
          'tool = "torchh"'),
    _plan("hipify-unknown-key", "hipify.include: unknown key (did you mean includes?)",
          'include = ["src/*"]'),
    _plan("hipify-includes-not-list", "hipify.includes: expected a list, got str",
          'includes = "src/*"'),
    _plan("hipify-strict-not-bool", "hipify.strict: expected true or false, got str",
          'strict = "yes"'),
    _plan("hipify-project-dir-outside", "hipify.project_dir: must be a relative path",
          'project_dir = "../elsewhere"'),
    _plan("hipify-project-dir-absolute", "hipify.project_dir: must be a relative path",
          'project_dir = "/etc"'),
    _plan("hipify-header-dir-outside", "hipify.header_include_dirs[0]: must be a relative path",
          'header_include_dirs = ["../../usr/include"]'),
    _plan("hipify-command-missing", "hipify.command: missing", 'tool = "command"'),
    _plan("hipify-command-with-torch", "hipify.command: only used with tool = \"command\"",
          'command = ["python", "x.py"]'),
    _plan("hipify-command-with-globs", "hipify.includes: not used with tool = \"command\"",
          'tool = "command"\ncommand = ["python", "x.py"]\nincludes = ["src/*"]'),
    _plan("hipify-perl-out-of-place", "hipify.out_of_place: not supported with tool = \"perl\"",
          'tool = "perl"\nout_of_place = true'),
    _plan("hipify-command-bad-placeholder", "hipify.command[1]: unknown placeholder {arch}",
          'tool = "command"\ncommand = ["python", "{arch}"]'),
    _plan("hipify-and-build-hipify", "build.hipify: set both here and in [hipify]",
          'tool = "torch"', build='hipify = ["python", "x.py"]'),
    Case("hipify-perl-missing", ("build", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["toolchain"],
         "hipify: hipify-perl not found", "hipify",
         files={R: _recipe('tool = "perl"'), **_TREE},
         env={"PATH": "/usr/bin:/bin", "ROCMBUILD_TOOLCHAIN_DIR": "{dir}/no-toolchain"}),
]
