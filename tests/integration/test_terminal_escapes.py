"""Text that came from a file reaches the terminal printable, and a URL's password not at all:
the real CLI (``python -m rocmbuild``) on recipes and a saved host that carry escape sequences
and ``user:password@`` URLs, with colours forced on (FORCE_COLOR, as on a terminal) so that our
own colour codes are there to tell apart from the file's. The corpus (tests/corpus/case_exits.py)
checks the commands that fail; these are ``plan`` with colours on: a recipe holding escapes or
a URL's password is refused at load, naming the key, and a saved host's strings are printed
printable. Nothing is faked: the saved host is the one ``doctor --json`` writes here, edited."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import rocmbuild

ESC = "\x1b"
# what a file tries: clear the screen, set the window title, blink, a C1 CSI, a bidi override
HOSTILE = ("\\u001b[2J", "\\u001b]0;owned\\u0007", "\\u001b[5m", "\\u009b31m", "\\u202e")
OURS = re.compile("\x1b\\[[0-9;]*m")  # rich's SGR colour codes
HEAD = 'schema_version = 1\n[package]\nname = "demo"\n'


def _env(tmp_path: Path) -> dict[str, str]:
    return {"ROCMBUILD_WORKDIR": str(tmp_path / "build"), "FORCE_COLOR": "1"}


def _tree(tmp_path: Path, recipe: str) -> Path:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "setup.py").write_text("raise SystemExit(1)\n")
    path = tmp_path / "r.toml"
    path.write_text(recipe, encoding="utf-8")
    return path


def _only_ours(text: str) -> str:
    """``text`` without our own colour codes: what is left must hold no ESC at all."""
    return OURS.sub("", text)


def test_a_recipe_string_with_escapes_is_refused_and_never_echoed(tmp_path: Path) -> None:
    """Control characters in a recipe string are refused at load (before: shown escaped and
    accepted); the error names the key and the character, keeps our colours, and shows
    nothing of the file's sequences."""
    recipe = _tree(tmp_path, HEAD + f'[source]\npath = "tree{"".join(HOSTILE)}"\n')
    res = rocmbuild("plan", str(recipe), "--arch", "gfx942", env=_env(tmp_path))
    assert res.returncode == 3, res.stderr
    assert OURS.search(res.stderr), "colours forced on: 'recipe error:' is ours, in red"
    assert ESC not in _only_ours(res.stderr), repr(res.stderr)
    assert "\x9b" not in res.stderr and "\u202e" not in res.stderr
    assert "r.toml: source.path: control character U+001B" in _only_ours(res.stderr)


def test_escapes_in_env_names_and_values_are_refused(tmp_path: Path) -> None:
    """``plan`` used to echo them (printable); now the recipe is refused, naming both keys."""
    hostile = "".join(HOSTILE)
    recipe = _tree(tmp_path, HEAD + '[source]\npath = "tree"\n[build]\n'
                   f'env = {{ "A{hostile}" = "v", B = "v{hostile}" }}\n')
    for extra in ((), ("--json",)):
        res = rocmbuild("plan", str(recipe), "--arch", "gfx942", *extra, env=_env(tmp_path))
        assert res.returncode == 3, res.stderr
        assert ESC not in _only_ours(res.stdout + res.stderr), repr(res.stderr)
        assert "\x9b" not in res.stderr and "\u202e" not in res.stderr and not res.stdout
        err = _only_ours(res.stderr)
        assert "r.toml: build.env.A\\x1b[2J" in err and "U+001B in the key's name" in err
        assert "r.toml: build.env.B: control character U+001B" in err


def test_plan_for_a_saved_host_prints_its_strings_printable(tmp_path: Path) -> None:
    env = _env(tmp_path)
    doctor = rocmbuild("doctor", "--json", env={**env, "FORCE_COLOR": ""})
    assert doctor.stdout, doctor.stderr
    host = json.loads(doctor.stdout)["host"]
    host["cpus_source"] = "affinity\x1b[2J"
    host["memory"]["source"] = "MemAvailable\x1b]0;owned\x07"
    if host.get("rocm_root"):
        host["rocm_root"]["where"] = "here\x1b[5m"
    saved = tmp_path / "host.json"
    saved.write_text(json.dumps(host))
    recipe = _tree(tmp_path, HEAD + '[source]\npath = "tree"\n')
    res = rocmbuild("plan", "--host", str(saved), str(recipe), "--arch", "gfx942", env=env)
    assert res.returncode == 0, res.stderr
    assert ESC not in _only_ours(res.stdout + res.stderr), repr(res.stdout)
    assert "affinity\\x1b[2J" in res.stdout and "MemAvailable\\x1b]0;owned\\x07" in res.stdout


def test_a_url_password_is_refused_and_never_shown(tmp_path: Path) -> None:
    """A [[downloads]] url and a git source url with ``user:password@``: refused at load (a
    recipe is committed; credentials go in ~/.netrc), by ``plan`` and ``plan --json``, shown as
    ``***@`` and written nowhere."""
    recipe = _tree(tmp_path, HEAD + '[source]\ngit = "https://alice:gitpw41@git.example/r.git"\n'
                   f'commit = "{"a" * 40}"\n[[downloads]]\nname = "blob"\n'
                   'url = "https://bob:dlpw41@dl.example/blob.tgz"\nenv = "BLOB_PREFIX"\n'
                   f'sha256 = "{"0" * 64}"\n')
    env = _env(tmp_path)
    text = rocmbuild("plan", str(recipe), "--arch", "gfx942", env=env)
    js = rocmbuild("plan", str(recipe), "--arch", "gfx942", "--json", env=env)
    assert text.returncode == js.returncode == 3, text.stderr + js.stderr
    for res in (text, js):
        both = res.stdout + res.stderr
        assert "gitpw41" not in both and "dlpw41" not in both and "alice" not in both, both
        err = _only_ours(res.stderr)
        assert "r.toml: source.git: 'https://***@git.example/r.git' holds a user name" in err
        assert "r.toml: downloads[0].url: 'https://***@dl.example/blob.tgz'" in err
        assert "~/.netrc" in err
    for name in ("gitpw41", "dlpw41"):  # nothing the run wrote holds it either
        for p in (tmp_path / "build").rglob("*") if (tmp_path / "build").exists() else ():
            assert not p.is_file() or name.encode() not in p.read_bytes(), p
