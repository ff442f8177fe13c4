"""Bad inputs of the "cache" class: cache and wheel directories that cannot hold what rocmbuild
writes there (a file where its locks/ or wheels/ directory belongs, a read-only or pseudo file
system, a name the kernel refuses). Each is a CacheError (exit 11) naming the path, with a hint,
and no wheel is delivered.

Crafted entry.json files and corrupted cached wheels are not here: their place is
``<cache>/wheels/<cache key>/``, and the key (a hash of the host's toolchain among others) is not
known before the run. Every shape of those is in tests/unit/cache/test_store.py (lookup on crafted
entries) and tests/integration/test_cache_integrity.py (real builds served a crafted entry)."""

from __future__ import annotations

from tests.corpus import EXIT, Case

RECIPE = """schema_version = 1
[package]
name = "cache-demo"
[source]
path = "{dir}/src"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
"""
SOURCE: dict[str, str | bytes] = {
    "r.toml": RECIPE,
    "src/setup.py": 'from setuptools import setup\n'
                    'setup(name="cache-demo", version="1.0", packages=["demo"])\n',
    "src/demo/__init__.py": "VALUE = 1\n",
}
BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")
CODE = EXIT["cache"]
LONG = "x" * 300  # one path component longer than NAME_MAX (255)


def case(cid: str, argv: tuple[str, ...], needle: str, *, files: dict[str, str | bytes],
         env: dict[str, str] | None = None, writes_nothing: bool = False,
         code: int = CODE) -> Case:
    return Case(cid, argv, code, needle, "cache", env=env or {}, files={**SOURCE, **files},
                writes_nothing=writes_nothing, timeout=180)


USAGE = EXIT["usage"]  # a directory flag that can never work is refused before any work


IN_THE_WAY = {"build/cache/locks": "a file where the locks directory belongs\n"}
IN_THE_WAY_C = {"c/locks": "a file where the locks directory belongs\n"}
WHEELS_FILE_C = {"c/wheels": "a file where the wheels directory belongs\n"}

CASES: list[Case] = [
    # <cache>/locks is a file: the per-key build lock cannot be taken (before any work)
    case("cache-locks-file", BUILD, "cache/locks", files=IN_THE_WAY),
    case("cache-locks-file-force", (*BUILD, "--force"), "cache/locks", files=IN_THE_WAY),
    case("cache-locks-file-json", (*BUILD, "--json"), "cache/locks", files=IN_THE_WAY),
    case("cache-locks-file-validate", (*BUILD, "--validate"), "cache/locks", files=IN_THE_WAY),
    case("cache-locks-file-quiet", ("-q", *BUILD), "cache/locks", files=IN_THE_WAY),
    case("cache-locks-file-flag", (*BUILD, "--cache-dir", "{dir}/c"), "c/locks",
         files=IN_THE_WAY_C, writes_nothing=True),
    case("cache-locks-file-env", BUILD, "c/locks", files=IN_THE_WAY_C,
         env={"ROCMBUILD_CACHE_DIR": "{dir}/c"}, writes_nothing=True),
    case("cache-locks-file-env-validate", BUILD, "c/locks", files=IN_THE_WAY_C,
         env={"ROCMBUILD_CACHE_DIR": "{dir}/c", "ROCMBUILD_VALIDATE": "1"},
         writes_nothing=True),
    case("cache-locks-binary-file", BUILD, "c/locks", files={"c/locks": b"\x00\xff" * 64},
         env={"ROCMBUILD_CACHE_DIR": "{dir}/c"}, writes_nothing=True),
    # cache dirs the kernel refuses to create
    case("cache-dir-in-proc", (*BUILD, "--cache-dir", "/proc/self/rocmbuild-cache"),
         "--cache-dir: /proc/self", files={}, writes_nothing=True, code=USAGE),
    case("cache-dir-in-proc-env", BUILD, "/proc/rocmbuild-cache", files={},
         env={"ROCMBUILD_CACHE_DIR": "/proc/rocmbuild-cache"}, writes_nothing=True),
    case("cache-dir-in-sysfs", (*BUILD, "--cache-dir", "/sys/rocmbuild-cache"),
         "/sys/rocmbuild-cache", files={}, writes_nothing=True),
    case("cache-dir-under-dev-null", (*BUILD, "--cache-dir", "/dev/null/cache"),
         "--cache-dir: /dev/null", files={}, writes_nothing=True, code=USAGE),
    case("cache-dir-name-too-long", (*BUILD, "--cache-dir", "{dir}/" + LONG), LONG[:40],
         files={}, writes_nothing=True, code=USAGE),
    case("cache-dir-name-too-long-env", BUILD, LONG[:40], files={},
         env={"ROCMBUILD_CACHE_DIR": "{dir}/c/" + LONG}, writes_nothing=True),
    # <cache>/wheels is a file: the wheel is built, then cannot be stored; nothing is delivered
    case("cache-wheels-file", (*BUILD, "--cache-dir", "{dir}/c"), "c/wheels",
         files=WHEELS_FILE_C, writes_nothing=True),
    case("cache-wheels-file-force", (*BUILD, "--cache-dir", "{dir}/c", "--force"), "c/wheels",
         files=WHEELS_FILE_C, writes_nothing=True),
    case("cache-wheels-file-env", BUILD, "c/wheels", files=WHEELS_FILE_C,
         env={"ROCMBUILD_CACHE_DIR": "{dir}/c"}, writes_nothing=True),
    case("cache-wheels-file-json", (*BUILD, "--cache-dir", "{dir}/c", "--json"), "c/wheels",
         files=WHEELS_FILE_C, writes_nothing=True),
    # wheel dirs that cannot be created: built and cached, then not deliverable
    case("wheel-dir-in-proc", (*BUILD, "--wheel-dir", "/proc/self/rocmbuild-wheels"),
         "--wheel-dir: /proc/self", files={}, code=USAGE),
    case("wheel-dir-in-sysfs", BUILD, "/sys/rocmbuild-wheels", files={},
         env={"ROCMBUILD_WHEEL_DIR": "/sys/rocmbuild-wheels"}),
    case("wheel-dir-name-too-long", (*BUILD, "--wheel-dir", "{dir}/" + LONG), LONG[:40],
         files={}, code=USAGE),
]
