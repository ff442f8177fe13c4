"""The no-op rebuild's short path (rocmbuild.commands.noop_memo) on real builds: the real CLI
in a child, a real sdist served by an http.server on 127.0.0.1 started here, real `pip wheel`
builds, a real patch. Nothing is faked. What is proved: a repeated command line is served by the
memo (without importing the recipe model) and prints what the full path prints; every input the
full path reads makes it take the full path again; a bad memo is ignored; a wheel recorded as
failed or copied to broken/ is never served by it; prune empties the memos."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import rocmbuild
from tests.integration.conftest import serve_files

PATCH = "--- a/demo/__init__.py\n+++ b/demo/__init__.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"


def _sdist(version: str = "1.0") -> bytes:
    files = {
        f"demo-{version}/setup.py": ("from setuptools import setup\n"
                                     f"setup(name='demo-q', version='{version}', "
                                     "packages=['demo'])\n"),
        f"demo-{version}/demo/__init__.py": "VALUE = 1\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1700000000
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def served() -> Iterator[dict[str, bytes]]:
    """The sdists an HTTP server on 127.0.0.1 serves, by path (``url``: its base URL)."""
    files: dict[str, bytes] = {}
    with serve_files(files) as (url, _):
        files["url"] = url.encode()
        yield files


def _recipe(where: Path, files: dict[str, bytes], version: str = "1.0") -> Path:
    """``where/demo.toml``: an sdist source with one patch (``where/fix.patch``)."""
    where.mkdir(parents=True, exist_ok=True)
    sdist = _sdist(version)
    files[f"/demo-{version}.tar.gz"] = sdist
    (where / "fix.patch").write_text(PATCH)
    url = files["url"].decode() + f"/demo-{version}.tar.gz"
    r = where / "demo.toml"
    r.write_text(f"""schema_version = 1
[package]
name = "demo-q"
[source]
sdist = {{ url = "{url}", sha256 = "{hashlib.sha256(sdist).hexdigest()}" }}
[arch]
supported = ["gfx942"]
[build]
python_requires = ["setuptools", "wheel"]
[[patches]]
file = "fix.patch"
sha256 = "{hashlib.sha256(PATCH.encode()).hexdigest()}"
reason = "exercise the patch stage"
[validate]
kernel = "none"
""")
    return r


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The children's environment. PYTHONPROFILEIMPORTTIME in every run (it is part of the
    inputs): its lines show whether the recipe model was imported, i.e. the full path ran."""
    extra = tmp_path / "site"  # on sys.path: a dist put here later changes the host
    extra.mkdir(exist_ok=True)
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "w"), "ROCMBUILD_CACHE_DIR": str(tmp_path / "c"),
            "ROCMBUILD_RECIPE_PATH": f"{tmp_path / 'first'}{os.pathsep}{tmp_path / 'r'}",
            "PYTHONPATH": os.pathsep.join(p for p in (str(extra),
                                                      os.environ.get("PYTHONPATH")) if p),
            "PYTHONPROFILEIMPORTTIME": "1", "ROCMBUILD_RETRY_BACKOFF": "0", **more}


def _imports(stderr: str) -> set[str]:
    return {ln.rsplit("|", 1)[1].strip() for ln in stderr.splitlines()
            if ln.startswith("import time:")}


def _build(tmp_path: Path, *more: str, env: dict[str, str] | None = None
           ) -> tuple[int, str, bool]:
    """(exit code, stderr without the import lines, whether the recipe model was imported:
    False = served by a memo)."""
    (tmp_path / "first").mkdir(exist_ok=True)
    res = rocmbuild("demo", "--arch", "gfx942", *more, env=env or _env(tmp_path), cwd=tmp_path)
    text = "\n".join(ln for ln in res.stderr.splitlines() if not ln.startswith("import time:"))
    return res.returncode, text, "rocmbuild.recipe.model" in _imports(res.stderr)


def _ending(stderr: str) -> str:
    return stderr.rstrip().rsplit(" ", 1)[-1]


def _memos(tmp_path: Path) -> dict[str, dict[str, object]]:
    d = tmp_path / "c" / "memo"
    return {p.name: json.loads(p.read_text()) for p in sorted(d.glob("*.json"))} \
        if d.is_dir() else {}


def _timeless(stderr: str) -> str:
    return re.sub(r"  \d+\.\d\ds  ", "  <t>  ", stderr)


def test_a_repeated_build_is_served_by_its_memo_as_the_full_path_serves_it(
        tmp_path: Path, served: dict[str, bytes]) -> None:
    _recipe(tmp_path / "r", served)
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "built" and full, err
    (name, memo), = _memos(tmp_path).items()
    assert memo["files"] == [[str(tmp_path / "r" / "demo.toml"), hashlib.sha256(
        (tmp_path / "r" / "demo.toml").read_bytes()).hexdigest()], [
        str(tmp_path / "r" / "fix.patch"), hashlib.sha256(PATCH.encode()).hexdigest()]]
    assert memo["absent"] == [str(tmp_path / "first" / "demo.toml")]
    rc, fast, full = _build(tmp_path)
    assert rc == 0 and _ending(fast) == "cached" and not full, fast
    wheel = tmp_path / "w" / "wheels" / "demo_q-1.0+rocm6.2.gfx942-py3-none-any.whl"
    wheel.unlink()  # delivered again, byte for byte
    rc, fast2, full = _build(tmp_path)
    assert rc == 0 and not full and wheel.is_file(), fast2
    # the full path's hit, for comparison: the memo gone, the same command line
    shutil.rmtree(tmp_path / "c" / "memo")
    rc, slow, full = _build(tmp_path)
    assert rc == 0 and full, slow
    assert _timeless(fast) == _timeless(slow) == _timeless(fast2)
    assert list(_memos(tmp_path)) == [name]  # written again, same name
    # a prune empties the memos (they may name what it removes)
    res = rocmbuild("cache", "prune", "--keep-days", "1000", env=_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _memos(tmp_path) == {}
    # --force is never served from a memo and writes none
    for _ in range(2):
        rc, err, full = _build(tmp_path, "--force")
        assert rc == 0 and _ending(err) == "built" and full, err
    assert _memos(tmp_path) == {}


def test_every_input_of_the_render_sends_the_command_to_the_full_path(
        tmp_path: Path, served: dict[str, bytes]) -> None:
    recipe = _recipe(tmp_path / "r", served)
    assert _build(tmp_path)[0] == 0
    (name,) = _memos(tmp_path)
    assert _build(tmp_path)[2] is False  # served

    # the recipe file: a new cache key (its bytes are in it), so a build
    recipe.write_text(recipe.read_text() + "# edited\n")
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "built" and full, err
    assert _build(tmp_path)[2] is False

    # a patch file: the full path checks it against the recipe's sha256 and refuses
    patch = tmp_path / "r" / "fix.patch"
    patch.write_text(PATCH + "\n")
    rc, err, full = _build(tmp_path)
    assert rc == 3 and "does not match fix.patch" in err, err
    patch.write_text(PATCH)

    # an environment variable: --build-tag's, part of the cache key
    rc, err, full = _build(tmp_path, env=_env(tmp_path, ROCMBUILD_BUILD_TAG="7"))
    assert rc == 0 and _ending(err) == "built" and full, err
    assert "demo_q-1.0+rocm6.2.gfx942-7-py3-none-any.whl" in err

    # the host: a distribution installed on sys.path (the same command line and environment)
    assert _build(tmp_path)[2] is False
    before = _memos(tmp_path)[name]
    meta = tmp_path / "site" / "wheel-99.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: wheel\nVersion: 99.0\n\n")
    rc, err, full = _build(tmp_path)
    assert rc == 0 and full, err
    after = _memos(tmp_path)[name]
    assert after["host"] != before["host"] and after["cache_key"] == before["cache_key"]
    assert _build(tmp_path)[2] is False

    # a recipe of the same name earlier on the recipe path now shadows it: the other recipe
    _recipe(tmp_path / "first", served, version="2.0")
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "built" and "demo_q-2.0+" in err, err
    shutil.rmtree(tmp_path / "first")
    rc, err, full = _build(tmp_path)
    assert rc == 0 and "demo_q-1.0+" in err and full, err  # the memo's recipe file is gone

    # a hit compiles nothing: a compiler cache asked for by name and missing is not looked for
    rc, err, full = _build(tmp_path, env=_env(tmp_path, ROCMBUILD_COMPILE_CACHE="ccache",
                                              PATH=str(tmp_path / "nothing")))
    assert rc == 0 and _ending(err) == "cached" and full, err

    # the cache entry removed: built again
    shutil.rmtree(tmp_path / "c" / "wheels" / str(_memos(tmp_path)[name]["cache_key"]))
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "built", err


@pytest.mark.parametrize("bad", ["garbage", "type", "fifo", "symlink", "huge"])
def test_a_bad_memo_is_a_miss_and_is_written_again(
        tmp_path: Path, served: dict[str, bytes], bad: str) -> None:
    _recipe(tmp_path / "r", served)
    assert _build(tmp_path)[0] == 0
    (name, memo), = _memos(tmp_path).items()
    path = tmp_path / "c" / "memo" / name
    path.unlink()
    if bad == "garbage":
        path.write_bytes(b"\x00{not json")
    elif bad == "type":
        path.write_text(json.dumps({**memo, "level": "1"}))
    elif bad == "fifo":  # a memo naming a FIFO as the recipe: never opened (it would block)
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        path.write_text(json.dumps({**memo, "files": [[str(fifo), "0" * 64]]}))
    elif bad == "symlink":
        other = tmp_path / "elsewhere.json"
        other.write_text(json.dumps(memo))
        path.symlink_to(other)
    else:
        path.write_text(json.dumps(memo) + " " * 70000)
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "cached" and full, err
    assert _memos(tmp_path)[name] == memo and not path.is_symlink()


def test_a_wheel_recorded_as_failed_or_copied_to_broken_is_not_served(
        tmp_path: Path, served: dict[str, bytes]) -> None:
    """broken/ holding the cached bytes means validation failed on them: the full path records
    it and refuses to deliver (exit 8); the memo must not hand the wheel out instead."""
    _recipe(tmp_path / "r", served)
    rc, err, _ = _build(tmp_path)
    assert rc == 0, err
    wheel = next((tmp_path / "w" / "wheels").glob("*.whl"))
    (tmp_path / "w" / "broken").mkdir()
    shutil.copy(wheel, tmp_path / "w" / "broken" / wheel.name)
    for _ in range(2):  # the first records "failed" in the entry, the second reads it there
        rc, err, full = _build(tmp_path)
        assert rc == 8 and "failed validation" in err and full, err
        (tmp_path / "w" / "broken" / wheel.name).unlink(missing_ok=True)


def test_the_memo_serves_as_the_full_path_does_beside_other_bytes_in_broken(
        tmp_path: Path, served: dict[str, bytes]) -> None:
    """Both serve a hit through ``pipeline.deliver.held``: a wheel of the same name in broken/
    whose bytes differ (an older build's that failed) stops neither; the memo serves it."""
    _recipe(tmp_path / "r", served)
    assert _build(tmp_path)[0] == 0
    wheel = next((tmp_path / "w" / "wheels").glob("*.whl"))
    (tmp_path / "w" / "broken").mkdir()
    (tmp_path / "w" / "broken" / wheel.name).write_bytes(b"an older build's wheel")
    rc, err, full = _build(tmp_path)
    assert rc == 0 and _ending(err) == "cached" and not full, err


def test_served_hits_import_little(tmp_path: Path, served: dict[str, bytes]) -> None:
    """What makes the short path short: none of the parser, the TOML parser, the recipe model,
    the plan or the stages is imported when a memo serves the command line."""
    _recipe(tmp_path / "r", served)
    assert _build(tmp_path)[0] == 0
    res = rocmbuild("demo", "--arch", "gfx942", env=_env(tmp_path), cwd=tmp_path)
    names = _imports(res.stderr)
    assert res.returncode == 0 and "rocmbuild.commands.noop_memo" in names, res.stderr
    for heavy in ("argparse", "tomllib", "rocmbuild.recipe.model", "rocmbuild.recipe.tables",
                  "rocmbuild.recipe.keys", "rocmbuild.plan.model",
                  "rocmbuild.pipeline.build", "rocmbuild.commands.parser", "rocmbuild.stages"):
        assert heavy not in names, heavy
