"""deploy/nginx/rocmbuild-index.conf, for real: Debian's nginx (started here as a foreground
process on 127.0.0.1 with a temp prefix) serves an index written by `rocmbuild publish`; pip and
uv install through it; the access log shows that they asked for PEP 691 JSON and got the
index.json files, and that they read the PEP 658 `.metadata` files. A browser-style or absent
Accept header gets the HTML page. The shipped file is used as is, but for its `listen` and
`root` lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from publish_helpers import REPO, clean_env, free_port, pip_install, rocmbuild, wait_for_http

CONF = REPO / "deploy" / "nginx" / "rocmbuild-index.conf"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).is_file()), None)
JSON = "application/vnd.pypi.simple.v1+json"

pytestmark = pytest.mark.skipif(NGINX is None,
                                reason="nginx is not installed (scripts/setup.sh installs it)")


def _uv() -> str | None:
    here = Path(sys.executable).parent / "uv"
    return str(here) if here.is_file() else shutil.which("uv")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, real_wheels: dict[str, Path]):  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("nginx")
    index = base / "index"
    rocmbuild("publish", str(real_wheels["tiny"]), str(real_wheels["tiny_old"]),
              str(real_wheels["other"]), "--index", str(index), check=True)
    text = CONF.read_text()
    port = free_port()
    assert text.count("listen 80;") == 1 and text.count("root /srv/rocmbuild/index;") == 1
    site = text.replace("listen 80;", f"listen 127.0.0.1:{port};").replace(
        "root /srv/rocmbuild/index;", f"root {index};")
    prefix = base / "prefix"
    (prefix / "tmp").mkdir(parents=True)
    (prefix / "site.conf").write_text(site)
    temps = "\n".join(f"    {kind}_temp_path tmp/{kind};"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (prefix / "nginx.conf").write_text(
        # the workers run as this user: as root, nginx would otherwise drop them to nobody,
        # who cannot read pytest's 0700 temp dirs
        ("user root;\n" if os.geteuid() == 0 else "")
        + "worker_processes 1;\npid nginx.pid;\nerror_log error.log;\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        "    log_format negotiated '$request_uri|$http_accept|$uri|$status|$content_type"
        "|$sent_http_content_type';\n"
        "    access_log access.log negotiated;\n"
        "    default_type application/octet-stream;\n"
        f"{temps}\n"
        "    include site.conf;\n"
        "}\n")
    url = f"http://127.0.0.1:{port}/stable/simple/"
    with open(prefix / "stderr", "wb") as err:
        proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", "nginx.conf", "-e", "stderr",
                                 "-g", "daemon off; master_process on;"],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for_http(url, proc, "nginx", seconds=30, log=prefix / "stderr")
        yield {"url": url, "log": prefix / "access.log", "index": index}
    finally:
        proc.terminate()
        proc.wait(10)


def _get(url: str, accept: str | None) -> tuple[str, str, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["Content-Type"], r.headers.get("Vary", ""), r.read().decode()


def _log(served: dict) -> list[list[str]]:  # type: ignore[type-arg]
    return [line.split("|") for line in served["log"].read_text().splitlines()]


@pytest.mark.parametrize(("accept", "kind"), [
    (f"{JSON}, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01", "json"),  # pip
    (JSON, "json"),
    ("application/vnd.pypi.simple.latest+json", "json"),
    (f"text/html, {JSON};q=0", "html"),  # refuses JSON
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "html"),  # a browser
    (None, "html"),
])
def test_negotiation(served: dict, accept: str | None, kind: str) -> None:  # type: ignore[type-arg]
    for page in ("", "tiny-pkg/"):
        ctype, vary, body = _get(served["url"] + page, accept)
        assert "Accept" in vary
        if kind == "json":
            assert ctype == JSON and body.lstrip().startswith("{")
        else:
            assert ctype.startswith("text/html") and body.lstrip().lower().startswith("<!doctype")


def test_internals_are_hidden(served: dict) -> None:  # type: ignore[type-arg]
    for path in (".lock", ".generations/"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(served["url"].replace("stable/simple/", path), timeout=10)
        err.value.close()
        assert err.value.code == 404


def test_pip_installs_reading_json_and_metadata(served: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    proc = pip_install(served["url"], tmp_path / "t", "tiny-pkg")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rocm6.2" in (tmp_path / "t" / "tiny_pkg" / "__init__.py").read_text()
    lines = [x for x in _log(served) if "python-requests" not in x and x[0].endswith("tiny-pkg/")]
    assert lines, _log(served)
    uri, accept, served_uri, status = lines[-1][:4]
    assert JSON in accept and served_uri.endswith("/tiny-pkg/index.json") and status == "200"


def test_uv_installs_reading_json_and_metadata(served: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed (pyproject's test extra installs it)")
    before = len(_log(served))
    env = clean_env(UV_NO_CACHE="1", UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
    proc = subprocess.run([uv, "pip", "install", "--python", sys.executable, "--target",
                           str(tmp_path / "t"), "--index-url", served["url"], "tiny-pkg"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rocm6.2" in (tmp_path / "t" / "tiny_pkg" / "__init__.py").read_text()
    mine = _log(served)[before:]
    pages = [x for x in mine if x[0].endswith("/simple/tiny-pkg/")]
    assert pages and all(JSON in x[1] and x[2].endswith("/tiny-pkg/index.json") and x[3] == "200"
                         for x in pages), mine
    meta = [x for x in mine if x[0].endswith(".whl.metadata")]
    assert meta and meta[0][3] == "200", mine
    assert any(x[0].endswith(".whl") and x[3] == "200" for x in mine), mine
