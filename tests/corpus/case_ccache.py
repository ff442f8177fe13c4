"""Bad compile-cache settings (docs/compile-cache.md): a usage error naming the flag, variable
or pyproject key; a cache asked for by name that is not installed: a toolchain error naming
where it was asked for. All before any stage runs."""

from __future__ import annotations

from tests.corpus import EXIT, Case
from tests.corpus.case_inputs import OK

BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")

CASES = [
    Case("env-compile-cache-unknown", BUILD, EXIT["usage"], "ROCMBUILD_COMPILE_CACHE",
         "inputs", env={"ROCMBUILD_COMPILE_CACHE": "distcc"}, files={"r.toml": OK},
         writes_nothing=True, timeout=60),
    Case("flag-compile-cache-dir-is-a-file", (*BUILD, "--compile-cache-dir", "{dir}/r.toml"),
         EXIT["usage"], "--compile-cache-dir", "inputs", files={"r.toml": OK},
         writes_nothing=True, timeout=60),
    Case("pyproject-compile-cache-unknown", BUILD, EXIT["usage"],
         "tool.rocmbuild.compile-cache", "inputs",
         files={"r.toml": OK, "pyproject.toml": '[tool.rocmbuild]\ncompile-cache = "yes"\n'},
         writes_nothing=True, timeout=60),
    # the tool is looked for when a build runs (a cache hit needs none), after the cache lookup:
    # the build's lock files exist by then, nothing else
    Case("env-compile-cache-tool-missing", BUILD, EXIT["toolchain"],
         "ROCMBUILD_COMPILE_CACHE: ccache not found on PATH", "causes",
         env={"ROCMBUILD_COMPILE_CACHE": "ccache", "PATH": "{dir}"}, files={"r.toml": OK},
         timeout=60),
]
