"""Bad inputs of recipes written outside this repository: cmake ``source_dir`` and ``cmake_args``,
variant ``submodules``, relative local paths (git, path sources, patches: relative to the recipe
file, never to the current directory), ``[validate] requires`` and ``validate --with``.

Every recipe sits in ``{dir}/recipes/`` and the command runs with a decoy next to the current
directory where that matters, so a path resolved against the cwd would be found."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _recipe(source: str = 'path = "tree"', build: str = "", extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
version = "1.0"
[source]
{source}
[build]
{build}
{extra}"""


_TREE = {"recipes/tree/CMakeLists.txt": "project(demo)\n"}
_CMAKE = 'backend = "cmake"\n'


def _plan(cid: str, needle: str, klass: str, text: str, files: dict[str, str | bytes] | None = None,
          code: int = EXIT["recipe"]) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), code, needle, klass,
                files={R: text, **_TREE, **(files or {})}, writes_nothing=True)


def _cmake_arg(cid: str, arg: str) -> Case:
    return _plan(cid, "r.toml: build.cmake_args[0]", "cmake",
                 _recipe(build=_CMAKE + f"cmake_args = [{arg!r}, \"-DX=1\"]\n"))


def _source_dir(cid: str, value: str) -> Case:
    return _plan(cid, "r.toml: build.source_dir", "cmake",
                 _recipe(build=_CMAKE + f"source_dir = {value}\n"))


_GIT = f'git = "https://example.invalid/demo.git"\ncommit = "{COMMIT}"\n'


def _git_local(cid: str, url: str, files: dict[str, str | bytes] | None = None) -> Case:
    return _plan(cid, "r.toml: source.git", "paths",
                 _recipe(f'git = "{url}"\ncommit = "{COMMIT}"'), files)


def _variant_subs(cid: str, source: str, subs: str, needle: str = "submodules") -> Case:
    return _plan(cid, f"r.toml: variants.lite.{needle}", "submodules",
                 _recipe(source, extra=f"[variants.lite]\nsubmodules = {subs}\n"))


def _requires(cid: str, value: str) -> Case:
    needle = "r.toml: validate.requires" + ("[0]" if value.startswith("[") else "")
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"], needle,
                "hostdeps", files={R: _recipe(extra=f"[validate]\nrequires = {value}\n"),
                                           **_TREE}, writes_nothing=True)


def _with(cid: str, value: str, secret: str | None = None) -> Case:
    return Case(cid, ("validate", "--no-kernels", f"--with={value}", "{wheel}"), EXIT["usage"],
                "--with", "hostdeps", secret=secret, writes_nothing=True)


_PATCH = """[[patches]]
file = "fix.patch"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
reason = "test"
"""

CASES: list[Case] = [
    # cmake: rocmbuild owns -S/-B/-G and the install prefix; source_dir stays inside the tree
    _cmake_arg("cmake-args-s", "-S"),
    _cmake_arg("cmake-args-s-joined", "-Ssub"),
    _cmake_arg("cmake-args-b", "-B"),
    _cmake_arg("cmake-args-b-joined", "-Bbuild"),
    _cmake_arg("cmake-args-g", "-GUnix Makefiles"),
    _cmake_arg("cmake-args-h-legacy", "-H."),
    _cmake_arg("cmake-args-install-prefix", "-DCMAKE_INSTALL_PREFIX=/usr"),
    _cmake_arg("cmake-args-install-prefix-typed", "-DCMAKE_INSTALL_PREFIX:PATH=/opt"),
    _cmake_arg("cmake-args-install-prefix-flag", "--install-prefix=/opt"),
    _source_dir("source-dir-parent", '"../elsewhere"'),
    _source_dir("source-dir-absolute", '"/etc"'),
    _source_dir("source-dir-dotdot-inside", '"examples/../../up"'),
    _source_dir("source-dir-dotdot-only", '".."'),
    _source_dir("source-dir-not-a-string", "3"),
    # variants narrow the git source's submodules; nothing else
    _variant_subs("variant-submodule-not-in-source",
                  _GIT + 'submodules = ["csrc/composable_kernel"]', '["csrc/cutlass"]'),
    _variant_subs("variant-submodule-typo", _GIT + 'submodules = ["csrc/composable_kernel"]',
                  '["csrc/composable_kernal"]'),
    _variant_subs("variant-submodule-star-widens", _GIT + 'submodules = ["third_party/a"]',
                  '["*"]'),
    _variant_subs("variant-submodule-source-has-none", _GIT, '["third_party/a"]'),
    _variant_subs("variant-submodules-path-source", 'path = "tree"', "[]"),
    _variant_subs("variant-submodules-not-a-list", _GIT, '"none"'),
    _variant_subs("variant-submodules-not-strings", _GIT + 'submodules = ["a"]', "[1]"),
    # local git repositories resolve against the recipe file (a decoy sits next to the cwd)
    _git_local("git-relative-missing", "../no-such-repo"),
    _git_local("git-dot-relative-missing", "./repo", {"repo/HEAD": "decoy\n"}),
    _git_local("git-file-url-relative-missing", "file://../no-such-repo"),
    _git_local("git-file-url-absolute-missing", "file://{dir}/nowhere/repo.git"),
    _git_local("git-absolute-missing", "{dir}/nowhere/repo"),
    # path sources and patches: relative to the recipe, not the cwd
    _plan("path-source-only-in-cwd", "r.toml: source.path", "paths",
          _recipe('path = "elsewhere"'), {"elsewhere/setup.py": "decoy\n"}),
    _plan("path-source-is-a-file", "r.toml: source.path", "paths",
          _recipe('path = "tree/CMakeLists.txt"')),
    _plan("patch-only-in-cwd", "r.toml: patches[0].file", "paths",
          _recipe(extra=_PATCH), {"fix.patch": "decoy\n"}),
    # [validate] requires and validate --with: PEP 508 requirements only, no pip options
    _requires("validate-requires-not-a-requirement", '["not a requirement!"]'),
    # (the recipe file itself holds the password, so the runner's file grep cannot apply here;
    # test_recipes_outside checks the output does not)
    _requires("validate-requires-pip-option", '["--index-url=https://u:pw5ecret@h/simple"]'),
    _requires("validate-requires-bad-url-secret", '["x @ https://u:pw6ecret@h/x.whl ;;"]'),
    _requires("validate-requires-not-a-list", '"triton"'),
    _with("with-space-in-name", "rb hostdep"),
    _with("with-empty", ""),
    _with("with-dangling-specifier", "triton>="),
    _with("with-pip-option-secret", "--extra-index-url=https://u:pw7ecret@h/simple",
          secret="pw7ecret"),
    _with("with-bad-url-secret", "x @ https://u:pw8ecret@h/x.whl ;;", secret="pw8ecret"),
]
