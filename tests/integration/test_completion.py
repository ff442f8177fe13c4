"""`rocmbuild completion bash|zsh`, for real: the generated script is sourced in a real bash (and
a real zsh through bashcompinit, when zsh is installed), the completion function is called as the
shell calls it on TAB, and the candidates are read back. Recipe names come from a `rocmbuild` on
PATH (a wrapper around this checkout's `python -m rocmbuild`), as they would for a user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, rocmbuild

ZSH = shutil.which("zsh")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    bin_dir = tmp_path_factory.mktemp("bin")
    wrapper = bin_dir / "rocmbuild"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rocmbuild "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("completion")
    paths = {}
    for shell in ("bash", "zsh"):
        res = rocmbuild("completion", shell, check=True)
        assert res.stderr == ""
        paths[shell] = out / f"rocmbuild.{shell}"
        paths[shell].write_text(res.stdout)
    return paths


def complete(shell: str, script: Path, line: list[str], env: dict[str, str],
             cwd: Path = REPO) -> list[str]:
    """Candidates for the last word of `line` (the word under the cursor, maybe '')."""
    words = " ".join(_sh(w) for w in line)
    if shell == "bash":
        code = (f"source {_sh(str(script))}; COMP_WORDS=({words}); COMP_CWORD={len(line) - 1}; "
                "_rocmbuild; printf '%s\\n' \"${COMPREPLY[@]}\"")
        argv = ["bash", "--norc", "--noprofile", "-c", code]
    else:
        # As zsh's bashcompinit does on TAB: `compgen -F` runs the function (in sh emulation,
        # arrays from 0), then zsh keeps the candidates that start with the word (compadd).
        code = (f"autoload -U compinit && compinit -u; source {_sh(str(script))}; "
                f"COMP_WORDS=({words}); COMP_CWORD={len(line) - 1}; cur={_sh(line[-1])}; "
                'matches=(${(f)"$(compgen -F _rocmbuild -- $cur)"}); '
                "print -rl -- ${(M)matches:#${cur}*}")
        argv = ["zsh", "-f", "-c", code]
    res = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [w for w in res.stdout.splitlines() if w]


def _sh(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


SHELLS = ["bash", pytest.param("zsh", marks=pytest.mark.skipif(
    ZSH is None, reason="zsh is not installed (scripts/setup.sh installs it)"))]


@pytest.mark.parametrize("shell", SHELLS)
def test_commands_recipes_flags_and_choices(
    shell: str, scripts: dict[str, Path], env: dict[str, str]
) -> None:
    script = scripts[shell]
    assert complete(shell, script, ["rocmbuild", "pu"], env) == ["publish"]
    # the first word is a command or, as a shorthand for build, a recipe
    assert complete(shell, script, ["rocmbuild", "fl"], env) == ["flash-attn"]
    assert complete(shell, script, ["rocmbuild", "plan", "--arch", "gfx942", "hip"], env) == [
        "hip-attention-probe"]
    assert complete(shell, script, ["rocmbuild", "build", "--var"], env) == ["--variant"]
    assert complete(shell, script, ["rocmbuild", "flash-attn", "--gpu-vendor", ""], env) == [
        "amd", "nvidia"]
    assert complete(shell, script, ["rocmbuild", "doctor", "--recipe", "py"], env) == ["pytorch"]
    assert complete(shell, script, ["rocmbuild", "completion", "z"], env) == ["zsh"]


def test_users_recipes_dir_on_the_line_completes(
    scripts: dict[str, Path], env: dict[str, str], tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my-kernels.toml").write_text("")  # names only: the file is not read to complete
    line = ["rocmbuild", "--recipes", str(mine), "build", "my"]
    assert complete("bash", scripts["bash"], line, env) == ["my-kernels"]
    assert complete("bash", scripts["bash"], ["rocmbuild", "build", "my"], env) == []


def test_same_parser_same_script(scripts: dict[str, Path]) -> None:
    assert rocmbuild("completion", "bash", check=True).stdout == scripts["bash"].read_text()
    res = rocmbuild("completion")
    assert res.returncode == 2 and "hint:" in res.stderr and "Traceback" not in res.stderr
