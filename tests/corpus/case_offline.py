"""Bad inputs of offline builds: [[downloads]] (an unpinned one the plan needs, a sha256 that
does not match what the server sends, a bad name / env / when) and ROCMBUILD_OFFLINE."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"


def _recipe(extra: str) -> str:
    return ('schema_version = 1\n[package]\nname = "demo"\n[source]\npath = "tree"\n'
            f"{extra}")


_FILES: dict[str, str | bytes] = {"recipes/tree/setup.py": "raise SystemExit(1)\n",
                                  "payload.tgz": b"not really an archive\n"}
_DL = '[[downloads]]\nname = "blob"\nurl = "file://{dir}/payload.tgz"\nenv = "BLOB_PREFIX"\n'


def _case(cid: str, argv: tuple[str, ...], code: int, needle: str, extra: str,
          env: dict[str, str] | None = None) -> Case:
    # a build takes the per-key lock in the cache before it starts: that file is expected
    return Case(cid, argv, code, needle, "offline", env=env or {},
                files={R: _recipe(extra), **_FILES}, writes_nothing=argv[0] == "plan")


_PLAN = ("plan", f"{{dir}}/{R}", "--arch", "gfx942")
_BUILD = ("build", f"{{dir}}/{R}", "--arch", "gfx942")

CASES = [
    # an unpinned download renders (plan says the build would stop); the build stops in the host
    # check, before anything is fetched
    _case("download-unpinned", _BUILD, EXIT["toolchain"],
          "a sha256 pin for the download 'blob' (file://", _DL),
    _case("download-sha-mismatch", _BUILD, EXIT["fetch"], "sha256 mismatch",
          _DL + f'sha256 = "{"0" * 64}"\n'),
    _case("download-bad-env", _PLAN, EXIT["recipe"], "r.toml: downloads[0].env: must name",
          _DL.replace("BLOB_PREFIX", "1-x") + f'sha256 = "{"0" * 64}"\n'),
    _case("download-bad-when-rocm", _PLAN, EXIT["recipe"], "r.toml: downloads[0].when.rocm",
          _DL + f'sha256 = "{"0" * 64}"\nwhen = {{ rocm = "latest" }}\n'),
    _case("download-twice", _PLAN, EXIT["recipe"], "r.toml: downloads[1].name",
          (_DL + f'sha256 = "{"0" * 64}"\n') * 2),
    _case("offline-env-bad", _BUILD, EXIT["usage"], "ROCMBUILD_OFFLINE", "",
          env={"ROCMBUILD_OFFLINE": "maybe"}),
    _case("offline-not-boolean", _PLAN, EXIT["recipe"], "r.toml: build.offline",
          '[build]\noffline = "yes"\n'),
]
