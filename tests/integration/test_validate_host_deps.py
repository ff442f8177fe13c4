"""validate separates the host from the wheel: a wheel that imports a module the validation venv
lacks (a runtime dependency it does not declare, like flash-attn's Triton variant on a host without
triton) is a host problem (exit 10, the wheel stays where it is); ``validate --with`` and a
recipe's ``[validate] requires`` (recorded as ``validate_requires`` in rocmbuild.json) install it.

Real wheels built here by pip, a real venv, a real local find-links directory (PIP_FIND_LINKS,
PIP_NO_INDEX: pip's own configuration); no network."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from rocmbuild.core.run import run
from tests.conftest import rocmbuild


def _wheel(root: Path, out: Path, pkg: str, init: str, provenance: dict | None = None) -> Path:
    src = root / f"src-{pkg}"
    (src / pkg).mkdir(parents=True)
    (src / pkg / "__init__.py").write_text(init)
    (src / "setup.py").write_text(
        f"from setuptools import setup\nsetup(name={pkg!r}, version='1.0', packages=[{pkg!r}])\n")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", out, src], timeout=300)
    whl = next(out.glob(f"{pkg}-1.0-*.whl"))
    if provenance is not None:
        with zipfile.ZipFile(whl, "a") as z:
            z.writestr(f"{pkg}-1.0.dist-info/rocmbuild.json", json.dumps(provenance))
    return whl


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostdeps")
    links, mine = root / "links", root / "mine"
    links.mkdir()
    mine.mkdir()
    _wheel(root, links, "rbhostdep", "VALUE = 7\n")  # the dependency, in find-links only
    needs = _wheel(root, mine, "rbneedsdep", "import rbhostdep\nX = rbhostdep.VALUE\n")
    recorded = _wheel(root, mine, "rbrecorded", "import rbhostdep\n",
                      {"validate_requires": ["rbhostdep"], "archs": []})
    return {"root": root, "links": links, "needs": needs, "recorded": recorded}


def _env(w: dict[str, Path]) -> dict[str, str]:
    return {"PIP_FIND_LINKS": str(w["links"]), "PIP_NO_INDEX": "1"}


def _validate(w: dict[str, Path], tmp: Path, *args: str):
    return rocmbuild("--workdir", str(tmp / "work"), "validate", "--no-kernels", *args,
                     env=_env(w))


def test_missing_runtime_module_is_the_hosts_problem(wheels: dict[str, Path],
                                                      tmp_path: Path) -> None:
    res = _validate(wheels, tmp_path, str(wheels["needs"]))
    assert res.returncode == 10, res.stderr
    errs = [ln for ln in res.stderr.splitlines() if ln.startswith("toolchain error:")]
    assert len(errs) == 1 and "'rbhostdep'" in errs[0], res.stderr
    assert "--with rbhostdep" in res.stderr and "Traceback" not in res.stderr
    assert wheels["needs"].is_file()  # not copied to broken/
    assert not (tmp_path / "work" / "broken").exists()
    assert not list((tmp_path / "work").glob("validate-*"))  # no venv left behind


def test_with_installs_the_dependency(wheels: dict[str, Path], tmp_path: Path) -> None:
    res = _validate(wheels, tmp_path, str(wheels["needs"]), "--with", "rbhostdep")
    assert res.returncode == 0, res.stderr


def test_recorded_validate_requires_are_installed(wheels: dict[str, Path],
                                                  tmp_path: Path) -> None:
    res = _validate(wheels, tmp_path, str(wheels["recorded"]))
    assert res.returncode == 0, res.stderr


def test_with_a_package_nobody_has_is_exit_10(wheels: dict[str, Path], tmp_path: Path) -> None:
    res = _validate(wheels, tmp_path, str(wheels["needs"]), "--with", "rb-no-such-package")
    assert res.returncode == 10, res.stderr
    assert "validate --with: cannot install rb-no-such-package" in res.stderr, res.stderr
    assert wheels["needs"].is_file()
    assert not list((tmp_path / "work").glob("validate-*"))


@pytest.mark.parametrize("req", ["rb hostdep", "--index-url=http://x/", "rbhostdep>=", ""])
def test_bad_with_is_a_usage_error(wheels: dict[str, Path], tmp_path: Path, req: str) -> None:
    res = _validate(wheels, tmp_path, str(wheels["needs"]), f"--with={req}")
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("usage error: --with:"), res.stderr
    assert "hint:" in res.stderr and "Traceback" not in res.stderr


def test_missing_triton_says_it_needs_triton_and_a_gpu(tmp_path: Path) -> None:
    """The quickstart's validate step on a CPU-only host: a wheel whose import needs triton
    (like the flash-attn Triton variant) stops with exit 10 and one line naming triton; the hint
    says a Triton-kernel wheel needs triton and a GPU and how to check the rest here."""
    out = tmp_path / "out"
    out.mkdir()
    whl = _wheel(tmp_path, out, "rbtritonkern", "import triton\n")
    res = rocmbuild("--workdir", str(tmp_path / "work"), "validate", str(whl),
                    env={"PIP_NO_INDEX": "1"})
    if res.returncode == 0:
        pytest.skip("this host has triton")
    assert res.returncode == 10, res.stderr
    errs = [ln for ln in res.stderr.splitlines() if ln.startswith("toolchain error:")]
    assert len(errs) == 1 and "needs the module 'triton'" in errs[0], res.stderr
    (hint,) = [ln for ln in res.stderr.splitlines() if ln.startswith("hint:")]
    assert "needs triton and a GPU" in hint and "--with triton" in hint, hint
    assert not (tmp_path / "work" / "broken").exists() and whl.is_file()


def test_json_file_is_written_when_the_host_stops_validation(wheels: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """issue 24: a --json-file run that stops at a host problem (exit 10) still writes the
    file, with the error in it, so a CI step that reads it sees why; so does an early exit on
    a bad flag (exit 2) and on a missing baseline, before the venv."""
    report = tmp_path / "out/report.json"
    res = _validate(wheels, tmp_path, str(wheels["needs"]), "--json-file", str(report))
    assert res.returncode == 10, res.stderr
    data = json.loads(report.read_text())
    assert data["status"] == "error" and data["wheels"] == [wheels["needs"].name]
    assert data["error"]["kind"] == "toolchain error" and data["error"]["exit_code"] == 10
    assert "'rbhostdep'" in data["error"]["message"] and "--with" in data["error"]["hint"]
    assert data["failures"] == [f"toolchain error: {data['error']['message']}"]
    early = tmp_path / "early.json"
    res = _validate(wheels, tmp_path, str(wheels["needs"]), "--with", "x @ https://u:pw@h/x.whl",
                    "--upstream-time", "0", "--json-file", str(early))
    assert res.returncode == 2, res.stderr
    blob = early.read_text()
    assert json.loads(blob)["error"]["exit_code"] == 2 and "pw@" not in blob
    res = _validate(wheels, tmp_path, str(wheels["needs"]), "--baseline",
                    str(tmp_path / "no-such-baseline.json"), "--json-file", str(early))
    assert res.returncode not in (0, 10, 70), res.stderr
    assert json.loads(early.read_text())["error"]["exit_code"] == res.returncode
