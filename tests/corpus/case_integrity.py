"""Round two, classes 1 and 3 (issue 24): locks that are not lock files, and a workdir, reports
directory, ``rocmbuild.prom`` or ``index.html`` that is a file where a directory belongs or a
directory where a file belongs.

"integrity": a directory at the path of a lock (``<workdir>/nightly.lock``, the cache's
``locks/prune.lock``, an index's ``.lock``): refused with one line naming the lock, in the
command's class (nightly: usage, 2; build and ``cache prune``: cache, 11; publish and promote:
publish, 9), never followed, never a traceback. A symlink, a hard link or a FIFO at a lock's
path cannot be written by the corpus runner (it writes files): those, and the memo attacks (a
memo's name is a digest of the run's environment), are in
tests/integration/test_memo_lock_attacks.py, tests/unit/core/test_lock.py and
tests/unit/nightly/test_lock.py.

"files": the nightly's workdir a file, its reports directory a file (or under one), its
``rocmbuild.prom`` or ``index.html`` a directory: one usage error naming ``nightly.toml:
reports.dir`` or the workdir and the path, before anything is planned, built or written (the
dry run too), never a temporary's name."""

from __future__ import annotations

import json

from tests.corpus import EXIT, Case
from tests.corpus.case_cache import SOURCE

RUN = "20261130T161500Z"
NIGHTLY = ('[[matrix]]\nrecipes = ["hip-attention-probe"]\narchs = ["gfx942"]\n'
           '[publish]\nindex = "{dir}/index"\n')
KEEP = "something the user keeps here\n"
DIR_LOCK = {"build/nightly.lock/keep": KEEP}  # nightly.lock is a directory
WORKDIR_FILE = {"build": "a file where the nightly's workdir belongs\n"}
REPORTS_FILE = {"reports": "a file where the reports directory belongs\n"}
PROM_DIR = {"reports/rocmbuild.prom/keep": KEEP}
PAGE_DIR = {"reports/index.html/keep": KEEP}
MANIFEST = json.dumps({"run": RUN, "started": "2026-11-30T16:15:00Z",
                       "config": "{dir}/nightly.toml", "index": "{dir}/index",
                       "stage": "staging", "promote_to": "stable", "cells": []})
COLLECT = {f"reports/{RUN}/manifest.json": MANIFEST}

LOCK_NEEDLE = "build/nightly.lock: is not a regular file; not a nightly lock"
REPORTS_NEEDLE = "nightly.toml: reports.dir: "


def nightly(cid: str, files: dict[str, str | bytes], needle: str, *extra: str,
            klass: str = "files", config: str = NIGHTLY) -> Case:
    return Case(cid, ("nightly", "--config", "{dir}/nightly.toml", *extra), EXIT["usage"],
                needle, klass, files={"nightly.toml": config, **files}, writes_nothing=True)


def lock_case(cid: str, *extra: str, files: dict[str, str | bytes] | None = None) -> Case:
    return nightly(cid, {**DIR_LOCK, **(files or {})}, LOCK_NEEDLE, *extra, klass="integrity")


# the cache outside the workdir: writes_nothing checks build/cache, and the lock is a directory
CACHE_ENV = {"ROCMBUILD_CACHE_DIR": "{dir}/c"}
PRUNE_LOCK_DIR = {"c/locks/prune.lock/keep": KEEP}
BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")


def cache_case(cid: str, argv: tuple[str, ...], needle: str) -> Case:
    return Case(cid, argv, EXIT["cache"], needle, "integrity", env=CACHE_ENV,
                files={**SOURCE, **PRUNE_LOCK_DIR}, writes_nothing=True, timeout=180)


TAKE = "c/locks/prune.lock: cannot take the build lock: is not a regular file"
OPEN = "c/locks/prune.lock: cannot open the lock: is not a regular file"
INDEX_LOCK_DIR = {"idx/.lock/keep": KEEP}


def index_case(cid: str, argv: tuple[str, ...], needle: str) -> Case:
    return Case(cid, argv, EXIT["publish"], needle, "integrity", files=INDEX_LOCK_DIR,
                writes_nothing=True)


CASES: list[Case] = [
    # <workdir>/nightly.lock is a directory: refused before the config is read further
    lock_case("integ-nightly-lock-dir"),
    lock_case("integ-nightly-lock-dir-json", "--json"),
    lock_case("integ-nightly-lock-dir-only", "--only", "hip-attention-probe-gfx942"),
    lock_case("integ-nightly-lock-dir-executor", "--executor", "local"),
    lock_case("integ-nightly-lock-dir-no-wait", "--executor", "slurm", "--no-wait"),
    lock_case("integ-nightly-lock-dir-collect", "--collect", RUN, files=COLLECT),
    lock_case("integ-nightly-lock-dir-verbose", "-v"),
    lock_case("integ-nightly-lock-dir-quiet", "-q"),
    nightly("integ-nightly-lock-dir-workdir-flag", {"w/nightly.lock/keep": KEEP},
            "w/nightly.lock: is not a regular file", "--workdir", "{dir}/w", klass="integrity"),
    # <cache>/locks/prune.lock is a directory: no build lock can be taken, nothing pruned
    cache_case("integ-prune-lock-dir-build", BUILD, TAKE),
    cache_case("integ-prune-lock-dir-build-force", (*BUILD, "--force"), TAKE),
    cache_case("integ-prune-lock-dir-build-json", (*BUILD, "--json"), TAKE),
    cache_case("integ-prune-lock-dir-build-validate", (*BUILD, "--validate"), TAKE),
    cache_case("integ-prune-lock-dir-build-quiet", ("-q", *BUILD), TAKE),
    cache_case("integ-prune-lock-dir-prune", ("cache", "prune", "--keep-days", "1"), OPEN),
    cache_case("integ-prune-lock-dir-prune-dry-run",
               ("cache", "prune", "--keep-days", "1", "--dry-run"), OPEN),
    cache_case("integ-prune-lock-dir-prune-size", ("cache", "prune", "--max-size", "1G"), OPEN),
    cache_case("integ-prune-lock-dir-prune-json",
               ("cache", "prune", "--keep-days", "1", "--json"), OPEN),
    # an index's .lock is a directory: nothing published or promoted
    index_case("integ-index-lock-dir-publish", ("publish", "{wheel}", "--index", "{dir}/idx"),
               "idx/.lock: is not a regular file"),
    index_case("integ-index-lock-dir-publish-stage",
               ("publish", "{wheel}", "--index", "{dir}/idx", "--stage", "nightly"),
               "idx/.lock: is not a regular file"),
    index_case("integ-index-lock-dir-promote",
               ("promote", "okpkg==1.0", "--index", "{dir}/idx", "--from", "staging", "--to",
                "stable"), "idx/.lock: is not a regular file"),
    # the nightly's workdir is a file (or under one)
    nightly("files-nightly-workdir-file", WORKDIR_FILE, "build: is a file, not a directory"),
    nightly("files-nightly-workdir-file-json", WORKDIR_FILE, "build: is a file, not a directory",
            "--json"),
    nightly("files-nightly-workdir-file-collect", {**WORKDIR_FILE, **COLLECT},
            "build: is a file, not a directory", "--collect", RUN),
    nightly("files-nightly-workdir-under-file", {"f": "a file\n"}, "f: is a file, not a directory",
            "--workdir", "{dir}/f/w"),
    # the reports directory is a file (or under one)
    nightly("files-nightly-reports-file", REPORTS_FILE, REPORTS_NEEDLE),
    nightly("files-nightly-reports-file-named", REPORTS_FILE,
            "reports is a file, not a directory"),
    nightly("files-nightly-reports-file-dry-run", REPORTS_FILE,
            "reports is a file, not a directory", "--dry-run"),
    nightly("files-nightly-reports-file-dry-run-json", REPORTS_FILE,
            "reports is a file, not a directory", "--dry-run", "--json"),
    nightly("files-nightly-reports-file-only", REPORTS_FILE,
            "reports is a file, not a directory", "--dry-run", "--only", "nope"),
    nightly("files-nightly-reports-under-file", {"out": "a file\n"},
            "out is a file, not a directory", config=NIGHTLY + '[reports]\ndir = "out/r"\n'),
    nightly("files-nightly-reports-under-file-dry-run", {"out": "a file\n"},
            "out is a file, not a directory", "--dry-run",
            config=NIGHTLY + '[reports]\ndir = "out/r"\n'),
    # rocmbuild.prom or index.html is a directory
    nightly("files-nightly-prom-dir", PROM_DIR, "rocmbuild.prom: is a directory"),
    nightly("files-nightly-prom-dir-dry-run", PROM_DIR, "rocmbuild.prom: is a directory",
            "--dry-run"),
    nightly("files-nightly-prom-dir-collect", {**PROM_DIR, **COLLECT},
            "rocmbuild.prom: is a directory", "--collect", RUN),
    nightly("files-nightly-prom-dir-json", PROM_DIR, "rocmbuild.prom: is a directory",
            "--json"),
    nightly("files-nightly-page-dir", PAGE_DIR, "index.html: is a directory"),
    nightly("files-nightly-page-dir-dry-run", PAGE_DIR, "index.html: is a directory",
            "--dry-run"),
    nightly("files-nightly-prom-dir-own-reports", {"w/rocmbuild.prom/keep": KEEP},
            REPORTS_NEEDLE, "--dry-run", config=NIGHTLY + '[reports]\ndir = "w"\n'),
]
