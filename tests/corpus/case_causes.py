"""Bad inputs of class 7 (errors name the real cause) and class 5 (processes): sources that do
not exist or cannot be reached, commits that are not there, and builds whose tool fails with its
own clear words. Each error line carries the tool's words (git's ``fatal: ...``, pip's
``ERROR: ...``, ``CMake Error at ...``, a compiler's ``file:1:2: error: ...``, a Python
exception), not just "exited with code 1"; permanent failures are not retried (their hint is not
"check the network"), transient ones (a refused port) are, with ROCMBUILD_RETRY_BACKOFF=0.

The git cases use a real bare repository written here object by object (zlib + sha1, as git
stores loose objects), so the corpus needs no network and no git at import time.
"""

from __future__ import annotations

import hashlib
import zlib

from tests.corpus import EXIT, Case

NO_WAIT = {"ROCMBUILD_RETRY_BACKOFF": "0"}
FETCH = EXIT["fetch"]
BUILD = EXIT["build"]


def _obj(kind: str, body: bytes) -> tuple[str, bytes]:
    raw = f"{kind} {len(body)}".encode() + b"\0" + body
    return hashlib.sha1(raw).hexdigest(), zlib.compress(raw)


def _bare_repo(root: str) -> tuple[dict[str, str | bytes], str, str, str]:
    """A bare repository with one commit holding README; (files, commit, blob, tree sha)."""
    blob, blob_z = _obj("blob", b"hello\n")
    tree, tree_z = _obj("tree", b"100644 README\0" + bytes.fromhex(blob))
    who = "corpus <corpus@example.invalid> 0 +0000"
    commit, commit_z = _obj("commit", f"tree {tree}\nauthor {who}\ncommitter {who}\n\none\n"
                            .encode())
    files: dict[str, str | bytes] = {
        f"{root}/HEAD": "ref: refs/heads/main\n",
        f"{root}/config": "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
        f"{root}/refs/heads/main": commit + "\n",
        f"{root}/refs/tags/.keep": "",
    }
    for sha, z in ((blob, blob_z), (tree, tree_z), (commit, commit_z)):
        files[f"{root}/objects/{sha[:2]}/{sha[2:]}"] = z
    return files, commit, blob, tree


REPO, COMMIT, BLOB, TREE = _bare_repo("repo.git")
ZEROS = "0" * 40
SHA = "0" * 64


def _git(url: str, commit: str = COMMIT, extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
[source]
git = "{url}"
commit = "{commit}"
{extra}
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
"""


def _sdist(url: str) -> str:
    return f"""schema_version = 1
[package]
name = "demo"
[source]
sdist = {{ url = "{url}", sha256 = "{SHA}" }}
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
"""


def _path(extra: str = "") -> str:
    return f"""schema_version = 1
[package]
name = "demo"
[source]
path = "{{dir}}/src"
[arch]
supported = ["gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
{extra}"""


def _build(id: str, setup_py: str, needle: str, extra_files: dict[str, str] | None = None,
           recipe_extra: str = "") -> Case:
    files: dict[str, str | bytes] = {"r.toml": _path(recipe_extra), "src/setup.py": setup_py,
                                     "src/demo/__init__.py": ""}
    files.update(extra_files or {})
    return Case(id, ("build", "{dir}/r.toml", "--arch", "gfx942"), BUILD, needle, "causes",
                files=files)


def _fetch(id: str, recipe: str, needle: str, transient: bool = False,
           files: dict[str, str | bytes] | None = None) -> Case:
    return Case(id, ("build", "{dir}/r.toml", "--arch", "gfx942"), FETCH, needle, "causes",
                env=dict(NO_WAIT) if transient else {},
                files={"r.toml": recipe, **(files or {})})


SETUP = ('from setuptools import setup\n{pre}\n'
         'setup(name="demo", version="1.0", packages=["demo"])\n')

CASES: list[Case] = [
    # git: the repository is not there, or not a repository (permanent: one attempt)
    # a local repository that is not there is a recipe error, found before anything runs
    Case("git-file-url-missing", ("build", "{dir}/r.toml", "--arch", "gfx942"), EXIT["recipe"],
         "r.toml: source.git: ", "causes", files={"r.toml": _git("file://{dir}/nope.git")}),
    Case("git-abs-path-missing", ("build", "{dir}/r.toml", "--arch", "gfx942"), EXIT["recipe"],
         "nope.git does not exist", "causes", files={"r.toml": _git("{dir}/nope.git")}),
    _fetch("git-dir-not-a-repo", _git("{dir}/plain"),
           "plain (source.url): fatal: repository '", files={"plain/README": "not a repo\n"}),
    _fetch("git-file-not-a-repo", _git("{dir}/afile"),
           "(source.url): fatal:", files={"afile": "just a file\n"}),
    _fetch("git-file-url-dir-not-a-repo", _git("file://{dir}/plain"),
           "plain (source.url): fatal: repository '", files={"plain/README": "x\n"}),
    _fetch("git-empty-dir", _git("{dir}/empty"),
           "empty (source.url): fatal: repository '", files={"empty/.keep": ""}),
    # git: the repository is there, the commit is not
    _fetch("git-unknown-commit", _git("{dir}/repo.git", ZEROS), f"commit {ZEROS} not found",
           files=REPO),
    _fetch("git-commit-is-a-blob", _git("{dir}/repo.git", BLOB), f"commit {BLOB} not found",
           files=REPO),
    _fetch("git-commit-is-a-tree", _git("{dir}/repo.git", TREE), f"commit {TREE} not found",
           files=REPO),
    _fetch("git-unknown-commit-file-url", _git("file://{dir}/repo.git", "f" * 40),
           f"commit {'f' * 40} not found", files=REPO),
    # git: nothing listens (transient: retried, then the tool's words)
    _fetch("git-http-refused", _git("http://127.0.0.1:9/demo.git"),
           "(source.url): failed 3 times; last error: fatal: unable to access", transient=True),
    _fetch("git-https-refused", _git("https://127.0.0.1:9/demo.git"),
           "Failed to connect to 127.0.0.1 port 9", transient=True),
    _fetch("git-localhost-port-1", _git("http://localhost:1/demo.git"),
           "(source.url): failed 3 times", transient=True),
    _fetch("git-ssh-refused", _git("ssh://git@127.0.0.1:9/demo.git"),
           "(source.url): failed 3 times; last error:", transient=True),
    # sdists that are not there (permanent) or not reachable (transient)
    _fetch("sdist-file-url-missing", _sdist("file://{dir}/demo-1.0.tar.gz"),
           "demo-1.0.tar.gz: No such file or directory"),
    _fetch("sdist-file-url-missing-dir", _sdist("file://{dir}/no/such/dir/demo-1.0.tar.gz"),
           "demo-1.0.tar.gz: No such file or directory"),
    _fetch("sdist-file-url-is-a-dir", _sdist("file://{dir}/adir"),
           "(source.sdist.url):", files={"adir/x": "x\n"}),
    _fetch("sdist-http-refused", _sdist("http://127.0.0.1:9/demo-1.0.tar.gz"),
           "(source.sdist.url): failed 3 times; last error:", transient=True),
    _fetch("sdist-https-refused", _sdist("https://127.0.0.1:9/demo-1.0.tar.gz"),
           "(source.sdist.url): failed 3 times; last error:", transient=True),
    _fetch("sdist-ipv6-refused", _sdist("http://[::1]:9/demo-1.0.tar.gz"),
           "download http://[::1]:9/demo-1.0.tar.gz (source.sdist.url): ", transient=True),
    Case("sdist-credentials-refused", ("build", "{dir}/r.toml", "--arch", "gfx942"),
         EXIT["recipe"], "r.toml: source.sdist.url: 'http://***@127.0.0.1:9/demo-1.0.tar.gz'",
         "causes", env=dict(NO_WAIT), secret="hunter2secret", writes_nothing=True,
         files={"r.toml": _sdist("http://bob:hunter2secret@127.0.0.1:9/demo-1.0.tar.gz")}),
    _fetch("sdist-localhost-port-1", _sdist("http://localhost:1/demo-1.0.tar.gz"),
           "(source.sdist.url): failed 3 times", transient=True),
    # builds whose tool says why it failed: the error line carries its words
    _build("build-python-exception", SETUP.format(pre='raise RuntimeError("ROCM_HOME is not '
                                                      'set")'),
           "RuntimeError: ROCM_HOME is not set"),
    _build("build-systemexit-message", SETUP.format(pre='raise SystemExit("error: hipcc not '
                                                        'found on PATH")'),
           "error: hipcc not found on PATH"),
    _build("build-syntax-error", "from setuptools import setup\nsetup(name='demo',\n",
           "SyntaxError"),
    _build("build-missing-module", "import no_such_build_helper\n",
           "ModuleNotFoundError: No module named 'no_such_build_helper'"),
    _build("build-c-compile-error",
           'from setuptools import Extension, setup\nsetup(name="demo", version="1.0", '
           'packages=["demo"], ext_modules=[Extension("demo._k", ["k.c"])])\n',
           "k.c:1:1: error:", extra_files={"src/k.c": "not_a_type x = 1;\n"}),
    _build("build-cmake-error",
           SETUP.format(pre='import subprocess, sys\nsubprocess.run(["cmake", "-S", "cm", "-B", '
                            '"cm/b"], check=True)'),
           "CMake Error at CMakeLists.txt:2 (message): ROCm 6.2 or newer is required",
           extra_files={"src/cm/CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\n"
                        'message(FATAL_ERROR "ROCm 6.2 or newer is required")\n'}),
    _build("build-empty-setup-py", "", "Exactly one .egg-info should have been produced"),
    _build("build-bad-pyproject-backend", SETUP.format(pre=""), "no_such_backend",
           extra_files={"src/pyproject.toml": '[build-system]\nrequires = []\n'
                        'build-backend = "no_such_backend"\n'}),
    _build("build-hipify-fails", SETUP.format(pre=""), "error: hipify-perl: cannot open csrc",
           recipe_extra='hipify = ["python", "-c", "raise SystemExit(\'error: hipify-perl: '
                        'cannot open csrc\')"]\n'),
    _build("build-ninja-error",
           SETUP.format(pre='import os, subprocess\nos.makedirs("nb", exist_ok=True)\n'
                            'subprocess.run(["ninja", "-C", "nb"], check=True)'),
           "ninja: error: loading 'build.ninja': No such file or directory"),
    _build("build-cmake-no-source-dir",
           SETUP.format(pre='import subprocess\nsubprocess.run(["cmake", "-S", "no-such-dir", '
                            '"-B", "b"], check=True)'),
           "CMake Error: The source directory"),
    _build("build-shell-tool-error",
           SETUP.format(pre='import subprocess\nsubprocess.run(["sh", "-c", "echo '
                            '\'ninja: error: loading build.ninja: No such file\' >&2; exit 1"], '
                            'check=True)'),
           "ninja: error: loading build.ninja: No such file"),
]
