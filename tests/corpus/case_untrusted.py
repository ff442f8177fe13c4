"""Round two, class 2 (untrusted JSON and numbers) and class 3 (files that are not what they
should be) for the readers core.untrusted serves: the baseline report (`validate --baseline`),
the workspace's baseline store, a saved host (`plan --host`), a wheel's rocmbuild.json, and the
size / duration / count flags that core.quantity parses.

Each bad input is one error line naming the file and key (or the flag), with a hint and the
reader's exit class: usage (2) for a baseline, the store, a saved host and a flag; validation
(8) for a wheel; recipe (3) for a recipe number too large to compute with. JSON: 100k ``[``,
random bytes, NaN / Infinity, 400-digit numbers, numbers out of range, wrong types. Files: a
directory, a FIFO, a symlink or a character device where a file belongs; a FIFO must be refused
at once, never read (the cases carry a short timeout).

FIFOs and symlinks cannot be written through ``Case.files`` (text or bytes), so this module makes
them once, at import, in a directory of its own (removed at exit): ``_SPECIAL``. The cases name
them by absolute path; they never change, so every run sees the same inputs.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from tests.corpus import EXIT, Case

USAGE, VALIDATION = EXIT["usage"], EXIT["validation"]
HUGE = "9" * 400
FAST = 30.0
"""The timeout of a case whose input could hang a reader (a FIFO)."""

# ------------------------------------------------------------------ FIFOs and symlinks, made once

_SPECIAL = Path(tempfile.mkdtemp(prefix="rocmbuild-corpus-untrusted-"))
atexit.register(shutil.rmtree, _SPECIAL, True)
(_SPECIAL / "real.json").write_text('{"kernel": "sdpa", "status": "passed", "throughput": []}\n')
os.mkfifo(_SPECIAL / "fifo.json")
os.symlink(_SPECIAL / "real.json", _SPECIAL / "link.json")
for _ws in ("ws-fifo", "ws-link"):
    (_SPECIAL / _ws / "baselines").mkdir(parents=True)
os.mkfifo(_SPECIAL / "ws-fifo" / "baselines" / "throughput.json")
os.symlink(_SPECIAL / "real.json", _SPECIAL / "ws-link" / "baselines" / "throughput.json")
FIFO, LINK = str(_SPECIAL / "fifo.json"), str(_SPECIAL / "link.json")

# ------------------------------------------------------------------------------ the baseline


def _run(tflops: str = "100.0", spread: str = "0.01", ms: str = "1.0") -> str:
    """A bare kernel gate run as JSON text, its numbers spliced in as written (NaN, 1e400...)."""
    return ('{"kernel": "sdpa", "status": "passed", "device": {"name": "MI300X"}, '
            '"throughput": [{"shape": "b1", "kernel": "sdpa", "role": "test", '
            f'"fwd": {{"ms": {ms}, "tflops": {tflops}, "spread": {spread}}}}}]}}')


def _baseline(cid: str, content: str | bytes, needle: str, klass: str = "json",
              name: str = "b.json") -> Case:
    """``name``: where ``content`` goes; ``b.json/inside`` makes b.json a directory."""
    return Case(cid, ("validate", "{wheel}", "--no-kernels", "--baseline", "{dir}/b.json"),
                USAGE, needle, klass, files={name: content}, writes_nothing=True)


def _baseline_at(cid: str, path: str, needle: str) -> Case:
    return Case(cid, ("validate", "{wheel}", "--no-kernels", "--baseline", path), USAGE, needle,
                "files", writes_nothing=True, timeout=FAST)


B = "b.json: "
RUNS = "kernels.runs[0].throughput[0].fwd."

BASELINE = [
    _baseline("baseline-random-bytes", bytes(range(128, 256)) * 8, B + "not UTF-8"),
    _baseline("baseline-deep-brackets", b"[" * 100_000, B + "nested deeper than 32"),
    _baseline("baseline-deep-objects", '{"a":' * 50 + "1" + "}" * 50, B + "nested deeper"),
    _baseline("baseline-unpaired", '{"kernels": [}',
              B + "nested deeper than 32 levels, or brackets that do not pair"),
    _baseline("baseline-empty", b"", B + "not valid JSON"),
    _baseline("baseline-nan", _run(tflops="NaN"), B + "NaN is not a number we accept"),
    _baseline("baseline-infinity", _run(tflops="Infinity"), B + "Infinity is not a number"),
    _baseline("baseline-minus-infinity", _run(ms="-Infinity"), B + "-Infinity is not a number"),
    _baseline("baseline-overflow-float", _run(tflops="1e400"), B + "1e400 is not a finite"),
    _baseline("baseline-negative-tflops", _run(tflops="-1"), B + "throughput[0].fwd.tflops"),
    _baseline("baseline-huge-tflops", _run(tflops="1e300"), B + "throughput[0].fwd.tflops"),
    _baseline("baseline-400-digit-tflops", _run(tflops=HUGE),
              B + "a number of more than 19 digits (key 'tflops')"),
    _baseline("baseline-negative-spread", _run(spread="-0.5"), B + "throughput[0].fwd.spread"),
    _baseline("baseline-huge-ms", _run(ms="1e30"), B + "throughput[0].fwd.ms"),
    _baseline("baseline-report-negative",
              '{"kernels": {"runs": [' + _run(tflops="-5") + "]}}", B + RUNS + "tflops"),
    _baseline("baseline-report-spread-huge",
              '{"kernels": {"runs": [' + _run(spread="1e9") + "]}}", B + RUNS + "spread"),
    _baseline("baseline-runs-not-a-list", '{"kernels": {"runs": 5}}',
              B + "kernels.runs: expected a list"),
    _baseline("baseline-kernels-not-object", '{"kernels": [1]}',
              B + "kernels: expected an object"),
    _baseline("baseline-top-level-list", "[]", B + "not a validate report"),
    _baseline("baseline-utf16", '{"kernels": {}}'.encode("utf-16"), B + "not UTF-8"),
    _baseline("baseline-is-directory", "", "b.json: is not a regular file", "files",
              "b.json/inside"),
    _baseline_at("baseline-fifo", FIFO, "fifo.json: is not a regular file"),
    _baseline_at("baseline-symlink", LINK, "link.json: is a symbolic link"),
    _baseline_at("baseline-char-device", "/dev/null", "/dev/null: is not a regular file"),
]

# ------------------------------------------------------------------------- the baseline store

S = "baselines/throughput.json"
E = "entries['MI300X | sdpa | test | b1 | fwd'][0]."


def _store_text(tflops: str = "100.0", spread: str = "0.01") -> str:
    return ('{"version": 1, "entries": {"MI300X | sdpa | test | b1 | fwd": '
            f'[{{"tflops": {tflops}, "spread": {spread}, "ms": 1.0}}]}}}}')


def _store(cid: str, content: str | bytes, needle: str, klass: str = "json",
           inside: str = "") -> Case:
    return Case(cid, ("validate", "{wheel}", "--no-kernels"), USAGE, needle, klass,
                files={f"build/{S}{inside}": content}, writes_nothing=True)


def _store_at(cid: str, ws: str, needle: str) -> Case:
    return Case(cid, ("validate", "{wheel}", "--no-kernels", "--workdir", str(_SPECIAL / ws)),
                USAGE, needle, "files", writes_nothing=True, timeout=FAST)


STORE = [
    _store("store-random-bytes", b"\x00\xff" * 64, S + ": unreadable (not UTF-8)"),
    _store("store-deep", b"[" * 100_000, S + ": unreadable (nested deeper"),
    _store("store-nan", _store_text(tflops="NaN"), S + ": unreadable (NaN"),
    _store("store-infinity", _store_text(spread="Infinity"), S + ": unreadable (Infinity"),
    _store("store-negative-tflops", _store_text(tflops="-1"), S + ": " + E + "tflops"),
    _store("store-huge-tflops", _store_text(tflops="1e308"), S + ": " + E + "tflops"),
    _store("store-string-tflops", _store_text(tflops='"nan"'), S + ": " + E + "tflops"),
    _store("store-400-digits", _store_text(tflops=HUGE), "(key 'tflops')"),
    _store("store-negative-spread", _store_text(spread="-3"), S + ": " + E + "spread"),
    _store("store-is-directory", "", S + ": unreadable (is not a regular file)", "files",
           "/inside"),
    _store_at("store-fifo", "ws-fifo", S + ": unreadable (is not a regular file)"),
    _store_at("store-symlink", "ws-link", S + ": unreadable (is a symbolic link"),
]

# ------------------------------------------------------------------------------ a saved host

R = "recipes/r.toml"
RECIPE = """schema_version = 1
[package]
name = "demo"
version = "1.0"
[source]
path = "tree"
"""
HOST: dict[str, Any] = {
    "schema": "rocmbuild-host/1", "python": "3.11", "python_tag": "cp311", "platform": "linux",
    "torch": {"version": "2.5.0", "hip": "6.2", "rocm": None, "cuda": None, "location": ""},
    "rocm_root": None, "compiler": None, "compiler_error": "", "cpus": 8,
    "memory": {"usable_bytes": 64 << 30, "source": "MemAvailable"}, "gpus": [], "dists": {}}


def _host_text(cpus: str = "8", usable: str = str(64 << 30)) -> str:
    """The saved host as JSON text with ``cpus`` and ``memory.usable_bytes`` spliced in."""
    text = json.dumps({**HOST, "cpus": "@CPUS@",
                       "memory": {**HOST["memory"], "usable_bytes": "@MEM@"}})
    return text.replace('"@CPUS@"', cpus).replace('"@MEM@"', usable)


def _host(cid: str, content: str | bytes, needle: str, klass: str = "json",
          name: str = "h.json") -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942", "--host", "{dir}/h.json"),
                USAGE, needle, klass, writes_nothing=True,
                files={R: RECIPE, "recipes/tree/setup.py": "\n", name: content})


def _host_at(cid: str, path: str, needle: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942", "--host", path), USAGE,
                needle, "files", files={R: RECIPE, "recipes/tree/setup.py": "\n"},
                writes_nothing=True, timeout=FAST)


H = "h.json: "
SAVED_HOST = [
    _host("host-cpus-10e30", _host_text(cpus="1" + "0" * 30),
          H + "a number of more than 19 digits (key 'cpus')"),
    _host("host-memory-400-digits", _host_text(usable=HUGE),
          H + "a number of more than 19 digits (key 'usable_bytes')"),
    _host("host-cpus-10e18", _host_text(cpus="1" + "0" * 18),
          H + "cpus: expected a whole number from 1 to 16384"),
    _host("host-cpus-float", _host_text(cpus="1e30"), H + "cpus: expected int, got float"),
    _host("host-cpus-zero", _host_text(cpus="0"), H + "cpus: expected a whole number"),
    _host("host-cpus-bool", _host_text(cpus="true"), H + "cpus: expected int, got bool"),
    _host("host-cpus-nan", _host_text(cpus="NaN"), H + "NaN is not a number we accept"),
    _host("host-memory-negative", _host_text(usable="-1"), H + "memory.usable_bytes"),
    _host("host-memory-over-pib", _host_text(usable=str(1 << 60)), H + "memory.usable_bytes"),
    _host("host-memory-string", _host_text(usable='"64G"'), H + "memory.usable_bytes"),
    _host("host-deep", b"[" * 100_000, H + "nested deeper than 32"),
    _host("host-random-bytes", bytes(range(200, 256)) * 4, H + "not UTF-8"),
    _host("host-is-directory", "", "h.json: is not a regular file", "files", "h.json/inside"),
    _host_at("host-fifo", FIFO, "fifo.json: is not a regular file"),
    _host_at("host-symlink", LINK, "link.json: is a symbolic link"),
    _host_at("host-char-device", "/dev/zero", "/dev/zero: is not a regular file"),
]

# ------------------------------------------------------------------- a wheel's rocmbuild.json


def _wheel(provenance: bytes) -> bytes:
    """A small pure-Python wheel (okpkg 1.0) whose dist-info carries ``provenance``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("okpkg/__init__.py", "VALUE = 1\n")
        zf.writestr("okpkg-1.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: okpkg\nVersion: 1.0\n")
        zf.writestr("okpkg-1.0.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\n"
                    "Tag: py3-none-any\n")
        zf.writestr("okpkg-1.0.dist-info/rocmbuild.json", provenance)
        zf.writestr("okpkg-1.0.dist-info/RECORD", "")
    return buf.getvalue()


W = "okpkg-1.0-py3-none-any.whl"


def _prov(cid: str, provenance: bytes, needle: str) -> Case:
    return Case(cid, ("validate", f"{{dir}}/{W}", "--no-kernels"), VALIDATION, needle, "json",
                files={W: _wheel(provenance)}, writes_nothing=True)


P = "rocmbuild.json: "
WHEEL = [
    _prov("wheel-provenance-deep", b"[" * 100_000, P + "nested deeper than 32"),
    _prov("wheel-provenance-nan", b'{"archs": ["gfx942"], "x": NaN}', P + "NaN is not a number"),
    _prov("wheel-provenance-400-digits", b'{"size": ' + HUGE.encode() + b"}",
          P + "a number of more than 19 digits (key 'size')"),
    _prov("wheel-provenance-not-utf8", b'{"a": "\xff\xfe"}', P + "not UTF-8"),
]

# ------------------------------------------------------------------------------------- flags


def _flag(cid: str, argv: tuple[str, ...], needle: str, env: dict[str, str] | None = None
          ) -> Case:
    return Case(cid, argv, USAGE, needle, "json", env=env or {}, writes_nothing=True)


PLAN = ("plan", f"{{dir}}/{R}", "--arch", "gfx942")
FLAGS = [
    _flag("prune-size-400-digits", ("cache", "prune", "--max-size", HUGE), "--max-size: '999"),
    _flag("prune-size-400-digits-unit", ("cache", "prune", "--max-size", HUGE + "G"),
          "--max-size: '999"),
    _flag("prune-size-inf", ("cache", "prune", "--max-size", "inf"),
          "--max-size: 'inf' is not a size"),
    _flag("prune-size-nan", ("cache", "prune", "--max-size", "nan"),
          "--max-size: 'nan' is not a size"),
    _flag("prune-size-over-eib", ("cache", "prune", "--max-size", "2000P"),
          "--max-size: '2000P' is out of range"),
    _flag("prune-size-exponent", ("cache", "prune", "--max-size", "1e400"),
          "--max-size: '1e400' is not a size"),
    _flag("prune-days-400-digits", ("cache", "prune", "--keep-days", HUGE), "--keep-days: '999"),
    _flag("prune-days-1e400", ("cache", "prune", "--keep-days", "1e400"),
          "--keep-days: '1e400' is out of range"),
    _flag("prune-days-negative-inf", ("cache", "prune", "--keep-days=-inf"), "--keep-days"),
    _flag("upstream-time-inf", ("validate", "{wheel}", "--upstream-time", "inf"),
          "--upstream-time: must be a number of seconds > 0"),
    _flag("upstream-time-400-digits", ("validate", "{wheel}", "--upstream-time", HUGE),
          "--upstream-time: must be a number of seconds > 0"),
    _flag("upstream-time-over-a-year", ("validate", "{wheel}", "--upstream-time", "400d"),
          "--upstream-time"),
    _flag("upstream-tests-400-digits", ("validate", "{wheel}", "--upstream-tests", HUGE),
          "--upstream-tests: '999"),
    _flag("upstream-tests-negative", ("validate", "{wheel}", "--upstream-tests=-1"),
          "--upstream-tests: '-1' is out of range"),
    _flag("upstream-tests-float", ("validate", "{wheel}", "--upstream-tests", "2.5"),
          "--upstream-tests: '2.5' is not a number of cases"),
    _flag("upstream-timeout-400-digits",
          ("recipes", "--upstream", "--upstream-timeout", HUGE), "--upstream-timeout: '999"),
    _flag("upstream-timeout-zero", ("recipes", "--upstream", "--upstream-timeout", "0"),
          "--upstream-timeout: '0' is out of range"),
]
JOBS = [
    Case("jobs-400-digits", (*PLAN, "--jobs", HUGE), USAGE, "--jobs: '999", "json",
         files={R: RECIPE, "recipes/tree/setup.py": "\n"}, writes_nothing=True),
    Case("jobs-env-400-digits", PLAN, USAGE, "ROCMBUILD_JOBS: '999", "json",
         env={"ROCMBUILD_JOBS": HUGE}, files={R: RECIPE, "recipes/tree/setup.py": "\n"},
         writes_nothing=True),
    Case("jobs-pyproject-400-digits", PLAN, USAGE, "pyproject.toml: tool.rocmbuild.jobs", "json",
         files={R: RECIPE, "recipes/tree/setup.py": "\n",
                "pyproject.toml": f"[tool.rocmbuild]\njobs = {HUGE}\n"}, writes_nothing=True),
    Case("upstream-timeout-env-400-digits", ("recipes", "--upstream"), USAGE,
         "ROCMBUILD_UPSTREAM_TIMEOUT: '999", "json", env={"ROCMBUILD_UPSTREAM_TIMEOUT": HUGE},
         writes_nothing=True),
    Case("jobs-over-max", (*PLAN, "--jobs", "100000"), USAGE,
         "--jobs: '100000' is out of range (1 to 16384)", "json",
         files={R: RECIPE, "recipes/tree/setup.py": "\n"}, writes_nothing=True),
]



def _recipe(cid: str, extra: str, needle: str) -> Case:
    return Case(cid, PLAN, EXIT["recipe"], needle, "json", writes_nothing=True,
                files={R: RECIPE + extra, "recipes/tree/setup.py": "\n"})


RECIPE_NUMBERS = [
    _recipe("recipe-mem-per-job-400-digits", f"[build]\nmem_per_job_gb = {HUGE}\n",
            "r.toml: build.mem_per_job_gb: must be at most 1e+09"),
    _recipe("recipe-disk-1e300", "[build]\ndisk_gb = 1e300\n",
            "r.toml: build.disk_gb: must be at most 1e+09"),
    _recipe("recipe-link-units-400-digits", f"[build]\nlink_units_per_arch = {HUGE}\n",
            "r.toml: build.link_units_per_arch: must be at most 1e+09"),
    _recipe("recipe-floor-400-digits", f"[validate.floor.gfx942]\nfwd_tflops = {HUGE}\n",
            "r.toml: validate.floor.gfx942.fwd_tflops: must be at most 1e+09"),
]

CASES: list[Case] = [*BASELINE, *STORE, *SAVED_HOST, *WHEEL, *FLAGS, *JOBS, *RECIPE_NUMBERS]
