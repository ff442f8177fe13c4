"""Bad inputs of the "buildenv" class: build requirements a recipe declares (build.build_requires,
variants.<v>.build_requires, build.build_requirements_file) that cannot make a build environment.
A malformed requirement or path is a recipe error (exit 3) at load; a requirements file that is
missing from the source tree, or holds pip options or URLs, is a build error (exit 6) in the env
stage, before pip runs. (An unresolvable pin needs the index:
tests/integration/test_buildenv_venv.py.)
"""

from __future__ import annotations

from tests.corpus import EXIT, Case

HEAD = """schema_version = 1
[package]
name = "env-demo"
[source]
path = "{dir}/src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
"""
SOURCE: dict[str, str | bytes] = {
    "src/setup.py": 'from setuptools import setup\nsetup(name="env-demo", version="1.0")\n',
}
BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")


def case(cid: str, build: str, needle: str, code: int = EXIT["recipe"],
         files: dict[str, str | bytes] | None = None) -> Case:
    # a recipe error writes nothing; the env stage runs under the build lock (cache/locks/)
    return Case(cid, BUILD, code, needle, "buildenv",
                files={**SOURCE, "r.toml": HEAD + build, **(files or {})},
                writes_nothing=code == EXIT["recipe"])


CASES: list[Case] = [
    case("env-req-syntax", 'build_requires = ["setuptools>>70"]\n',
         "r.toml: build.build_requires[0]: 'setuptools>>70' is not a requirement"),
    case("env-req-url", 'build_requires = ["six @ https://example.invalid/six.whl"]\n',
         "build.build_requires[0]: 'six @ https://example.invalid/six.whl': a URL requirement"),
    case("env-req-not-string", "build_requires = [1]\n", "build.build_requires"),
    case("env-req-variant", 'default_variant = "a"\n[variants.a]\nbuild_requires = ["=="]\n',
         "r.toml: variants.a.build_requires[0]: '==' is not a requirement"),
    case("env-file-parent", 'build_requirements_file = "../reqs.txt"\n',
         "r.toml: build.build_requirements_file: must be a relative path inside the source tree"),
    case("env-file-absolute", 'build_requirements_file = "/etc/passwd"\n',
         "build.build_requirements_file: must be a relative path inside the source tree"),
    case("env-file-missing", 'build_requirements_file = "requirements-build.txt"\n',
         "r.toml: build.build_requirements_file: no file requirements-build.txt in the source "
         "tree", EXIT["build"]),
    case("env-file-option", 'build_requirements_file = "reqs.txt"\n',
         "r.toml: build.build_requirements_file: reqs.txt:2: pip options are not read here",
         EXIT["build"], {"src/reqs.txt": "six  # fine\n--index-url http://example.invalid/\n"}),
    case("env-file-url", 'build_requirements_file = "reqs.txt"\n',
         "r.toml: build.build_requirements_file: reqs.txt:1: 'six @ file:///tmp/six.whl' is a "
         "URL requirement", EXIT["build"], {"src/reqs.txt": "six @ file:///tmp/six.whl\n"}),
    case("env-file-bad-line", 'build_requirements_file = "reqs.txt"\n',
         "reqs.txt:3: 'setuptools>>1' is not a requirement", EXIT["build"],
         {"src/reqs.txt": "# build\n\nsetuptools>>1\n"}),
]
