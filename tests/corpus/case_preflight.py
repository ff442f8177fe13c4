"""The resource preflight (docs/long-builds.md): a build this host has no room for stops before
anything is fetched, with one line naming the recipe key or the variable and the fix."""

from __future__ import annotations

from tests.corpus import EXIT, Case

BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")
SETUP = 'from setuptools import setup\nsetup(name="pf", version="1.0")\n'


def recipe(build: str) -> str:
    return ('schema_version = 1\n[package]\nname = "pf"\n[source]\npath = "src"\n'
            '[arch]\nsupported = ["gfx942"]\n[build]\npython_requires = ["setuptools"]\n'
            + build)


def case(cid: str, build: str, code: int, needle: str, env: dict[str, str] | None = None,
         extra: dict[str, str | bytes] | None = None) -> Case:
    return Case(cid, BUILD, code, needle, "preflight", env=env or {},
                files={"r.toml": recipe(build), "src/setup.py": SETUP, **(extra or {})},
                timeout=60)


CASES = [
    case("preflight-disk-estimate", "disk_gb = 1e9\n", EXIT["toolchain"],
         "(build.disk_gb = 1e+09 in r.toml"),
    case("preflight-memory-one-job", "mem_per_job_gb = 1e9\n", EXIT["toolchain"],
         "(mem_per_job_gb in r.toml)"),
    case("preflight-ccache-dir-a-file", "", EXIT["toolchain"], "CCACHE_DIR=",
         env={"CCACHE_DIR": "{dir}/afile/x"}, extra={"afile": ""}),
    case("preflight-sccache-dir-a-file", "", EXIT["toolchain"], "SCCACHE_DIR=",
         env={"SCCACHE_DIR": "{dir}/afile"}, extra={"afile": ""}),
    case("preflight-link-line", "link_units_per_arch = 100000000\n", EXIT["usage"],
         "link_units_per_arch = 100000000 in r.toml"),
    case("preflight-link-units-zero", "link_units_per_arch = 0\n", EXIT["recipe"],
         "build.link_units_per_arch"),
    case("preflight-mode-bad", "", EXIT["usage"], "ROCMBUILD_PREFLIGHT",
         env={"ROCMBUILD_PREFLIGHT": "sometimes"}),
]
