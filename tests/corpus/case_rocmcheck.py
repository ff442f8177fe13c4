"""Bad inputs of the host check: version ranges in ``host_requires`` that are not PEP 440, a range
on a requirement that takes none, unknown ROCm components (build and variant), a saved host
whose recorded components or targets are not strings, and a ROCm root's version file that is not
one (garbage, too big, a link out of the root). Each names the recipe, host or version file and
the key."""

from __future__ import annotations

import json

from tests.corpus import EXIT, Case

R = "recipes/r.toml"


def _recipe(build: str, extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
[source]
path = "tree"
[build]
{build}
{extra}"""


def _plan(cid: str, needle: str, text: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"], needle,
                "rocmcheck", files={R: text, "recipes/tree/setup.py": ""}, writes_nothing=True)


def _range(cid: str, req: str, needle: str) -> Case:
    return _plan(cid, f"r.toml: build.host_requires: {needle}",
                 _recipe(f"host_requires = [{json.dumps(req)}]\n"))


def _version_file(cid: str, content: bytes, needle: str) -> Case:
    """A ROCM_PATH root whose .info/version is ``content``: plan stops with one line."""
    return Case(cid, ("plan", "flash-attn", "--arch", "gfx942"), EXIT["toolchain"], needle,
                "rocmcheck", env={"ROCM_PATH": "{dir}/rocm"},
                files={"rocm/.info/version": content, "rocm/bin/hipcc": ""}, writes_nothing=True)


_HOST = {
    "schema": "rocmbuild-host/1", "python": "3.11", "python_tag": "cp311", "platform": "linux",
    "torch": {"version": "", "hip": None, "cuda": None, "location": ""},
    "rocm_root": {"path": "/opt/rocm", "version": "6.4.1", "kind": "rocm", "has_hipcc": True,
                  "where": "/opt/rocm", "components": ["hip", 7]},
    "compiler": None, "compiler_error": "", "cpus": 8,
    "memory": {"usable_bytes": 8 << 30, "source": "MemAvailable"}, "gpus": [], "dists": {},
}

CASES = [
    _range("range-not-pep440", "rocm-sdk>=6.x", "bad version range in 'rocm-sdk>=6.x'"),
    _range("range-single-equals", "rocm-sdk=6.2", "bad version range in 'rocm-sdk=6.2'"),
    _range("range-trailing-op", "rocm-torch>=2.2,<", "bad version range"),
    _range("range-on-hip-compiler", "hip-compiler>=19", "'hip-compiler' takes no version range"),
    _range("range-unknown-name", "rocm-sdks>=6.2", "unknown requirement 'rocm-sdks>=6.2'"),
    _plan("component-unknown", "r.toml: build.rocm_components: unknown ROCm component 'rccl2'",
          _recipe('rocm_components = ["hip", "rccl2"]\n')),
    _plan("component-typo-suggests", "(did you mean miopen?)",
          _recipe('rocm_components = ["miopne"]\n')),
    _plan("component-variant-unknown",
          "r.toml: variants.lite.rocm_components: unknown ROCm component 'MIOpen'",
          _recipe("", '[variants.lite]\nrocm_components = ["MIOpen"]\n')),
    _plan("component-not-a-list", "r.toml: build.rocm_components: expected a list",
          _recipe('rocm_components = "rccl"\n')),
    Case("host-components-not-strings",
         ("plan", "flash-attn", "--arch", "gfx942", "--host", "{dir}/host.json"), EXIT["usage"],
         "host.json: rocm_root.components: expected strings", "rocmcheck",
         files={"host.json": json.dumps(_HOST)}, writes_nothing=True),
    Case("host-targets-not-strings",
         ("plan", "flash-attn", "--arch", "gfx942", "--host", "{dir}/host.json"), EXIT["usage"],
         "host.json: rocm_root.targets: expected strings", "rocmcheck",
         files={"host.json": json.dumps({**_HOST, "rocm_root": {
             **_HOST["rocm_root"], "components": ["hip"], "targets": ["gfx942", 950]}})},
         writes_nothing=True),
    _version_file("rocm-info-version-garbage", b"six point two\n",
                  "rocm/.info/version: 'six point two' is not a version like 6.2.0"),
    _version_file("rocm-info-version-huge", b"6.2.0" + b" " * 70000,
                  "rocm/.info/version: over 65536 bytes"),
    _version_file("rocm-info-version-not-utf8", b"6.2.0\xff\xfe\n",
                  "rocm/.info/version: not UTF-8 text"),
]
