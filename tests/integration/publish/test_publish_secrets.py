"""Secrets, identity and garbled replies, through the real CLI (``python -m rocmbuild``).

- every spelling of an index URL with ``user:password@`` a user may type: refused (exit 2) or
  taken as a server, and in every case the password appears nowhere: not in stdout, stderr,
  file names or file contents under the workdir and the current directory;
- immutability by what pip sees (PEP 503 name, PEP 440 version, build tag, tags), not by file
  name, on a static index and against a server's simple page;
- a real 127.0.0.1 HTTP server (started here, in a thread) that cuts its replies short or sends
  garbage: retried, then exit 9 naming the redacted URL.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from publish_helpers import clean_env, free_port, make_wheel, rocmbuild, snapshot

SECRET = "Hunter2SeCrEt"


def _no_secret(tmp: Path, proc_out: str, inputs: tuple[str, ...] = ()) -> None:
    """The secret is nowhere in the output or under ``tmp`` (but in the ``inputs`` files)."""
    assert SECRET not in proc_out
    assert SECRET.lower() not in proc_out.lower()
    for dirpath, dirs, files in os.walk(tmp):
        for n in dirs + files:
            assert SECRET not in n, os.path.join(dirpath, n)
            p = Path(dirpath) / n
            if p.is_file() and not p.is_symlink() and n not in inputs:
                assert SECRET.encode() not in p.read_bytes(), p


def _one_error(stderr: str, needle: str) -> None:
    errors = [ln for ln in stderr.splitlines() if re.match(r"^\w[\w ]* error: ", ln)]
    assert len(errors) == 1, stderr
    assert needle in errors[0], stderr
    assert "hint:" in stderr and "Traceback" not in stderr, stderr


REFUSED = [
    f"https:/u:{SECRET}@127.0.0.1/",
    f"https:u:{SECRET}@127.0.0.1/",
    f"file://u:{SECRET}@/tmp/idx",
    f"FILE://u:{SECRET}@localhost/tmp/idx",
    f"ftp://u:{SECRET}@127.0.0.1/",
    f"sftp://u:{SECRET}@127.0.0.1/srv",
    f"s3://u:{SECRET}@bucket/wheels",
    f"git+https://u:{SECRET}@127.0.0.1/",
    f"u:{SECRET}@127.0.0.1:/srv/wheels",
    f"{SECRET}@127.0.0.1:/srv/wheels",
    f"//u:{SECRET}@127.0.0.1/",
    f"./u:{SECRET}@127.0.0.1/",
    f"/tmp/u:{SECRET}@127.0.0.1",
    f"https://u:{SECRET}/x@127.0.0.1/",
    f"https://u:{SECRET}#x@127.0.0.1/",
    f"https://u:{SECRET}@127.0.0.1:99999/",
    f"https://u:{SECRET}@/",
    f"https://u:{SECRET}@127.0.0.1/?x=1",
    f"https://u:{SECRET}@127.0.0.1/ up",
    f"https://u:{SECRET}@127.0.0.1/\tx",
    f"file:///tmp/u%3A{SECRET}%40h",
    f"mailto:u:{SECRET}@127.0.0.1",
]


@pytest.mark.parametrize("value", REFUSED, ids=range(len(REFUSED)))
def test_index_forms_refused_without_leaking(tmp_path: Path, value: str) -> None:
    wheel = make_wheel(tmp_path / "in", "okpkg", "1.0")
    p = rocmbuild("--workdir", str(tmp_path / "w"), "publish", str(wheel), "--index", value,
                  cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    _one_error(p.stderr, "--index")
    _no_secret(tmp_path, p.stdout + p.stderr)
    assert not (tmp_path / "w" / "index").exists()


@pytest.mark.parametrize("where", ["env", "pyproject", "simple-url", "promote"])
def test_other_sources_name_themselves(tmp_path: Path, where: str) -> None:
    wheel = make_wheel(tmp_path / "in", "okpkg", "1.0")
    bad = f"ftp://u:{SECRET}@127.0.0.1/"
    args = ["--workdir", str(tmp_path / "w"), "publish", str(wheel)]
    env = clean_env()
    needle = {"env": "ROCMBUILD_INDEX", "pyproject": "tool.rocmbuild.index",
              "simple-url": "--simple-url", "promote": "--index"}[where]
    if where == "env":
        env["ROCMBUILD_INDEX"] = bad
    elif where == "pyproject":
        (tmp_path / "pyproject.toml").write_text(f'[tool.rocmbuild]\nindex = "{bad}"\n')
    elif where == "simple-url":
        args += ["--index", "http://127.0.0.1:9/", "--simple-url", f"file://u:{SECRET}@/x"]
    else:
        args = ["--workdir", str(tmp_path / "w"), "promote", "okpkg==1.0", "--index", bad]
    p = rocmbuild(*args, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    _one_error(p.stderr, needle)
    _no_secret(tmp_path, p.stdout + p.stderr, inputs=("pyproject.toml",))


def test_upper_case_scheme_with_spaces_is_a_server(tmp_path: Path) -> None:
    """`` HTTP://u:pw@127.0.0.1:<closed port>/ ``: a server (not a directory named after it),
    unreachable: exit 9, the URL shown without the password, nothing written."""
    wheel = make_wheel(tmp_path / "in", "okpkg", "1.0")
    port = free_port()
    p = rocmbuild("--workdir", str(tmp_path / "w"), "publish", str(wheel), "--index",
                  f"  HTTP://u:{SECRET}@127.0.0.1:{port}/  ", cwd=tmp_path)
    assert p.returncode == 9, p.stderr
    _one_error(p.stderr, f"http://127.0.0.1:{port}/simple/okpkg/")
    _no_secret(tmp_path, p.stdout + p.stderr)
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").rglob("*okpkg*"))


def _publish(tmp: Path, wheel: Path, *extra: str) -> tuple[int, str, str]:
    p = rocmbuild("--workdir", str(tmp / "w"), "publish", str(wheel), "--index",
                  str(tmp / "idx"), *extra, cwd=tmp)
    return p.returncode, p.stdout, p.stderr


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "first_name,name,version",
    [("okpkg", "OkPkg", "1.0"), ("okpkg", "okpkg", "1.0.0"), ("ok-pkg", "OK.PKG", "1.0"),
     ("ok_pkg", "Ok-Pkg", "1.0.0.0"), ("okpkg", "okpkg", "v1.0")],
)
def test_same_release_other_bytes_refused(tmp_path: Path, first_name: str, name: str,
                                          version: str) -> None:
    first = make_wheel(tmp_path / "a", first_name, "1.0")
    assert _publish(tmp_path, first)[0] == 0
    before = snapshot(tmp_path / "idx" / "stable")
    clash = make_wheel(tmp_path / "b", name, version, payload="X = 2\n")
    rc, _out, err = _publish(tmp_path, clash)
    assert rc == 9, err
    _one_error(err, "different bytes")
    assert _sha(first) in err and _sha(clash) in err
    assert snapshot(tmp_path / "idx" / "stable") == before


def test_same_release_same_bytes_is_a_noop_and_build_tag_is_another_release(
    tmp_path: Path,
) -> None:
    first = make_wheel(tmp_path / "a", "okpkg", "1.0")
    assert _publish(tmp_path, first)[0] == 0
    renamed = tmp_path / "c" / "okpkg-1.0.0-py3-none-any.whl"
    renamed.parent.mkdir()
    shutil.copy(first, renamed)
    before = snapshot(tmp_path / "idx" / "stable")
    rc, _out, err = _publish(tmp_path, renamed)
    assert rc == 0 and "nothing to do" in err, err
    assert snapshot(tmp_path / "idx" / "stable") == before
    other = make_wheel(tmp_path / "d", "okpkg", "1.0", payload="X = 3\n")
    built = other.with_name("okpkg-1.0-1-py3-none-any.whl")
    other.rename(built)
    rc, _out, err = _publish(tmp_path, built)
    assert rc == 0, err
    # two files of one release given at once, other bytes: refused before anything is written
    x = make_wheel(tmp_path / "e", "newpkg", "2.0", payload="X = 1\n")
    y = make_wheel(tmp_path / "f", "NewPkg", "2.0.0", payload="X = 2\n")
    p = rocmbuild("--workdir", str(tmp_path / "w"), "publish", str(x), str(y), "--index",
                  str(tmp_path / "idx"), cwd=tmp_path)
    assert p.returncode == 9 and _sha(x) in p.stderr and _sha(y) in p.stderr, p.stderr


@pytest.mark.parametrize("name", ["..", "_", "-", "a_"])
def test_invalid_project_names_refused(tmp_path: Path, name: str) -> None:
    w = make_wheel(tmp_path / "a", name, "1.0")
    rc, _out, err = _publish(tmp_path, w)
    assert rc == 9, err
    _one_error(err, "not a valid project name")
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("spec", ["..==1.0", "a/../..==1.0", "_==1.0", "x-==1.0"])
def test_promote_invalid_names_refused(tmp_path: Path, spec: str) -> None:
    p = rocmbuild("--workdir", str(tmp_path / "w"), "promote", spec, "--index",
                  str(tmp_path / "idx"), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    _one_error(p.stderr, "not a valid project name")


# --------------------------------------------------------------------------------------------
# a server that misbehaves


Handler = Callable[[http.server.BaseHTTPRequestHandler, int], None]


@pytest.fixture
def bad_server() -> Iterator[tuple[str, list[str], dict[str, Handler]]]:
    """A real HTTP server on 127.0.0.1 whose reply for each request is chosen by the test:
    ``mode["page"](handler, n)`` with n the request's number. Yields (base URL, request log,
    mode)."""
    seen: list[str] = []
    mode: dict[str, Handler] = {}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            mode["page"](self, len(seen))

        def log_message(self, format: str, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/", seen, mode
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def _reply(h: http.server.BaseHTTPRequestHandler, body: bytes, ctype: str = "text/html",
           length: int | None = None) -> None:
    h.send_response(200)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body) if length is None else length))
    h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(body)
    h.wfile.flush()
    h.close_connection = True


PAGE = b"<html><body><a href='../../f/{fn}#sha256={sha}'>{fn}</a></body></html>"


def _page(fn: str, sha: str) -> bytes:
    return PAGE.replace(b"{fn}", fn.encode()).replace(b"{sha}", sha.encode())


GARBLED: dict[str, Handler] = {
    "cut-short": lambda h, n: _reply(h, _page("okpkg-1.0-py3-none-any.whl", "0" * 64)[:30],
                                     length=500),
    "not-utf8": lambda h, n: _reply(h, os.urandom(64) + b"\xff\xfe"),
    "html-no-end": lambda h, n: _reply(h, b"<html><body><a href='x'>"),
    "json-garbled": lambda h, n: _reply(h, b'{"files": [{"filename": ', "application/json"),
    "wrong-type": lambda h, n: _reply(h, b"\x1f\x8b\x08garbage", "application/octet-stream"),
}


@pytest.mark.parametrize("kind", sorted(GARBLED))
def test_truncated_or_garbled_reply_is_retried_then_exit_9(
    tmp_path: Path, bad_server: tuple[str, list[str], dict[str, Handler]], kind: str
) -> None:
    base, seen, mode = bad_server
    mode["page"] = GARBLED[kind]
    wheel = make_wheel(tmp_path / "in", "okpkg", "1.0")
    url = base.replace("http://", f"http://u:{SECRET}@")
    p = rocmbuild("--workdir", str(tmp_path / "w"), "publish", str(wheel), "--index", url,
                  cwd=tmp_path)
    assert p.returncode == 9, p.stderr
    _one_error(p.stderr, f"{base}simple/okpkg/")
    assert "truncated or garbled" in p.stderr
    assert len(seen) == 3, seen  # retried
    _no_secret(tmp_path, p.stdout + p.stderr)


def test_one_cut_reply_then_a_good_one_succeeds_and_clash_is_refused(
    tmp_path: Path, bad_server: tuple[str, list[str], dict[str, Handler]]
) -> None:
    """The server lists ``OkPkg-1.0.0-py3-none-any.whl`` (same release for pip) with another
    sha256: after one cut-short reply the retry reads the page and the upload is refused with
    both hashes, before twine is asked to upload anything."""
    base, seen, mode = bad_server
    page = _page("OkPkg-1.0.0-py3-none-any.whl", "ab" * 32)
    mode["page"] = lambda h, n: _reply(h, page[:10], length=len(page)) if n == 1 else _reply(
        h, page)
    wheel = make_wheel(tmp_path / "in", "okpkg", "1.0")
    p = rocmbuild("--workdir", str(tmp_path / "w"), "publish", str(wheel), "--index", base,
                  cwd=tmp_path)
    assert p.returncode == 9, p.stderr
    _one_error(p.stderr, "OkPkg-1.0.0-py3-none-any.whl")
    assert "ab" * 32 in p.stderr and _sha(wheel) in p.stderr
    assert len(seen) == 2 and all(s == "/simple/okpkg/" for s in seen), seen
