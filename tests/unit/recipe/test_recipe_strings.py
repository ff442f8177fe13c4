"""Recipe strings at load: a control character anywhere (every string literal of every recipe in
recipes/, one at a time) and a URL holding a user name or password are refused, naming the file
and key; the secret is never in the message."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from rocmbuild.core import untrusted
from rocmbuild.core.errors import RecipeError
from rocmbuild.recipe.check import userinfo_problem
from rocmbuild.recipe.load import load
from tests.conftest import REPO

_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _literals(text: str) -> list[int]:
    """Offsets of the basic string literals of ``text`` that are values (not in a comment)."""
    return [m.start() for m in _LITERAL.finditer(text)]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "recipes").glob("*.toml")))
def test_an_escape_in_any_string_of_a_recipe_is_refused(name: str, tmp_path: Path) -> None:
    """ESC put at the start of each string in turn (keys, values, list items, env tables,
    variants, releases, patches, downloads): one problem naming the key, whatever it is."""
    original = (REPO / "recipes" / name).read_text(encoding="utf-8")
    parsed = tomllib.loads(original)
    # a copy of the checkout's layout (the recipes it depends on, ../patches, ../probes), so
    # that only the ESC is wrong with it
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    for d in ("patches", "probes"):
        (tmp_path / d).symlink_to(REPO / d)
    copy = tmp_path / "recipes" / name
    tried = 0
    for at in _literals(original):
        text = original[:at + 1] + "\\u001b" + original[at + 1:]
        if tomllib.loads(text) == parsed:
            continue  # the quote was in a comment
        copy.write_text(text, encoding="utf-8")
        tried += 1
        with pytest.raises(RecipeError) as exc:
            load(copy)
        hits = [p for p in exc.value.problems if "control character U+001B" in p]
        line = original.count("\n", 0, at) + 1
        assert hits, f"{name}:{line}: {exc.value.problems}"
        assert all(p.startswith(f"{copy}: ") for p in hits), hits
    assert tried >= 10


def _recipe(tmp_path: Path, extra: str, name: str = '"demo"') -> Path:
    (tmp_path / "tree").mkdir(exist_ok=True)
    (tmp_path / "tree" / "setup.py").write_text("")
    r = tmp_path / "r.toml"
    r.write_text(f'schema_version = 1\n[package]\nname = {name}\nversion = "1.0"\n'
                 f'[source]\npath = "tree"\n{extra}', encoding="utf-8")
    return r


def _problems(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as exc:
        load(path)
    return exc.value.problems


@pytest.mark.parametrize("char", ["\\u0000", "\\t", "\\n", "\\r", "\\u007f", "\\u009b",
                                  "\\u202a", "\\u202e", "\\u2066", "\\u2069"])
def test_each_refused_character_in_a_name(tmp_path: Path, char: str) -> None:
    problems = _problems(_recipe(tmp_path, "", name=f'"demo{char}"'))
    assert len(problems) == 1 and "r.toml: package.name: control character U+" in problems[0]


def test_a_patch_reason_may_span_lines_but_holds_no_escape(tmp_path: Path) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("")
    sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    table = f'[[patches]]\nfile = "fix.patch"\nsha256 = "{sha}"\nreason = """two\nlines\tok"""\n'
    assert load(_recipe(tmp_path, table)).patches[0].reason == "two\nlines\tok"
    problems = _problems(_recipe(tmp_path, table.replace("two", "two\\u001b")))
    assert problems == [problems[0]] and "patches[0].reason: control character U+001B" in \
        problems[0]
    problems = _problems(_recipe(tmp_path, table + 'link = "https://x/\\n"\n'))
    assert "patches[0].link: control character U+000A" in problems[0]


def test_key_names_and_env_values(tmp_path: Path) -> None:
    problems = _problems(_recipe(tmp_path, '[build.env]\n"CC\\u001b" = "x"\nCXX = "a\\u202eb"\n'))
    assert len(problems) == 2, problems
    assert "build.env.CC\x1b: control character U+001B in the key's name" in problems[0]
    assert "build.env.CXX: control character U+202E" in problems[1]
    problems = _problems(_recipe(tmp_path, '[variants."a\\u0007"]\ndescription = "x"\n'))
    assert any("variants.a\x07: control character U+0007 in the key's name" in p
               for p in problems), problems


SECRET = "s3cr3t-token"


@pytest.mark.parametrize("table, key", [
    (f'[[downloads]]\nname = "d"\nurl = "https://user:{SECRET}@example.invalid/d.tgz"\n'
     'env = "D"\n', "downloads[0].url"),
    (f'[source.alternatives.pypi]\nsdist.url = "https://{SECRET}@example.invalid/a.tar.gz"\n'
     f'sdist.sha256 = "{"0" * 64}"\n', "source.alternatives.pypi.sdist.url"),
    (f'[source.alternatives.fork]\ngit = "https://u:{SECRET}@example.invalid/r.git"\n'
     f'commit = "{"0" * 40}"\n', "source.alternatives.fork.git"),
    (f'[source.alternatives.bad]\nsdist.url = "ftp://u:{SECRET}@example.invalid/a"\n'
     f'sdist.sha256 = "{"0" * 64}"\n', "source.alternatives.bad.sdist.url"),
])
def test_a_url_with_credentials_is_refused_without_them(tmp_path: Path, table: str,
                                                        key: str) -> None:
    problems = _problems(_recipe(tmp_path, table))
    assert len(problems) == 1, problems
    assert f"r.toml: {key}: " in problems[0] and "~/.netrc" in problems[0]
    assert SECRET not in problems[0] and "***@example.invalid" in problems[0]


@pytest.mark.parametrize("table, key", [
    (f'[build]\npip_args = ["--index-url=https://u:{SECRET}@example.invalid/simple"]\n',
     "build.pip_args[0]"),
    (f'[build]\npip_args = ["-v", "--extra-index-url", "https://{SECRET}@example.invalid/s"]\n',
     "build.pip_args[2]"),
    (f'[build]\npip_args = ["--index-url https://u:{SECRET}@example.invalid/simple"]\n',
     "build.pip_args[0]"),
    (f'[build]\ncmake_args = ["-DDEPS=https://a.invalid/x;https://u:{SECRET}@example.invalid/y"]'
     '\n', "build.cmake_args[0]"),
    (f'[build]\nbuild_requires = ["demo @ https://u:{SECRET}@example.invalid/d.whl"]\n',
     "build.build_requires[0]"),
    (f'[build.env]\nPIP_INDEX_URL = "https://u:{SECRET}@example.invalid/simple"\n',
     "build.env.PIP_INDEX_URL"),
    (f'[variants.lite]\nenv = {{ PIP_EXTRA_INDEX_URL = "https://{SECRET}@example.invalid/s" }}\n',
     "variants.lite.env.PIP_EXTRA_INDEX_URL"),
    (f'[[downloads]]\nname = "d"\nurl = "https://a.invalid/r?to=https://u:{SECRET}@example.invalid/"'
     '\nenv = "D"\n', "downloads[0].url"),
])
def test_credentials_in_any_recipe_string_are_refused_without_them(tmp_path: Path, table: str,
                                                                  key: str) -> None:
    """pip and cmake arguments, requirements, env values (PIP_INDEX_URL), a URL inside a URL:
    a URL with a user name or password anywhere in a recipe string is the same one problem as
    in a URL key, and the secret is in no problem."""
    problems = _problems(_recipe(tmp_path, table))
    assert len(problems) == 1, problems
    assert f"r.toml: {key}: " in problems[0] and "~/.netrc" in problems[0]
    assert SECRET not in problems[0] and "***@example.invalid" in problems[0]


def test_pip_args_without_credentials_load(tmp_path: Path) -> None:
    table = ('[build]\npip_args = ["--index-url=https://example.invalid/simple", '
             '"--extra-index-url", "https://example.invalid/s", "ssh://git@example.invalid/r"]\n')
    assert load(_recipe(tmp_path, table)).pip_args[1] == "--extra-index-url"


@pytest.mark.parametrize("url, refused", [
    ("https://host/x.tar.gz", False),
    ("https://host/x@y.tar.gz", False),   # an @ in the path is no userinfo
    ("https://host/x?u=a@b", False),
    ("file:///tmp/x.tgz", False),
    ("ssh://git@github.com/ROCm/x.git", False),  # an ssh login name, no secret
    ("git@github.com:ROCm/x.git", False),  # scp-like: not a URL
    ("../local/repo", False),
    ("https://user:Zq9@host/x", True),
    ("https://Zq9@host/x", True),
    ("HTTP://u:Zq9@host/x", True),
    ("ssh://git:Zq9@github.com/x.git", True),
    ("https://Zq9@Zq9@host/x", True),  # an @ in the password
    ("http://u:Zq9@[::1/x", True),  # not even a valid URL: still refused, never parsed
    ("--index-url=https://u:Zq9@host/simple", True),  # a URL inside an argument
    ("-i https://Zq9@host/simple", True),
    ("https://host/r?next=https://u:Zq9@other/x", True),  # a URL inside a URL
    ("--index-url=https://host/simple", False),
    ("ssh://git@host/a.git git+ssh://git@host/b.git", False),
    ("user@host.example", False),  # an address, no URL
])
def test_userinfo_problem(url: str, refused: bool) -> None:
    problem = userinfo_problem(url)
    assert (problem is not None) == refused
    if problem:
        assert "Zq9" not in problem and "://***@" in problem
        assert problem.count("://") == 1  # only the URL that holds them, never the next one


def test_controls_names_each_key() -> None:
    data = {"a": "x\x1b", "b": ["ok", "\u2067"], "c\x9b": 1, "d": {"e": "a\tb"}}
    assert untrusted.controls(data, "") == [
        ("a", "control character U+001B"), ("b[1]", "control character U+2067"),
        ("c\x9b", "control character U+009B in the key's name"),
        ("d.e", "control character U+0009")]
    assert untrusted.controls("a\tb\nc", "r", lines=True) == []
    assert untrusted.controls("a\r\nb", "r", lines=True) == [("r", "control character U+000D")]
    assert untrusted.controls({"é": "ünïcode ✓ — fine"}, "") == []
