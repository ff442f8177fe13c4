"""Bad inputs of the "tracebacks" and "inputs" classes: malformed recipes (TOML, numbers, nesting,
encodings, `when`), malformed and unsafe archives, flags, environment variables,
[tool.rocmbuild], audit and validate inputs, workspace paths with a file in the way.

Archives are made here, in memory, with fixed timestamps, so their sha256 pins are stable; the
recipes fetch them through file:// URLs (no network)."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import random
import tarfile
import zipfile

from tests.corpus import EXIT, Case

ZERO = "0" * 64
EMPTY = hashlib.sha256(b"").hexdigest()
HEAD = 'schema_version = 1\n[package]\nname = "demo"\n'
SDIST = HEAD + '[source]\nsdist = {{ url = "file://{{dir}}/{name}", sha256 = "{sha}" }}\n'
OK = SDIST.format(name="demo-1.0.tar.gz", sha=ZERO)
PATCH = OK + f'[[patches]]\nfile = "p.patch"\nreason = "r"\nsha256 = "{EMPTY}"\n'
PLAN = ("plan", "{dir}/r.toml", "--arch", "gfx942")


def recipe(cid: str, text: str | bytes, needle: str, klass: str = "tracebacks",
           code: int = EXIT["recipe"], extra: dict[str, str | bytes] | None = None) -> Case:
    """A recipe that must be refused by `plan` (nothing is fetched or built)."""
    return Case(cid, PLAN, code, needle, klass, files={"r.toml": text, **(extra or {})},
                writes_nothing=True)


# ----------------------------------------------------------------------------- archives


def _tar(members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:  # type: ignore[call-overload]
        for info, data in members:
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    raw = buf.getvalue()
    if mode == "w:gz":  # gzip stamps the time: rewrite without it
        raw = gzip.compress(gzip.decompress(raw), mtime=0)
    return raw


def _member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE,
            link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    return info, data


def _zip(members: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            if mode:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


_SETUP = _member("demo-1.0/setup.py", b"from setuptools import setup\nsetup()\n")
_NOISE = random.Random(9).randbytes(4096)
_GOOD_TAR = _tar([_SETUP, _member("demo-1.0/demo/__init__.py", b"X = 1\n" * 2000)])

ARCHIVES: dict[str, tuple[str, bytes, str]] = {
    # id: (file name, bytes, needle)
    "archive-absolute-member": ("abs.tar.gz", _tar([_SETUP, _member("/tmp/evil")]),
                                "an absolute path"),
    "archive-dotdot-member": ("dotdot.tar.gz", _tar([_SETUP, _member("demo-1.0/../../evil")]),
                              "'..'"),
    "archive-symlink-out": ("symlink.tar.gz", _tar(
        [_SETUP, _member("demo-1.0/passwd", kind=tarfile.SYMTYPE, link="/etc/passwd")]),
        "a link out of the tree"),
    "archive-symlink-dotdot": ("symlink2.tar.gz", _tar(
        [_SETUP, _member("demo-1.0/up", kind=tarfile.SYMTYPE, link="../../..")]),
        "a link out of the tree"),
    "archive-hardlink-out": ("hardlink.tar.gz", _tar(
        [_SETUP, _member("demo-1.0/shadow", kind=tarfile.LNKTYPE, link="/etc/shadow")]),
        "a link out of the tree"),
    "archive-device-file": ("device.tar.gz", _tar(
        [_SETUP, _member("demo-1.0/null", kind=tarfile.CHRTYPE)]), "a device file"),
    "archive-block-device": ("block.tar.gz", _tar(
        [_SETUP, _member("demo-1.0/sda", kind=tarfile.BLKTYPE)]), "a device file"),
    "archive-fifo": ("fifo.tar.gz", _tar([_SETUP, _member("demo-1.0/pipe", kind=tarfile.FIFOTYPE)]),
                     "fifo"),
    "archive-truncated-gz": ("trunc.tar.gz", _GOOD_TAR[: len(_GOOD_TAR) // 2],
                             "not a readable tar or zip"),
    "archive-random-bytes": ("noise.tar.gz", _NOISE, "not a readable tar or zip"),
    "archive-random-gzip": ("noisegz.tar.gz", gzip.compress(_NOISE, mtime=0),
                            "not a readable tar or zip"),
    "archive-empty-file": ("empty.tar.gz", b"", "not a readable tar or zip"),
    "archive-html-page": ("page.tar.gz", b"<html><body>404 Not Found</body></html>\n",
                          "not a readable tar or zip"),
    "archive-bad-xz": ("bad.tar.xz", lzma.compress(_NOISE)[:100], "not a readable tar or zip"),
    "archive-bad-bz2": ("bad.tar.bz2", bz2.compress(_NOISE)[:200], "not a readable tar or zip"),
    "archive-zip-absolute": ("abs.zip", _zip([("demo-1.0/setup.py", b"", 0),
                                               ("/tmp/evil", b"x", 0)]), "an absolute path"),
    "archive-zip-dotdot": ("dotdot.zip", _zip([("demo-1.0/setup.py", b"", 0),
                                                ("demo-1.0/../../evil", b"x", 0)]), "'..'"),
    "archive-zip-symlink": ("link.zip", _zip([("demo-1.0/setup.py", b"", 0),
                                               ("demo-1.0/passwd", b"/etc/passwd", 0o120777)]),
                            "a symbolic link"),
    "archive-zip-truncated": ("trunc.zip", _zip([("demo-1.0/setup.py", _NOISE, 0)])[:-30],
                              "not a readable tar or zip"),
}


def _archive_case(cid: str, name: str, data: bytes, needle: str) -> Case:
    sha = hashlib.sha256(data).hexdigest()
    return Case(cid, ("build", "{dir}/r.toml", "--arch", "gfx942"), EXIT["fetch"], needle,
                "inputs" if cid in ("archive-absolute-member", "archive-zip-absolute")
                else "tracebacks",
                files={"r.toml": SDIST.format(name=name, sha=sha), name: data}, timeout=60)


# ----------------------------------------------------------------------------- wheels


def _wheel(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


_WHEEL_META = {
    "okpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "okpkg-1.0.dist-info/RECORD": b"",
}
_META = {"okpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: okpkg\nVersion: 1.0\n"}
W = "okpkg-1.0-py3-none-any.whl"


def _validate(cid: str, files: dict[str, bytes], needle: str, name: str = W) -> Case:
    return Case(cid, ("validate", "{dir}/" + name, "--no-kernels"), EXIT["validation"], needle,
                "tracebacks", files={name: _wheel(files)}, writes_nothing=True, timeout=60)


# ----------------------------------------------------------------------------- the cases

CASES: list[Case] = [
    # recipes: numbers, nesting, encodings, syntax
    recipe("recipe-nan-mem-per-job", OK + "[build]\nmem_per_job_gb = nan\n",
           "build.mem_per_job_gb"),
    recipe("recipe-inf-disk", OK + "[build]\ndisk_gb = inf\n", "build.disk_gb"),
    recipe("recipe-neg-inf-mem", OK + "[build]\nmem_per_job_gb = -inf\n",
           "build.mem_per_job_gb"),
    recipe("recipe-variant-nan", OK + "[variants.x]\nmem_per_job_gb = +nan\n",
           "variants.x.mem_per_job_gb"),
    recipe("recipe-deep-arrays", OK + "junk = " + "[" * 600 + "]" * 600 + "\n", "nested"),
    recipe("recipe-deep-inline-tables", OK + "junk = " + "{a=" * 300 + "1" + "}" * 300 + "\n",
           "nested"),
    recipe("recipe-deep-dotted-key", OK + ".".join(["k"] * 200) + " = 1\n", "nested"),
    recipe("recipe-bom-then-typo", b"\xef\xbb\xbf" + (OK + "[bulid]\n").encode(),
           "bulid: unknown key", klass="inputs"),
    recipe("recipe-utf16", OK.encode("utf-16"), "not UTF-8"),
    recipe("recipe-latin1", (OK + "# caf\xe9\n").encode("latin-1"), "not UTF-8"),
    recipe("recipe-toml-syntax", OK + "[build\n", "invalid TOML"),
    recipe("recipe-duplicate-key", OK + "[build]\ndisk_gb = 1\ndisk_gb = 2\n", "invalid TOML"),
    recipe("recipe-schema-float", OK.replace("schema_version = 1", "schema_version = 1.0"),
           "schema_version"),
    recipe("recipe-schema-huge", OK.replace("schema_version = 1", "schema_version = "
                                            + "9" * 40), "schema_version"),
    recipe("recipe-schema-date", OK.replace("schema_version = 1", "schema_version = 1979-05-27"),
           "schema_version"),
    recipe("recipe-sha-nonhex", SDIST.format(name="d.tar.gz", sha="z" * 64),
           "source.sdist.sha256"),
    recipe("recipe-path-source-is-file", HEAD + '[source]\npath = "f.txt"\n', "source.path",
           extra={"f.txt": "not a dir\n"}),
    recipe("recipe-patch-file-is-dir", PATCH.replace("p.patch", "pdir"),
           "patches[0].file", extra={"pdir/x": "x\n"}),
    # patches' when: wrong types
    *[recipe(f"recipe-when-{cid}", PATCH + f"when = {when}\n", needle, klass="inputs",
             extra={"p.patch": ""})
      for cid, when, needle in (
          ("int", "{ variant = 3 }", "patches[0].when.variant"),
          ("string", '"ck"', "patches[0].when"),
          ("bool", "true", "patches[0].when"),
          ("list-of-ints", "{ arch = [942] }", "patches[0].when.arch"),
          ("nested-table", '{ variant = { name = "ck" } }', "patches[0].when.variant"),
          ("empty-list", "{ variant = [] }", "patches[0].when.variant"),
          ("float", "{ arch = 9.42 }", "patches[0].when.arch"),
      )],
    # recipe paths
    Case("recipe-path-is-dir", ("plan", "{dir}/recipes", "--arch", "gfx942"), EXIT["usage"],
         "is a directory", "inputs", files={"recipes/r.toml": OK}, writes_nothing=True),
    Case("recipe-toml-dir", ("plan", "{dir}/x.toml", "--arch", "gfx942"), EXIT["usage"],
         "is a directory", "inputs", files={"x.toml/r.toml": OK}, writes_nothing=True),
    Case("recipe-bare-name-dir", ("plan", "mydir", "--arch", "gfx942"), EXIT["usage"],
         "recipe mydir: is a directory", "inputs", files={"mydir/r.toml": OK},
         writes_nothing=True),
    Case("recipe-dot", ("plan", ".", "--arch", "gfx942"), EXIT["usage"], "is a directory",
         "inputs", writes_nothing=True),
    Case("recipe-fifo", ("plan", "/dev/null", "--arch", "gfx942"), EXIT["usage"],
         "not a regular file", "inputs", writes_nothing=True),
    # archives
    *[_archive_case(cid, *spec) for cid, spec in ARCHIVES.items()],
    # flags
    *[Case(f"arch-{cid}", ("plan", "{dir}/r.toml", "--arch", value), EXIT["usage"], needle,
           "inputs", files={"r.toml": OK}, writes_nothing=True)
      for cid, value, needle in (
          ("unknown-feature", "gfx90a:foo+", "--arch: unknown target feature 'foo+'"),
          ("feature-no-sign", "gfx90a:xnack", "--arch: unknown target feature 'xnack'"),
          ("feature-twice", "gfx90a:xnack+:xnack+", "--arch: feature xnack given twice"),
          ("feature-contradicts", "gfx942:xnack+:xnack-", "--arch: feature xnack given twice"),
          ("feature-empty", "gfx942:", "--arch: unknown target feature ''"),
          ("feature-wrong-sign", "gfx942:sramecc*", "--arch: unknown target feature"),
          ("empty-list", ",;,", "--arch: empty list"),
          ("unknown-gfx", "gfx9999", "--arch: unknown GPU architecture"),
      )],
    Case("rocm-path-missing", ("plan", "{dir}/r.toml", "--arch", "gfx942", "--rocm-path",
                               "{dir}/no-rocm"), EXIT["usage"], "--rocm-path", "inputs",
         files={"r.toml": OK}, writes_nothing=True),
    Case("rocm-path-is-file", ("plan", "{dir}/r.toml", "--arch", "gfx942", "--rocm-path",
                               "{dir}/r.toml"), EXIT["usage"], "--rocm-path", "inputs",
         files={"r.toml": OK}, writes_nothing=True),
    Case("rocm-version-garbage", ("plan", "{dir}/r.toml", "--arch", "gfx942", "--rocm-version",
                                  "six"), EXIT["usage"], "--rocm-version", "inputs",
         files={"r.toml": OK}, writes_nothing=True),
    Case("doctor-recipe-unknown", ("doctor", "--recipe", "no-such-recipe"), EXIT["usage"],
         "unknown recipe 'no-such-recipe'", "inputs", writes_nothing=True, timeout=20),
    Case("doctor-recipe-dir", ("doctor", "--recipe", "{dir}"), EXIT["usage"], "is a directory",
         "inputs", writes_nothing=True, timeout=20),
    # workspace paths with a file in the way
    Case("workdir-is-file", ("build", "{dir}/r.toml", "--arch", "gfx942", "--workdir",
                             "{dir}/r.toml"), EXIT["usage"], "--workdir", "tracebacks",
         files={"r.toml": OK}),
    Case("workdir-under-file", ("build", "{dir}/r.toml", "--arch", "gfx942", "--workdir",
                                "{dir}/r.toml/build"), EXIT["usage"], "--workdir", "tracebacks",
         files={"r.toml": OK}),
    Case("cache-dir-is-file", ("build", "{dir}/r.toml", "--arch", "gfx942", "--cache-dir",
                               "{dir}/r.toml"), EXIT["usage"], "--cache-dir", "tracebacks",
         files={"r.toml": OK}, writes_nothing=True),
    Case("wheel-dir-is-file", ("build", "{dir}/r.toml", "--arch", "gfx942", "--wheel-dir",
                               "{dir}/r.toml"), EXIT["usage"], "--wheel-dir", "tracebacks",
         files={"r.toml": OK}, writes_nothing=True),
    Case("validate-workdir-is-file", ("validate", "{wheel}", "--no-kernels", "--workdir",
                                      "{dir}/f"), EXIT["usage"], "--workdir", "tracebacks",
         files={"f": "x"}),
    # environment variables
    *[Case(f"env-{cid}", argv, EXIT["usage"], needle, "tracebacks", env={var: value},
           files={"r.toml": OK, "f": "a file\n"}, writes_nothing=True, timeout=30)
      for cid, var, value, argv, needle in (
          ("jobs-word", "ROCMBUILD_JOBS", "many", PLAN, "ROCMBUILD_JOBS"),
          ("jobs-zero", "ROCMBUILD_JOBS", "0", PLAN, "ROCMBUILD_JOBS"),
          ("jobs-float", "ROCMBUILD_JOBS", "1.5", PLAN, "ROCMBUILD_JOBS"),
          ("verbosity-word", "ROCMBUILD_VERBOSITY", "loud", PLAN, "ROCMBUILD_VERBOSITY"),
          ("verbosity-negative", "ROCMBUILD_VERBOSITY", "-1", PLAN, "ROCMBUILD_VERBOSITY"),
          ("validate-maybe", "ROCMBUILD_VALIDATE", "maybe",
           ("build", "{dir}/r.toml", "--arch", "gfx942"), "ROCMBUILD_VALIDATE"),
          ("arch-unknown", "ROCMBUILD_ARCH", "gfx9999", ("plan", "{dir}/r.toml"),
           "ROCMBUILD_ARCH"),
          ("arch-feature", "ROCMBUILD_ARCH", "gfx90a:xnack", ("plan", "{dir}/r.toml"),
           "ROCMBUILD_ARCH"),
          ("gpu-vendor", "ROCMBUILD_GPU_VENDOR", "intel", PLAN, "ROCMBUILD_GPU_VENDOR"),
          ("rocm-version", "ROCMBUILD_ROCM_VERSION", "latest", PLAN, "ROCMBUILD_ROCM_VERSION"),
          ("rocm-path", "ROCM_PATH", "{dir}/nowhere", PLAN, "ROCM_PATH"),
          ("cache-dir-file", "ROCMBUILD_CACHE_DIR", "{dir}/f",
           ("build", "{dir}/r.toml", "--arch", "gfx942"), "ROCMBUILD_CACHE_DIR"),
          ("wheel-dir-file", "ROCMBUILD_WHEEL_DIR", "{dir}/f",
           ("build", "{dir}/r.toml", "--arch", "gfx942"), "ROCMBUILD_WHEEL_DIR"),
          ("torch-from-missing", "ROCMBUILD_TORCH_FROM", "{dir}/nowhere",
           ("validate", "{wheel}", "--no-kernels"), "ROCMBUILD_TORCH_FROM"),
          ("sysfs-root-missing", "ROCMBUILD_SYSFS_ROOT", "{dir}/nowhere",
           ("plan", "{dir}/r.toml", "--arch", "native"), "ROCMBUILD_SYSFS_ROOT"),
          ("recipe-path-file", "ROCMBUILD_RECIPE_PATH", "{dir}/f", ("plan", "demo"),
           "ROCMBUILD_RECIPE_PATH"),
          ("retry-backoff-nan", "ROCMBUILD_RETRY_BACKOFF", "nan",
           ("build", "{dir}/r.toml", "--arch", "gfx942"), "ROCMBUILD_RETRY_BACKOFF"),
          ("retry-backoff-negative", "ROCMBUILD_RETRY_BACKOFF", "-2", PLAN,
           "ROCMBUILD_RETRY_BACKOFF"),
          ("source-date-epoch-word", "SOURCE_DATE_EPOCH", "yesterday",
           ("build", "{dir}/r.toml", "--arch", "gfx942"), "SOURCE_DATE_EPOCH"),
          ("source-date-epoch-float", "SOURCE_DATE_EPOCH", "1.5e9", PLAN, "SOURCE_DATE_EPOCH"),
          ("toolchain-dir-file", "ROCMBUILD_TOOLCHAIN_DIR", "{dir}/f", PLAN,
           "ROCMBUILD_TOOLCHAIN_DIR"),
          ("source-unknown", "ROCMBUILD_SOURCE", "nope", PLAN, "no source 'nope'"),
      )],
    # [tool.rocmbuild] in ./pyproject.toml
    *[Case(f"pyproject-{cid}", PLAN[:2], EXIT["usage"], needle, "tracebacks",
           files={"r.toml": OK, "pyproject.toml": text}, writes_nothing=True)
      for cid, text, needle in (
          ("arch-unknown", '[tool.rocmbuild]\narch = "gfx9999"\n', "tool.rocmbuild.arch"),
          ("arch-feature", '[tool.rocmbuild]\narch = "gfx942:turbo+"\n',
           "tool.rocmbuild.arch"),
          ("jobs-zero", '[tool.rocmbuild]\narch = "gfx942"\njobs = 0\n', "tool.rocmbuild.jobs"),
          ("jobs-nan", '[tool.rocmbuild]\narch = "gfx942"\njobs = nan\n', "tool.rocmbuild.jobs"),
          ("unknown-key", '[tool.rocmbuild]\narch = "gfx942"\nflavour = 1\n',
           "tool.rocmbuild.flavour"),
          ("not-a-table", '[tool]\nrocmbuild = 3\n', "tool.rocmbuild"),
          ("bad-toml", '[tool.rocmbuild\n', "pyproject.toml: invalid TOML"),
          ("bom-then-typo", "\ufeff[tool.rocmbuild]\narch = \"gfx942\"\njbos = 2\n",
           "tool.rocmbuild.jbos"),
      )],
    # audit inputs
    Case("audit-zip-not-wheel", ("audit", "{dir}/x.whl"), EXIT["usage"], "not a wheel", "inputs",
         files={"x.whl": _zip([("notes.txt", b"hello", 0)])}, writes_nothing=True),
    Case("audit-zip-renamed-jar", ("audit", "{dir}/lib.so"), EXIT["usage"], "not a wheel",
         "inputs", files={"lib.so": _zip([("META-INF/MANIFEST.MF", b"x", 0)])},
         writes_nothing=True),
    Case("audit-empty-file", ("audit", "{dir}/empty.so"), EXIT["usage"], "empty.so", "inputs",
         files={"empty.so": b""}, writes_nothing=True),
    Case("audit-text-so", ("audit", "{dir}/lib.so"), EXIT["usage"], "lib.so", "inputs",
         files={"lib.so": "INPUT(-lfoo)\n"}, writes_nothing=True),
    Case("audit-directory", ("audit", "{dir}/d"), EXIT["usage"], "audit:", "inputs",
         files={"d/x": "x"}, writes_nothing=True),
    Case("audit-truncated-elf", ("audit", "{dir}/t.so"), EXIT["audit"], "t.so", "tracebacks",
         files={"t.so": b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00>\x00"},
         writes_nothing=True),
    Case("audit-truncated-zip", ("audit", "{dir}/t.whl"), EXIT["audit"], "t.whl", "tracebacks",
         files={"t.whl": _wheel({**_META, **_WHEEL_META})[:60]}, writes_nothing=True),
    # validate: malformed wheels (exit 8, no venv left behind)
    _validate("validate-no-metadata", _WHEEL_META, "METADATA"),
    _validate("validate-metadata-not-utf8", {**_WHEEL_META, "okpkg-1.0.dist-info/METADATA":
                                             b"Name: okpkg\nVersion: 1.0\nSummary: \xff\xfe\n"},
              "METADATA"),
    _validate("validate-provenance-list", {**_META, **_WHEEL_META,
                                           "okpkg-1.0.dist-info/rocmbuild.json":
                                           json.dumps(["gfx942"]).encode()}, "rocmbuild.json"),
    _validate("validate-provenance-bad-json", {**_META, **_WHEEL_META,
                                               "okpkg-1.0.dist-info/rocmbuild.json": b"{arch"},
              "rocmbuild.json"),
    _validate("validate-provenance-archs-int", {**_META, **_WHEEL_META,
                                                "okpkg-1.0.dist-info/rocmbuild.json":
                                                b'{"archs": 942}'}, "rocmbuild.json"),
    _validate("validate-provenance-not-utf8", {**_META, **_WHEEL_META,
                                               "okpkg-1.0.dist-info/rocmbuild.json":
                                               b'{"archs": ["\xff"]}'}, "rocmbuild.json"),
    Case("validate-not-a-zip", ("validate", "{dir}/" + W, "--no-kernels"), EXIT["validation"],
         W, "tracebacks", files={W: b"not a zip at all\n"}, writes_nothing=True, timeout=60),
]
