"""Settings: one precedence (flag > environment > [tool.rocmbuild] in ./pyproject.toml > default),
one-line errors for bad values, and every environment variable read through
rocmbuild.core.options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocmbuild.core import config, options
from rocmbuild.core.errors import UsageError

SRC = Path(options.__file__).parent


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for s in options.SETTINGS.values():
        if s.env:
            monkeypatch.delenv(s.env, raising=False)
    return tmp_path


def write_config(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f"[project]\nname = 'x'\n[tool.rocmbuild]\n{body}")


def test_precedence_flag_env_config_default(project: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert options.resolve("arch", None, "native") == "native"
    write_config(project, 'arch = "gfx90a"\njobs = 3\n')
    assert options.resolve("arch", None, "native") == "gfx90a"
    assert options.resolve("jobs", None) == 3
    monkeypatch.setenv("ROCMBUILD_ARCH", "gfx942")
    monkeypatch.setenv("ROCMBUILD_JOBS", "5")
    assert options.resolve("arch", None, "native") == "gfx942"
    assert options.resolve("jobs", None) == 5
    assert options.resolve("arch", "gfx950", "native") == "gfx950"
    assert options.resolve("jobs", 7) == 7


def test_workspace_from_pyproject(project: Path) -> None:
    write_config(project, 'workdir = "out/rocm"\ncache-dir = "/tmp/shared-cache"\n')
    ws = config.workspace()
    assert ws.root == project / "out/rocm" and ws.cache == Path("/tmp/shared-cache")
    assert config.workspace("elsewhere").root == project / "elsewhere"


@pytest.mark.parametrize(("body", "text"), [
    ('jobs = "8"\n', "tool.rocmbuild.jobs: expected an integer >= 1"),
    ("jobs = 0\n", "tool.rocmbuild.jobs: expected an integer >= 1"),
    ("arch = 942\n", "tool.rocmbuild.arch: expected a non-empty string"),
    ('archs = "gfx942"\n', "tool.rocmbuild.archs: unknown key"),
    ("arch = \n", "invalid TOML"),
    # a control character, in a value or a key's name, as in a recipe (the rest of the file is
    # the project's own)
    ('workdir = "out\\u001b[2J"\n', "tool.rocmbuild.workdir: control character U+001B"),
    ('arch = "gfx942"\n"jobs\\u202e" = 2\n',
     "tool.rocmbuild.jobs\u202e: control character U+202E in the key's name"),
])
def test_bad_pyproject_names_file_and_key(project: Path, body: str, text: str) -> None:
    write_config(project, body)
    with pytest.raises(UsageError) as exc:
        options.resolve("arch", None, "native")
    assert str(project / "pyproject.toml") in exc.value.message and text in exc.value.message
    assert exc.value.hint


def test_a_control_character_outside_tool_rocmbuild_is_the_projects_own(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndescription = "a\\u001b[2J"\n[tool.rocmbuild]\narch = "gfx90a"\n')
    assert options.resolve("arch", None, "native") == "gfx90a"


@pytest.mark.parametrize(("var", "value", "setting"), [
    ("ROCMBUILD_JOBS", "many", "jobs"), ("ROCMBUILD_JOBS", "0", "jobs"),
    ("ROCMBUILD_VALIDATE", "maybe", "validate"),
])
def test_bad_environment_values_name_the_variable(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                  var: str, value: str, setting: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(UsageError, match=var):
        options.resolve(setting, None)


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_booleans(project: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ROCMBUILD_VALIDATE", value)
    assert options.resolve("validate", None) is True
    monkeypatch.setenv("ROCMBUILD_VALIDATE", "off")
    assert options.resolve("validate", None) is False


def test_unregistered_variable_is_a_bug() -> None:
    with pytest.raises(KeyError):
        options.env("ROCMBUILD_NOT_A_THING")


def test_no_module_reads_the_environment_itself() -> None:
    """Configuration comes through options.py. Copying os.environ for a child process (core/run.py,
    the build env) is not reading configuration, and is allowed."""
    reads = re.compile(r"os\.environ\.get\((?!\"PATH\")|(?<!del )os\.environ\[\"[^\"]+\"\](?!\s*=)"
                       r"|os\.getenv\(")
    offenders = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py") if p.name != "options.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
    assert offenders == []


def test_every_registered_variable_is_documented() -> None:
    assert all(doc.strip() for doc in options.ENV.values())
    for s in options.SETTINGS.values():
        assert s.env is None or s.env in options.ENV
