"""The downloader's credentials come from ~/.netrc (or the file NETRC names), never from the
recipe: a real http.server on 127.0.0.1 that demands Basic auth, the real urllib opener. A
redirect to another host gets that host's entry or none, never the first host's."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.core.errors import FetchError
from rocmbuild.sources.download import download

BODY = b"the pinned bytes\n"
SHA = hashlib.sha256(BODY).hexdigest()
TOKEN = "Zq9-netrc-token"


class AuthServer:
    """Serves /f.bin to ``alice:<TOKEN>`` only (401 otherwise); /hop redirects to ``hop_to``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []  # (Host header, path, Authorization)
        self.hop_to = ""
        outer = self
        good = "Basic " + base64.b64encode(f"alice:{TOKEN}".encode()).decode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                auth = self.headers.get("Authorization")
                outer.seen.append((self.headers.get("Host", ""), self.path, auth))
                if self.path == "/hop":
                    self.send_response(302)
                    self.send_header("Location", outer.hop_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if auth != good:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="files"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AuthServer]:
    monkeypatch.setenv("ROCMBUILD_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc of the machine's user
    monkeypatch.delenv("NETRC", raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    (tmp_path / "home").mkdir()
    s = AuthServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _netrc(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_home_netrc_entry_for_the_host_is_sent(server: AuthServer, tmp_path: Path) -> None:
    _netrc(tmp_path / "home" / ".netrc", f"machine 127.0.0.1 login alice password {TOKEN}\n")
    got = download(f"{server.url}/f.bin", SHA, tmp_path / "cache")
    assert got.read_bytes() == BODY
    assert [p for _, p, a in server.seen if a] == ["/f.bin"]


def test_netrc_variable_names_the_file(server: AuthServer, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _netrc(tmp_path / "home" / ".netrc", "machine 127.0.0.1 login alice password wrong\n")
    monkeypatch.setenv("NETRC", str(_netrc(
        tmp_path / "ci-netrc", f"machine 127.0.0.1\n  login alice\n  password {TOKEN}\n")))
    assert download(f"{server.url}/f.bin", SHA, tmp_path / "cache").read_bytes() == BODY


def test_without_an_entry_a_401_says_where_credentials_go(server: AuthServer,
                                                          tmp_path: Path) -> None:
    _netrc(tmp_path / "home" / ".netrc", f"machine elsewhere login alice password {TOKEN}\n")
    with pytest.raises(FetchError) as exc:
        download(f"{server.url}/f.bin", SHA, tmp_path / "cache", "downloads[0].url")
    assert "HTTP 401" in exc.value.message and "~/.netrc" in exc.value.message
    assert "downloads[0].url" in exc.value.message
    assert len(server.seen) == 1  # a 401 is not retried
    assert server.seen[0][2] is None
    assert not list((tmp_path / "cache").rglob("*.bin"))


def test_a_redirect_to_another_host_never_carries_the_first_hosts_entry(
        server: AuthServer, tmp_path: Path) -> None:
    """127.0.0.1 has an entry, localhost (the same server, another name) has none: the hop's
    request reaches it without the header and gets a 401."""
    _netrc(tmp_path / "home" / ".netrc", f"machine 127.0.0.1 login alice password {TOKEN}\n")
    server.hop_to = f"http://localhost:{server.port}/f.bin"
    with pytest.raises(FetchError, match="HTTP 401"):
        download(f"{server.url}/hop", SHA, tmp_path / "cache")
    assert server.seen[0][1] == "/hop" and server.seen[0][2] is not None
    assert server.seen[1] == (f"localhost:{server.port}", "/f.bin", None)


def test_a_redirect_to_a_host_with_its_own_entry_gets_that_one(server: AuthServer,
                                                                tmp_path: Path) -> None:
    _netrc(tmp_path / "home" / ".netrc", "machine 127.0.0.1 login bob password other\n"
           f"machine localhost login alice password {TOKEN}\n")
    server.hop_to = f"http://localhost:{server.port}/f.bin"
    assert download(f"{server.url}/hop", SHA, tmp_path / "cache").read_bytes() == BODY
    bob = "Basic " + base64.b64encode(b"bob:other").decode()
    assert server.seen[0][2] == bob and server.seen[1][2] != bob


def test_a_bad_netrc_names_its_line_never_a_token(server: AuthServer, tmp_path: Path) -> None:
    _netrc(tmp_path / "home" / ".netrc",
           f"machine 127.0.0.1 login alice password {TOKEN}\nmachine\n")
    with pytest.raises(FetchError) as exc:
        download(f"{server.url}/f.bin", SHA, tmp_path / "cache")
    text = exc.value.message + (exc.value.hint or "")
    assert ".netrc: line" in text and TOKEN not in text
    assert not server.seen


def test_a_fifo_at_netrc_is_refused_without_blocking(server: AuthServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "netrc-fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("NETRC", str(fifo))
    with pytest.raises(FetchError, match="not a netrc file"):
        download(f"{server.url}/f.bin", SHA, tmp_path / "cache")
    assert not server.seen
