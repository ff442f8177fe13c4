"""Bad inputs for publish and promote: secrets in every spelling of an index URL, releases that
clash by identity (name, version, build tag, tags) rather than by file name, invalid project and
stage names, bad --simple-url values and servers on 127.0.0.1 ports nothing listens on.

Ports: 9 (discard) and 1 are not served on the test machines; a connection is refused at once.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

from tests.corpus import EXIT, Case

SECRET = "Pa55w0rdXyZ"
_C = f"u:{SECRET}@"


def _wheel(name: str, version: str, payload: str = "", filename: str | None = None,
           meta_name: str | None = None) -> tuple[str, bytes]:
    """A small valid py3-none-any wheel as (file name, bytes)."""
    dist = name.replace("-", "_")
    di = f"{dist}-{version}.dist-info"
    files = {
        f"{dist.lower().replace('.', '_') or 'pkg'}/__init__.py": f"V = 1\n{payload}".encode(),
        f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {meta_name or name}\n"
        f"Version: {version}\n".encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for n, d in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
        record.append(f"{n},sha256={h},{len(d)}")
    record.append(f"{di}/RECORD,,")
    files[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, d in files.items():
            zf.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d)
    return filename or f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


def _secret(cid: str, value: str, needle: str = "--index") -> Case:
    return Case(
        id=f"publish-secret-{cid}",
        argv=("publish", "{wheel}", "--index", value),
        code=EXIT["usage"],
        needle=needle,
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    )


SECRET_CASES = [
    _secret("https-one-slash", f"https:/{_C}127.0.0.1/"),
    _secret("https-no-slash", f"https:{_C}127.0.0.1/"),
    _secret("file-userinfo", f"file://{_C}/tmp/idx"),
    _secret("file-upper-localhost", f"FILE://{_C}localhost/tmp/idx"),
    _secret("ftp", f"ftp://{_C}127.0.0.1/"),
    _secret("sftp", f"sftp://{_C}127.0.0.1/srv"),
    _secret("s3", f"s3://{_C}bucket/wheels"),
    _secret("git-https", f"git+https://{_C}127.0.0.1/"),
    _secret("scp-like", f"{_C}127.0.0.1:/srv/wheels"),
    _secret("token-scp-like", f"{SECRET}@127.0.0.1:/srv/wheels"),
    _secret("scheme-relative", f"//{_C}127.0.0.1/"),
    _secret("relative-dir-with-at", f"./{_C}127.0.0.1/"),
    _secret("absolute-dir-with-at", f"/tmp/{_C}127.0.0.1"),
    _secret("slash-in-password", f"https://u:{SECRET}/x@127.0.0.1/"),
    _secret("hash-in-password", f"https://u:{SECRET}#x@127.0.0.1/"),
    _secret("bad-port", f"https://{_C}127.0.0.1:99999/"),
    _secret("no-host", f"https://{_C}/"),
    _secret("query", f"https://{_C}127.0.0.1/?x=1"),
    _secret("inner-space", f"https://{_C}127.0.0.1/ x"),
    _secret("tab", f"https://{_C}127.0.0.1/\tx"),
    _secret("file-encoded-at", f"file:///tmp/u%3A{SECRET}%40h"),
    _secret("mailto", f"mailto:{_C}127.0.0.1"),
    Case(
        id="publish-secret-env-ftp",
        argv=("publish", "{wheel}"),
        env={"ROCMBUILD_INDEX": f"ftp://{_C}127.0.0.1/"},
        code=EXIT["usage"],
        needle="ROCMBUILD_INDEX",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
    Case(
        id="publish-secret-simple-url-file",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/", "--simple-url",
              f"file://{_C}/tmp/x"),
        code=EXIT["usage"],
        needle="--simple-url",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
    Case(
        id="publish-secret-simple-url-env",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/"),
        env={"ROCMBUILD_INDEX_SIMPLE_URL": f"ftp://{_C}127.0.0.1/simple/"},
        code=EXIT["usage"],
        needle="ROCMBUILD_INDEX_SIMPLE_URL",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
    Case(
        id="promote-secret-server",
        argv=("promote", "okpkg==1.0", "--index", f"https://{_C}127.0.0.1/"),
        code=EXIT["usage"],
        needle="--index",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
    # a well-formed server URL with credentials, nothing listening: exit 9, URL redacted
    Case(
        id="publish-secret-upper-scheme-spaces-down",
        argv=("publish", "{wheel}", "--index", f"  HTTP://{_C}127.0.0.1:9/  "),
        code=EXIT["publish"],
        needle="http://127.0.0.1:9/simple/",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
    Case(
        id="publish-secret-encoded-password-down",
        argv=("publish", "{wheel}", "--index", f"https://u:{SECRET}%40x@127.0.0.1:1/up/"),
        code=EXIT["publish"],
        needle="https://127.0.0.1:1/up/simple/",
        klass="secrets",
        secret=SECRET,
        writes_nothing=True,
    ),
]

_A = _wheel("okpkg", "1.0")
_B_SAME_NAME = _wheel("OkPkg", "1.0", payload="X = 2\n")
_B_LONG_VERSION = _wheel("okpkg", "1.0.0", payload="X = 3\n")
_B_UPPER_ZEROS = _wheel("OKPKG", "1.0.0.0", payload="X = 4\n")
_B_V = _wheel("okpkg", "v1.0", payload="X = 5\n")


def _clash(cid: str, other: tuple[str, bytes], stage: str = "") -> Case:
    """Publish ``_A`` into a directory index, then ``other`` (the same release for pip, other
    bytes) in the same run: refused before anything is written."""
    extra = ("--stage", stage) if stage else ()
    return Case(
        id=f"publish-identity-{cid}",
        argv=("publish", "{dir}/a/" + _A[0], "{dir}/b/" + other[0], "--index", "{dir}/idx",
              *extra),
        files={f"a/{_A[0]}": _A[1], f"b/{other[0]}": other[1]},
        code=EXIT["publish"],
        needle="different bytes",
        klass="identity",
        writes_nothing=True,
    )


IDENTITY_CASES = [
    _clash("case", _B_SAME_NAME),
    _clash("zero-padded-version", _B_LONG_VERSION),
    _clash("upper-and-zeros", _B_UPPER_ZEROS),
    _clash("v-prefix", _B_V),
    _clash("staging", _B_SAME_NAME, stage="staging"),
]

_BAD_NAMES = {
    "dotdot": _wheel("..", "1.0"),
    "underscore": _wheel("_", "1.0"),
    "trailing-dash": _wheel("okpkg_", "1.0", meta_name="okpkg-"),
}

NAME_CASES = [
    Case(
        id=f"publish-name-{cid}",
        argv=("publish", "{dir}/" + w[0], "--index", "{dir}/idx"),
        files={w[0]: w[1]},
        code=EXIT["publish"],
        needle="not a valid project name",
        klass="identity",
        writes_nothing=True,
    )
    for cid, w in _BAD_NAMES.items()
] + [
    Case(
        id=f"promote-name-{cid}",
        argv=("promote", spec, "--index", "{dir}/idx"),
        code=EXIT["usage"],
        needle="not a valid project name",
        klass="identity",
        writes_nothing=True,
    )
    for cid, spec in {"dotdot": "..==1.0", "slash": "a/../..==1.0", "underscore": "_==1.0",
                      "trailing-dash": "x-==1.0"}.items()
]

STAGE_CASES = [
    Case(
        id=f"publish-stage-{cid}",
        argv=("publish", "{wheel}", "--index", "{dir}/idx", "--stage", stage),
        code=EXIT["usage"],
        needle="--stage",
        klass="inputs",
        writes_nothing=True,
    )
    for cid, stage in {"dotdot": "..", "slash": "a/b", "hidden": ".generations",
                       "files": "files", "space": "my stage"}.items()
] + [
    Case(
        id="promote-stage-to-dotdot",
        argv=("promote", "okpkg==1.0", "--index", "{dir}/idx", "--to", ".."),
        code=EXIT["usage"],
        needle="--to",
        klass="inputs",
        writes_nothing=True,
    ),
]

SERVER_CASES = [
    Case(
        id="publish-simple-url-not-http",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/", "--simple-url",
              "/tmp/simple"),
        code=EXIT["usage"],
        needle="--simple-url",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-simple-url-for-directory",
        argv=("publish", "{wheel}", "--index", "{dir}/idx", "--simple-url",
              "http://127.0.0.1:9/simple/"),
        code=EXIT["usage"],
        needle="--simple-url",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-stage-for-server",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/", "--stage", "staging"),
        code=EXIT["usage"],
        needle="--stage",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-server-refused-port",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/"),
        code=EXIT["publish"],
        needle="http://127.0.0.1:9/simple/",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-simple-url-refused-port",
        argv=("publish", "{wheel}", "--index", "http://127.0.0.1:9/", "--simple-url",
              "http://127.0.0.1:1/simple/"),
        code=EXIT["publish"],
        needle="http://127.0.0.1:1/simple/",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-unsupported-scheme",
        argv=("publish", "{wheel}", "--index", "ftp://127.0.0.1/"),
        code=EXIT["usage"],
        needle="--index",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="promote-server-index",
        argv=("promote", "okpkg==1.0", "--index", "http://127.0.0.1:9/"),
        code=EXIT["usage"],
        needle="--index",
        klass="inputs",
        writes_nothing=True,
    ),
    Case(
        id="publish-index-config-not-a-string",
        argv=("publish", "{wheel}"),
        files={"pyproject.toml": "[tool.rocmbuild]\nindex = 5\n"},
        code=EXIT["usage"],
        needle="tool.rocmbuild.index",
        klass="inputs",
        writes_nothing=True,
    ),
]

CASES: list[Case] = SECRET_CASES + IDENTITY_CASES + NAME_CASES + STAGE_CASES + SERVER_CASES
