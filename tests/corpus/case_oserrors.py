"""Bad inputs of the "tracebacks" class (issue 9, class 4): OS errors met inside the stages, after
the up-front directory checks passed. A file stands where rocmbuild writes a directory: the
workdir's ``src/`` and ``logs/`` (fetch, build), ``reports/`` (validate), the cache's git mirrors
and downloads (fetch), a report path of ``validate``, an index directory or its parts (publish,
promote). Each is the stage's own error class naming the path in the way, with a hint; the
internal-error guard (exit 70) is never reached. Full disks are in
tests/integration/test_stage_oserrors.py (they need a tmpfs mount)."""

from __future__ import annotations

from tests.corpus import EXIT, Case
from tests.corpus.case_cache import SOURCE
from tests.corpus.case_causes import REPO, _git

FILE = "a file where rocmbuild makes a directory\n"
BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")
ZERO = "0" * 64
SDIST = f"""schema_version = 1
[package]
name = "demo"
[source]
sdist = {{ url = "file://{{dir}}/demo-1.0.tar.gz", sha256 = "{ZERO}" }}
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
"""
GIT = {**REPO, "r.toml": _git("file://{dir}/repo.git")}
NO_WAIT = {"ROCMBUILD_RETRY_BACKOFF": "0"}


def case(cid: str, argv: tuple[str, ...], code: str, needle: str,
         files: dict[str, str | bytes], env: dict[str, str] | None = None) -> Case:
    return Case(f"os-{cid}", argv, EXIT[code], needle, "tracebacks",
                env={**NO_WAIT, **(env or {})}, files=files, timeout=180)


def path_src(**in_the_way: str) -> dict[str, str | bytes]:
    return {**SOURCE, **{k.replace("__", "/"): FILE for k in in_the_way}}


def idx(*parts: str) -> dict[str, str | bytes]:
    return {p: FILE for p in parts}


PUBLISH = ("publish", "{wheel}", "--index", "{dir}/idx")

CASES: list[Case] = [
    # the workdir's source tree (fetch) and logs (build) cannot be made
    case("src-file", BUILD, "fetch", "build/src: is a file", path_src(build__src="")),
    case("src-recipe-file", BUILD, "fetch", "build/src/r: is a file",
         path_src(build__src__r="")),
    case("src-file-json", (*BUILD, "--json"), "fetch", "build/src: is a file",
         path_src(build__src="")),
    case("src-file-force", (*BUILD, "--force"), "fetch", "build/src: is a file",
         path_src(build__src="")),
    case("logs-file", BUILD, "build", "build/logs: is a file", path_src(build__logs="")),
    case("logs-recipe-file", BUILD, "build", "build/logs/r: is a file",
         path_src(build__logs__r="")),
    case("logs-file-quiet", ("-q", *BUILD), "build", "build/logs: is a file",
         path_src(build__logs="")),
    # the validate stage's reports
    case("reports-file", (*BUILD, "--validate"), "validation", "build/reports: is a file",
         path_src(build__reports="")),
    case("reports-file-env", BUILD, "validation", "build/reports: is a file",
         path_src(build__reports=""), env={"ROCMBUILD_VALIDATE": "1"}),
    # the cache's git mirrors and downloads, the git fetch's log
    case("git-mirrors-file", BUILD, "fetch", "build/cache/git: is a file",
         {**GIT, "build/cache/git": FILE}),
    case("git-mirrors-file-cache-dir", (*BUILD, "--cache-dir", "{dir}/c"), "fetch",
         "c/git: is a file", {**GIT, "c/git": FILE}),
    case("git-logs-file", BUILD, "fetch", "build/logs: is a file",
         {**GIT, "build/logs": FILE}),
    case("downloads-file", BUILD, "fetch", "build/cache/downloads: is a file",
         {"r.toml": SDIST, "build/cache/downloads": FILE}),
    case("downloads-sha-file", BUILD, "fetch", f"build/cache/downloads/{ZERO}: is a file",
         {"r.toml": SDIST, f"build/cache/downloads/{ZERO}": FILE}),
    # validate: a report path under a file, its venv's log under a file
    case("validate-md-under-file", ("validate", "{wheel}", "--md", "{dir}/blk/r.md"),
         "validation", "blk: is a file", idx("blk")),
    case("validate-json-under-file", ("validate", "{wheel}", "--json-file", "{dir}/blk/r.json"),
         "validation", "blk: is a file", idx("blk")),
    case("validate-html-under-file", ("validate", "{wheel}", "--html", "{dir}/blk/a/r.html"),
         "validation", "blk: is a file", idx("blk")),
    case("validate-logs-file", ("validate", "{wheel}"), "validation", "build/logs: is a file",
         idx("build/logs")),
    # publish / promote: the index directory or its parts
    case("publish-index-file", ("publish", "{wheel}", "--index", "{dir}/blk"), "publish",
         "blk: is a file", idx("blk")),
    case("publish-index-under-file", ("publish", "{wheel}", "--index", "{dir}/blk/idx"),
         "publish", "blk: is a file", idx("blk")),
    case("publish-generations-file", PUBLISH, "publish", "idx/.generations: is a file",
         idx("idx/.generations")),
    case("publish-generations-file-staging", (*PUBLISH, "--stage", "staging"), "publish",
         "idx/.generations: is a file", idx("idx/.generations")),
    case("publish-lock-dir", PUBLISH, "publish", "idx/.lock", idx("idx/.lock/x")),
    case("promote-index-file", ("promote", "okpkg==1.0", "--index", "{dir}/blk"), "publish",
         "blk: is a file", idx("blk")),
    case("promote-index-under-file", ("promote", "okpkg==1.0", "--index", "{dir}/blk/idx"),
         "publish", "blk: is a file", idx("blk")),
]
