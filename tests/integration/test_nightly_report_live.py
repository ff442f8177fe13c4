"""The nightly's reports with real parts: the ``notify`` webhook against an HTTP server on
127.0.0.1 (a failure night, a recovery night, a quiet night, a server that fails, one that does
not answer in time), and the history page in headless Chromium (screenshot, table, chart, links).
No GPU here: the TFLOP/s values are written by hand (tests/nightly_runs.py)."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin

import pytest
from PIL import Image

from rocmbuild.nightly.report.webhook import post_json
from rocmbuild.nightly.report.write import write
from tests.nightly_runs import GIT, three_nights, write_logs

TOKEN = "s3cr3t-T0KEN-abc"


class Hook:
    """A webhook receiver: records each POST (path, headers, JSON body) and answers ``code``
    after ``delay`` seconds."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.code = 200
        self.delay = 0.0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts.append({"path": self.path, "type": self.headers["Content-Type"],
                                   "auth": self.headers.get("Authorization"),
                                   "json": json.loads(body)})
                time.sleep(hook.delay)
                self.send_response(hook.code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{TOKEN}?t={TOKEN}"


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    t = threading.Thread(target=h.server.serve_forever, daemon=True)
    t.start()
    yield h
    h.server.shutdown()
    h.server.server_close()


def no_token_under(root: Path, *texts: str) -> None:
    for p in root.rglob("*"):
        assert TOKEN not in p.name
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p
    for t in texts:
        assert TOKEN not in t


def test_webhook_failure_recovery_quiet(tmp_path: Path, hook: Hook,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    n1, n2, n3 = three_nights()
    quiet = write(reports, n1, notify_url=hook.url)  # the first night: all green
    assert quiet.event is None and not quiet.notified and hook.posts == []
    fail = write(reports, n2, notify_url=hook.url)
    assert fail.event == "failure" and fail.notified and len(hook.posts) == 1
    post = hook.posts[0]
    assert post["path"] == f"/hooks/{TOKEN}?t={TOKEN}" and post["type"] == "application/json"
    body = post["json"]
    assert body["event"] == "failure" and body["run"] == n2.run_id and body["ok"] is False
    assert body["failed"] == [GIT] and body["changed"] == [
        {"cell": GIT, "was": "success", "now": "failed"}]
    assert Path(body["summary"]).read_text().startswith(f"# rocmbuild nightly {n2.run_id}")
    assert body["page"] == str(reports / "index.html") and body["text"].endswith(GIT)
    rec = write(reports, n3, notify_url=hook.url)
    assert rec.event == "recovery" and rec.notified and len(hook.posts) == 2
    assert hook.posts[1]["json"]["recovered"] == [GIT]
    assert json.loads(rec.report.read_text())["notes"] == []  # sent: nothing to note
    no_token_under(reports, *capsys.readouterr())


def test_webhook_that_fails_is_a_warning_in_the_report(
        tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    n1, n2, _ = three_nights()
    write(reports, n1)
    hook.code = 500
    url = hook.url.replace("http://", f"http://user:{TOKEN}@")  # basic auth from the URL
    files = write(reports, n2, notify_url=url)
    assert files.event == "failure" and not files.notified and len(hook.posts) == 1
    assert hook.posts[0]["auth"].startswith("Basic ")
    note = "nightly notify: the webhook POST failed: HTTP 500 Internal Server Error"
    assert files.warnings == (note,)
    assert json.loads(files.report.read_text())["notes"] == [note]
    assert note in files.summary.read_text() and note in files.page.read_text()
    # nobody listening: a warning too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = write(reports, n2, notify_url=f"http://127.0.0.1:{port}/hooks/{TOKEN}")
    assert not gone.notified and "Connection refused" in gone.warnings[0]
    no_token_under(reports, *capsys.readouterr())


def test_webhook_timeout_and_bad_scheme(hook: Hook) -> None:
    hook.delay = 1.0
    t0 = time.monotonic()
    why = post_json(hook.url, {"event": "failure"}, timeout=0.3)
    assert why is not None and time.monotonic() - t0 < 0.9
    assert why.startswith("nightly notify: the webhook POST failed: ") and TOKEN not in why
    bad = post_json(f"file:///tmp/{TOKEN}", {})
    assert bad is not None and "not http(s)" in bad and TOKEN not in bad


# ----------------------------------------------------------------------------- the page


def test_history_page_in_chromium(tmp_path: Path, chromium: Any) -> None:
    """Three nights written one after another: the page shows the runs and the cells as
    tables, one chart per cell drawn with its lines, and every link opens a file of the reports
    directory."""
    reports = tmp_path / "reports"
    for night in three_nights():
        write_logs(reports, night)
        files = write(reports, night)
    png = tmp_path / "page.png"
    dom = chromium(files.page, png, "1100,1500")
    assert "<table id=\"runs\">" in dom and "<table id=\"cells\">" in dom
    assert dom.count("<svg") == 3 and "run started (UTC)" in dom and "TFLOP/s" in dom
    hrefs = re.findall(r'href="([^"]+)"', dom)
    assert len(hrefs) >= 3 + 3 + 9  # summaries, cell anchors, logs
    base = files.page.as_uri()
    for h in hrefs:
        if h.startswith("#"):
            assert f'id="{h[1:]}"' in dom, h
            continue
        target = Path(unquote(urljoin(base, h).removeprefix("file://")))
        assert target.is_file() and target.is_relative_to(reports), h
    px = Image.open(png).convert("RGB")
    colours = px.getcolors(1 << 20) or []
    count = {c: n for n, c in colours}
    assert len(colours) > 10  # not blank
    assert count.get((0x1F, 0x77, 0xB4), 0) > 300  # the duration line
    assert count.get((0xFF, 0x7F, 0x0E), 0) > 300  # the TFLOP/s line
    assert count.get((0xDD, 0xDD, 0xDD), 0) > 3000  # the gridlines
