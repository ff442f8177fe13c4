"""Class 7: the one-line error carries the tool's own words, and only transient failures are
retried. Pure functions over real tool output (captured from git 2.39, pip 24, cmake 3.27, gcc
12 and curl), so no process starts here."""

from __future__ import annotations

import errno
import http.client
import socket
import urllib.error

import pytest

from rocmbuild.core.errors import CommandFailed
from rocmbuild.core.run import last_cause
from rocmbuild.sources.retry import classify

GIT_MISSING = """fatal: '/tmp/x/nope.git' does not appear to be a git repository
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists."""

PIP_BUILD = """Processing /tmp/src
  Preparing metadata (pyproject.toml): started
  error: subprocess-exited-with-error

  × Preparing metadata (pyproject.toml) did not run successfully.
  │ exit code: 1
  ╰─> [6 lines of output]
      Traceback (most recent call last):
        File "<string>", line 2, in <module>
      RuntimeError: ROCM_HOME is not set
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: metadata-generation-failed

× Encountered error while generating package metadata.
╰─> See above for output.

note: This is an issue with the package mentioned above, not pip.
hint: See above for details."""

GCC_VIA_PIP = """  k.c:1:1: error: unknown type name 'not_a_type'
      1 | not_a_type x = 1;
        | ^~~~~~~~~~
  error: command '/usr/bin/gcc' failed with exit code 1
  ERROR: Failed building wheel for demo
Failed to build demo
ERROR: Failed to build one or more wheels"""

CMAKE = """-- The CXX compiler identification is GNU 12.2.0
CMake Error at CMakeLists.txt:2 (message):
  ROCm 6.2 or newer is required


-- Configuring incomplete, errors occurred!
Traceback (most recent call last):
subprocess.CalledProcessError: Command '['cmake', '-S', 'cm']' returned non-zero exit status 1."""

CLANG_NINJA = """[1/2] Building HIP object attn.hip.o
FAILED: attn.hip.o
/opt/rocm/llvm/bin/clang++ -x hip -c attn.hip -o attn.hip.o
attn.hip:12:5: error: use of undeclared identifier 'wavefront'
1 error generated when compiling for gfx942.
ninja: build stopped: subcommand failed."""


@pytest.mark.parametrize("text, cause", [
    (GIT_MISSING, "fatal: '/tmp/x/nope.git' does not appear to be a git repository"),
    (PIP_BUILD, "RuntimeError: ROCM_HOME is not set"),
    (GCC_VIA_PIP, "error: command '/usr/bin/gcc' failed with exit code 1"),
    (CMAKE, "CMake Error at CMakeLists.txt:2 (message): ROCm 6.2 or newer is required"),
    (CLANG_NINJA, "attn.hip:12:5: error: use of undeclared identifier 'wavefront'"),
    ("ERROR: No matching distribution found for nopkg==9", "ERROR: No matching distribution "
     "found for nopkg==9"),
    ("curl: (22) The requested URL returned error: 404", "curl: (22) The requested URL "
     "returned error: 404"),
    ("building...\nboom: out of memory\n", "boom: out of memory"),
    ("", ""),
], ids=["git", "pip", "gcc", "cmake", "clang-ninja", "pip-resolve", "curl", "plain", "empty"])
def test_last_cause_is_the_tools_own_words(text: str, cause: str) -> None:
    assert last_cause(text) == cause


def test_last_cause_masks_credentials_and_is_one_short_line() -> None:
    got = last_cause("fatal: unable to access 'https://bob:s3cret@git.example/x/': "
                     "Failed to connect\n" + "x" * 10)
    assert "s3cret" not in got and "https://***@git.example" in got
    assert len(last_cause("error: " + "y" * 1000)) == 300


def failed(text: str, rc: int = 128, message: str = "git exited with code 128") -> CommandFailed:
    return CommandFailed(message, detail=text, returncode=rc)


@pytest.mark.parametrize("exc, transient", [
    (failed(GIT_MISSING), False),
    (failed("fatal: repository 'https://github.com/x/nope.git/' not found"), False),
    (failed("fatal: remote error: upload-pack: not our ref 0123"), False),
    (failed("fatal: Authentication failed for 'https://h/x.git/'"), False),
    (failed("fatal: unable to access 'http://127.0.0.1:9/x/': Failed to connect to 127.0.0.1 "
            "port 9 after 0 ms: Couldn't connect to server"), True),
    (failed("fatal: unable to access 'https://github.com/x/': Could not resolve host: "
            "github.com"), True),
    (failed("error: RPC failed; curl 56 GnuTLS recv error (-9)\nfatal: early EOF\n"
            "fatal: fetch-pack: invalid index-pack output"), True),
    (failed("fatal: unable to access 'https://h/x/': The requested URL returned error: 503"),
     True),
    (failed("fatal: unable to access 'https://h/x/': The requested URL returned error: 404"),
     False),
    (CommandFailed("git: command not found", returncode=127), False),
    (urllib.error.HTTPError("http://h/x", 404, "Not Found", None, None), False),  # type: ignore[arg-type]
    (urllib.error.HTTPError("http://h/x", 403, "Forbidden", None, None), False),  # type: ignore[arg-type]
    (urllib.error.HTTPError("http://h/x", 503, "Unavailable", None, None), True),  # type: ignore[arg-type]
    (urllib.error.HTTPError("http://h/x", 429, "Too Many", None, None), True),  # type: ignore[arg-type]
    (urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")),
     True),
    (urllib.error.URLError(FileNotFoundError(errno.ENOENT, "No such file or directory",
                                             "/x.tar.gz")), False),
    (urllib.error.URLError(socket.gaierror(socket.EAI_AGAIN, "Temporary failure")), True),
    (urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
     False),
    (urllib.error.URLError(TimeoutError("timed out")), True),
    (http.client.IncompleteRead(b"abc", 10), True),
    (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), True),
    (OSError("short read: 10 of 20 bytes"), True),
    (OSError(errno.ENOSPC, "No space left on device", "/cache/x"), False),
    (PermissionError(errno.EACCES, "Permission denied", "/cache/x"), False),
], ids=[
    "git-missing", "git-not-found", "git-not-our-ref", "git-auth", "git-refused", "git-dns",
    "git-early-eof", "git-503", "git-404", "git-absent", "http-404", "http-403", "http-503",
    "http-429", "url-refused", "url-no-file", "dns-again", "dns-noname", "url-timeout",
    "incomplete-read", "conn-reset", "short-read", "no-space", "no-permission"])
def test_classify_retries_only_transient_failures(exc: BaseException, transient: bool) -> None:
    failure = classify(exc)
    assert failure.transient is transient, failure
    assert failure.cause and "\n" not in failure.cause


def test_classify_keeps_the_tools_words() -> None:
    assert classify(failed(GIT_MISSING)).cause == (
        "fatal: '/tmp/x/nope.git' does not appear to be a git repository")
    assert classify(urllib.error.HTTPError(  # type: ignore[arg-type]
        "http://h/x", 404, "Not Found", None, None)).cause == "HTTP 404 Not Found"
    no_space = classify(OSError(errno.ENOSPC, "No space left on device", "/cache/x"))
    assert no_space.cause == "/cache/x: No space left on device"
