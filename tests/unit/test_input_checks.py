"""The input checks of issue 9 (classes 4 and 6) in-process: arch features, settings from flags,
variables and pyproject.toml, recipe numbers / nesting / BOM, safe extraction, the guard."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from rocmbuild import cli
from rocmbuild.commands import recipes as recipes_cmd
from rocmbuild.core import gfx as arch
from rocmbuild.core import options
from rocmbuild.core.errors import INTERNAL_ERROR_EXIT, FetchError, RecipeError, UsageError
from rocmbuild.recipe import load, search
from rocmbuild.sources.archive import extract

RECIPE = ('schema_version = 1\n[package]\nname = "demo"\n[source]\nsdist = { url = '
          '"https://example.invalid/d.tar.gz", sha256 = "' + "0" * 64 + '" }\n')


@pytest.mark.parametrize("good", ["gfx90a", "gfx90a:xnack+", "gfx942:sramecc-:xnack+",
                                  "GFX942:XNACK-"])
def test_arch_features_accepted(good: str) -> None:
    assert arch.parse_archs(good) == (good.lower(),)


@pytest.mark.parametrize("bad, why", [
    ("gfx90a:foo+", "unknown target feature"), ("gfx90a:xnack", "unknown target feature"),
    ("gfx90a:xnack+:xnack-", "given twice"), ("gfx90a:sramecc+:sramecc+", "given twice"),
    ("gfx942:", "unknown target feature"), ("gfx942::xnack+", "unknown target feature"),
])
def test_arch_features_refused(bad: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        arch.parse_archs(bad)


def test_setting_errors_name_their_origin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                          ) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROCMBUILD_ARCH", "gfx90a:bogus+")
    with pytest.raises(UsageError, match="^ROCMBUILD_ARCH: unknown target feature"):
        options.resolve("arch", None)
    monkeypatch.delenv("ROCMBUILD_ARCH")
    (tmp_path / "pyproject.toml").write_text('[tool.rocmbuild]\narch = "gfx1"\n')
    with pytest.raises(UsageError, match=r"^pyproject.toml: tool.rocmbuild.arch: unknown GPU"):
        options.resolve("arch", None)
    with pytest.raises(UsageError, match="^--rocm-path: .* is not an existing directory"):
        options.resolve("rocm_path", str(tmp_path / "none"))
    monkeypatch.setenv("ROCMBUILD_GPU_VENDOR", "intel")
    with pytest.raises(UsageError, match="^ROCMBUILD_GPU_VENDOR: expected one of amd, nvidia"):
        options.resolve("gpu_vendor", None)
    (tmp_path / "file").write_text("x")
    for value in (tmp_path / "file", tmp_path / "file" / "below"):
        with pytest.raises(UsageError, match="^--workdir: "):
            options.resolve("workdir", str(value))
    assert options.resolve("workdir", str(tmp_path / "new" / "dir")) == str(
        tmp_path / "new" / "dir")  # missing but creatable: fine


@pytest.mark.parametrize("extra, why", [
    ("[build]\nmem_per_job_gb = nan\n", "build.mem_per_job_gb: must be a finite number"),
    ("[build]\ndisk_gb = inf\n", "build.disk_gb: must be a finite number"),
    ("x = " + "[" * 50 + "]" * 50 + "\n", "nested 17 levels deep"),
])
def test_recipe_numbers_and_nesting(tmp_path: Path, extra: str, why: str) -> None:
    f = tmp_path / "r.toml"
    f.write_text(RECIPE + extra)
    with pytest.raises(RecipeError, match=why):
        load.load(f)


def test_recipe_bom_is_accepted_and_directory_named(tmp_path: Path) -> None:
    f = tmp_path / "r.toml"
    f.write_bytes(b"\xef\xbb\xbf" + RECIPE.encode())
    assert load.load(f).name == "demo"
    with pytest.raises(UsageError, match="is a directory"):
        search.find_recipe(str(tmp_path))


def test_recipe_name_wins_over_a_directory_of_that_name(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """`rocmbuild flash-attn` inside a directory holding a flash-attn clone builds the recipe."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flash-attn").mkdir()
    assert search.find_recipe("flash-attn").name == "flash-attn.toml"


@pytest.mark.parametrize("name, kind, link, why", [
    ("/abs/file", tarfile.REGTYPE, "", "an absolute path"),
    ("d/../../x", tarfile.REGTYPE, "", "'..'"),
    ("d/l", tarfile.SYMTYPE, "/etc/passwd", "a link out of the tree"),
    ("d/dev", tarfile.CHRTYPE, "", "a device file"),
])
def test_extract_refuses_unsafe_members(tmp_path: Path, name: str, kind: bytes, link: str,
                                        why: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        tf.addfile(info, io.BytesIO(b""))
    archive = tmp_path / "a.tar"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(FetchError, match=why):
        extract(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar"]  # nothing left behind


def test_extract_truncated_archive(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + b"\0" * 20)
    with pytest.raises(FetchError, match="not a readable tar or zip archive"):
        extract(archive, tmp_path / "out")


def test_guard_saves_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    def boom(args: object) -> int:
        raise ZeroDivisionError("a bug near https://u:s3cret@host/simple/")

    monkeypatch.setattr(recipes_cmd, "run", boom)  # register() reads it when parsing starts
    code = cli.main(["--workdir", str(tmp_path / "ws"), "recipes"])
    err = capsys.readouterr().err
    assert code == INTERNAL_ERROR_EXIT
    assert "internal error, please report" in err and "Traceback" not in err
    saved = list((tmp_path / "ws" / "logs").glob("internal-error-*.txt"))
    text = saved[0].read_text() if len(saved) == 1 else ""
    assert "ZeroDivisionError: a bug near https://***@host/" in text and "s3cret" not in text
    assert str(saved[0]) in err.replace("\n", "")
