"""The cache through the real CLI and real builds (a small local setuptools project built with
`pip wheel`): a hit proves its bytes, a crafted entry never brings a host file into the wheel
dir, editing a delivered wheel leaves the cache intact, and a wheel recorded as failed
validation is not handed back as `cached` (nor publishable). Nothing is faked."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tests.conftest import rocmbuild
from tests.integration.conftest import tmpfs

SETUP = 'from setuptools import setup\nsetup(name="cache-demo", version="1.0", packages=["demo"])\n'
WHEEL = "cache_demo-1.0+rocm6.2.gfx942-py3-none-any.whl"


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "src" / "demo").mkdir(parents=True)
    (tmp_path / "src" / "demo" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "src" / "setup.py").write_text(SETUP)
    recipe = tmp_path / "demo.toml"
    recipe.write_text(f"""schema_version = 1
[package]
name = "cache-demo"
[source]
path = "{tmp_path / 'src'}"
[arch]
supported = ["gfx90a", "gfx942"]
[build]
mem_per_job_gb = 1
python_requires = ["setuptools", "wheel"]
""")
    return recipe, {"ROCMBUILD_WORKDIR": str(tmp_path / "build"),
                    "ROCMBUILD_RETRY_BACKOFF": "0"}


def _build(recipe: Path, env: dict[str, str], *extra: str) -> tuple[int, str, str]:
    """(exit code, the summary's last word or the error line, stderr)."""
    res = rocmbuild("build", str(recipe), "--arch", "gfx942", *extra, env=env)
    assert "Traceback" not in res.stderr, res.stderr
    last = res.stderr.rstrip().splitlines()[-1] if res.stderr.strip() else ""
    return res.returncode, last, res.stderr


def _entry(tmp_path: Path) -> Path:
    (entry,) = (tmp_path / "build" / "cache" / "wheels").iterdir()
    return entry


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_hit_verifies_bytes_copies_and_rebuilds_bad_entries(tmp_path: Path) -> None:
    recipe, env = _project(tmp_path)
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("built"), err
    delivered = tmp_path / "build" / "wheels" / WHEEL
    good = _sha(delivered)
    cached = _entry(tmp_path) / WHEEL
    assert os.stat(delivered).st_ino != os.stat(cached).st_ino  # a copy, not a hard link

    # 1. edit the delivered wheel in place: the cache keeps the good bytes, the hit restores them
    with open(delivered, "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xff")
    assert _sha(cached) == good
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("cached") and f"sha256={good}" in last, err
    assert _sha(delivered) == good

    # 2. a same-size corruption of the cached wheel: reported, discarded, rebuilt
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0x01
    cached.write_bytes(bytes(data))
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("built"), err
    warnings = [x for x in err.splitlines() if x.startswith("warning: cache entry ")]
    assert len(warnings) == 1 and "sha256" in warnings[0], err
    assert _sha(delivered) == _sha(_entry(tmp_path) / WHEEL)


def test_a_stamped_hit_reads_no_byte_until_delivery_which_catches_what_the_stat_missed(
        tmp_path: Path) -> None:
    """The verified stamp: the second hit's lookup trusts the wheel's unchanged stat (a
    `nightly` SKIP needs no more), delivery hashes what it copies. Corruption the stat cannot
    show (the bytes change, the stamp is made to match the new stat: what bit rot below the
    file system leaves) is a stamp hit at lookup and still never delivered: reported, the entry
    discarded, rebuilt."""
    from rocmbuild.cache import stamp

    recipe, env = _project(tmp_path)
    assert _build(recipe, env)[0] == 0
    time.sleep(stamp.RACY_NS / 1e9 + 0.1)  # past the racy window of the store's rename
    (tmp_path / "build" / "wheels" / WHEEL).unlink()  # the hit copies it again
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("cached"), err
    cached = _entry(tmp_path) / WHEEL
    first = stamp.read(cached.parent)
    assert first is not None and first.sha256 == _sha(cached)  # the hit's full hash stamped it
    st = cached.stat()
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0x01
    with open(cached, "r+b") as f:
        f.write(bytes(data))
    os.utime(cached, ns=(st.st_atime_ns, st.st_mtime_ns))
    stamp.write(cached.parent, stamp.of(cached.stat(), first.sha256, stamp.now() + stamp.RACY_NS))
    (tmp_path / "build" / "wheels" / WHEEL).unlink()
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("built"), err
    warnings = [x for x in err.splitlines() if x.startswith("warning: cache entry ")]
    assert len(warnings) == 1 and "not delivered, the entry is discarded; rebuilding" \
        in warnings[0], err
    delivered = tmp_path / "build" / "wheels" / WHEEL
    assert _sha(delivered) == first.sha256 == _sha(_entry(tmp_path) / WHEEL)


def test_crafted_entry_cannot_bring_a_host_file_into_the_wheel_dir(tmp_path: Path) -> None:
    """Today's bug: entry.json's "wheel" was joined to the entry dir unchecked and hard-linked
    into the wheel dir; with the host file's real size and sha256 every check passed."""
    recipe, env = _project(tmp_path)
    assert _build(recipe, env)[0] == 0
    secret = tmp_path / "host" / "secret.whl"
    secret.parent.mkdir()
    secret.write_bytes(b"host secret that must stay where it is\n")
    entry = _entry(tmp_path)
    meta = json.loads((entry / "entry.json").read_text())
    for name in (str(secret), os.path.relpath(secret, entry)):
        meta.update(wheel=name, size=secret.stat().st_size, sha256=_sha(secret))
        (entry / "entry.json").write_text(json.dumps(meta))
        code, last, err = _build(recipe, env)
        assert code == 0 and last.endswith("built"), err
        assert "warning: cache entry " in err and "discarding it and rebuilding" in err, err
        for p in (tmp_path / "build").rglob("*"):
            if p.is_file():
                assert b"host secret" not in p.read_bytes(), p
                assert os.stat(p).st_ino != os.stat(secret).st_ino, p
        entry = _entry(tmp_path)
        meta = json.loads((entry / "entry.json").read_text())


def _record_failed(tmp_path: Path, report: str) -> None:
    entry = _entry(tmp_path)
    meta = json.loads((entry / "entry.json").read_text())
    meta["validation"] = {"status": "failed", "report": report, "at": 1.0}
    (entry / "entry.json").write_text(json.dumps(meta))


def test_failed_validation_record_is_not_handed_back(tmp_path: Path) -> None:
    recipe, env = _project(tmp_path)
    assert _build(recipe, env)[0] == 0
    delivered = tmp_path / "build" / "wheels" / WHEEL
    good = _sha(delivered)
    elsewhere = tmp_path / "elsewhere" / WHEEL  # a copy the user kept
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(delivered.read_bytes())
    delivered.unlink()
    report = str(tmp_path / "build" / "reports" / "cache-demo-x.md")
    _record_failed(tmp_path, report)

    code, last, err = _build(recipe, env)
    assert code == 8, err
    (line,) = [x for x in err.splitlines() if x.startswith("validation error: ")]
    assert WHEEL in line and report in line and "failed validation" in line, err
    assert "hint: " in err and "--validate" in err
    assert not delivered.exists()  # not handed back
    broken = tmp_path / "build" / "broken" / WHEEL
    assert _sha(broken) == good  # kept where publish looks for failed wheels
    # publish refuses the same bytes from anywhere, as for any wheel in broken/
    pub = rocmbuild("publish", str(elsewhere), env=env)
    assert pub.returncode == 9 and "failed validation" in pub.stderr, pub.stderr
    assert not list((tmp_path / "build").glob("index/**/*.whl"))


def test_wheel_moved_to_broken_after_delivery_is_recorded_failed(tmp_path: Path) -> None:
    """A standalone `rocmbuild validate` that fails moves the delivered wheel to broken/; the
    next build finds the same bytes there, records the entry as failed and says so."""
    recipe, env = _project(tmp_path)
    assert _build(recipe, env)[0] == 0
    delivered = tmp_path / "build" / "wheels" / WHEEL
    (tmp_path / "build" / "broken").mkdir()
    os.replace(delivered, tmp_path / "build" / "broken" / WHEEL)
    code, _, err = _build(recipe, env)
    assert code == 8 and "the cached wheel failed validation" in err, err
    meta = json.loads((_entry(tmp_path) / "entry.json").read_text())
    assert meta["validation"]["status"] == "failed"
    assert not delivered.exists()
    # --force rebuilds it (same inputs, same bytes: the build is reproducible here or not; the
    # new entry is recorded "not validated" and delivered)
    code, last, err = _build(recipe, env, "--force")
    assert code == 0 and last.endswith("built"), err
    meta = json.loads((_entry(tmp_path) / "entry.json").read_text())
    assert meta["validation"]["status"] == "not validated"


def test_standalone_validate_keeps_the_file_and_records_the_failure(tmp_path: Path) -> None:
    """`rocmbuild validate <delivered wheel>` that fails (real venv, real pip, the import raises)
    leaves the file where it is with the same bytes and mtime, copies it to broken/, records
    the cache entry as failed (the wheel's rocmbuild.json names the key); the next build exits 8
    instead of handing it back, and publish refuses the file."""
    recipe, env = _project(tmp_path)
    (tmp_path / "src" / "demo" / "__init__.py").write_text(
        'raise ImportError("demo needs libfoo.so.1")\n')
    assert _build(recipe, env)[0] == 0
    delivered = tmp_path / "build" / "wheels" / WHEEL
    before = (delivered.stat().st_mtime_ns, _sha(delivered))
    res = rocmbuild("validate", str(delivered), "--no-kernels", "--json", env=env)
    assert res.returncode == 8 and "libfoo.so.1" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert json.loads(res.stdout)["status"] == "failed"  # stdout: the JSON alone
    steps = [ln for ln in res.stderr.splitlines() if ln.startswith("- ")]  # each step as it starts
    assert [x.split(" (")[0].split(" with ")[0] for x in steps] == [
        "- creating the validation venv", f"- installing {WHEEL}", "- importing demo in the venv",
        "- auditing " + WHEEL + " for gfx942"], steps
    assert (delivered.stat().st_mtime_ns, _sha(delivered)) == before
    assert _sha(tmp_path / "build" / "broken" / WHEEL) == before[1]
    meta = json.loads((_entry(tmp_path) / "entry.json").read_text())
    assert meta["validation"]["status"] == "failed"
    code, _, err = _build(recipe, env)
    assert code == 8 and "the cached wheel failed validation" in err, err
    pub = rocmbuild("publish", str(delivered), env=env)
    assert pub.returncode == 9 and "failed validation" in pub.stderr, pub.stderr
    # `build --validate` re-validates the hit: it fails again and is not handed back
    code, _, err = _build(recipe, env, "--validate")
    assert code == 8 and "libfoo.so.1" in err, err
    assert not delivered.exists()


def test_build_validate_records_the_outcome(tmp_path: Path) -> None:
    """Real `build --validate` (isolated venv, import of the wheel): a wheel whose import fails
    is kept in the cache recorded as failed; `build` then exits 8 naming the report and does not
    deliver it; a good wheel is recorded as passed and its hit says so."""
    recipe, env = _project(tmp_path)
    (tmp_path / "src" / "demo" / "__init__.py").write_text(
        'raise ImportError("demo needs libfoo.so.1")\n')
    code, _, err = _build(recipe, env, "--validate")
    assert code == 8 and "libfoo.so.1" in err, err
    meta = json.loads((_entry(tmp_path) / "entry.json").read_text())
    assert meta["validation"]["status"] == "failed"
    report = meta["validation"]["report"]
    assert report.endswith(".md") and Path(report).is_file()
    code, _, err = _build(recipe, env)
    assert code == 8 and report in err and "failed validation" in err, err
    assert not (tmp_path / "build" / "wheels" / WHEEL).exists()

    (tmp_path / "src" / "demo" / "__init__.py").write_text("VALUE = 1\n")  # fixed: a new key
    code, last, err = _build(recipe, env, "--validate")
    assert code == 0 and last.endswith("built"), err
    code, last, err = _build(recipe, env)
    assert code == 0 and last.endswith("cached") and "validation: passed" in err, err


def _no_partial(root: Path) -> None:
    left = [p for p in root.rglob("*") if p.name.startswith(".tmp-") or p.suffix == ".whl"
            or p.name == "entry.json"]
    assert not left, left


def test_full_disk_is_a_cache_error_and_leaves_no_partial_entry(tmp_path: Path) -> None:
    """The cache dir, then the wheel dir, on a tmpfs too small for the wheel (64 KiB of random
    bytes in it): exit 11 naming the path, no partial entry or wheel, no traceback."""
    recipe, env = _project(tmp_path)
    (tmp_path / "src" / "demo" / "blob.bin").write_bytes(os.urandom(64 * 1024))
    (tmp_path / "src" / "MANIFEST.in").write_text("include demo/blob.bin\n")
    (tmp_path / "src" / "setup.py").write_text(SETUP.replace(
        'packages=["demo"]', 'packages=["demo"], package_data={"demo": ["blob.bin"]}'))
    with tmpfs(tmp_path / "small-cache", "16k") as small:
        code, last, err = _build(recipe, env, "--cache-dir", str(small))
        assert code == 11, err
        (line,) = [x for x in err.splitlines() if x.startswith("cache error: ")]
        assert str(small) in line and "No space left on device" in line, err
        assert "hint: " in err
        _no_partial(small)
        assert not (tmp_path / "build" / "wheels").exists()
    with tmpfs(tmp_path / "small-wheels", "16k") as small:
        code, last, err = _build(recipe, env, "--wheel-dir", str(small))
        assert code == 11, err
        (line,) = [x for x in err.splitlines() if x.startswith("cache error: ")]
        assert str(small) in line and "wheel directory" in line, err
        _no_partial(small)
        # the wheel was stored before delivery failed: with room, the next build is a hit
        code, last, err = _build(recipe, env)
        assert code == 0 and last.endswith("cached"), err
