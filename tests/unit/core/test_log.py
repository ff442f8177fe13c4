"""log.py without rich on a cache hit: its escape() is rich.markup.escape's rule, and a line it
writes straight to stderr is the bytes a rich Console would have written."""

from __future__ import annotations

import io
import itertools
import random

import pytest
from rich.console import Console
from rich.markup import escape as rich_escape

from rocmbuild.core import log

LINES = [
    "cache hit /tmp/x/cache/wheels/d4c8: sha256 verified; validation: not validated",
    "build/wheels/flash_attn-2.8.3.post1+rocm6.2.gfx942-py3-none-any.whl  sha256=cbb6  0.07s  "
    "cached",
    "", "  trailing  ", "a\\b\\", "x: y:z", "100%", "~/{}|`^_$#@!\"'()*+,-./;<=>?",
    # these go through rich (markup, emoji codes, control characters, non-ASCII)
    "[bold]x[/bold]", "\\[x]", ":smile: here", "a:+1:b", "tab\there", "cr\rlf", "é", "bell\a",
]


def rich_bytes(text: str, markup: bool) -> str:
    buf = io.StringIO()
    Console(file=buf, highlight=False, soft_wrap=True).print(text, markup=markup,
                                                             highlight=False)
    return buf.getvalue()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log, "_consoles", {})
    monkeypatch.setattr(log, "_level", 1)


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize("text", LINES)
def test_info_and_plain_write_what_rich_writes(text: str, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    log.info(text)
    assert capsys.readouterr().err == rich_bytes(log.printable(text), markup=True)
    log.plain(text)
    assert capsys.readouterr().err == rich_bytes(log.printable(text), markup=False)


@pytest.mark.usefixtures("fresh")
def test_a_hit_creates_no_console(capsys: pytest.CaptureFixture[str]) -> None:
    log.info(LINES[0])
    log.plain(LINES[1])
    assert log._consoles == {}
    assert capsys.readouterr().err == LINES[0] + "\n" + LINES[1] + "\n"


@pytest.mark.usefixtures("fresh")
def test_once_a_console_exists_every_line_goes_through_it() -> None:
    """A live progress display is drawn on log.console: lines must pass through it then."""
    buf = io.StringIO()
    log._consoles["console"] = Console(file=buf, highlight=False, soft_wrap=True)
    log.info("through rich")
    log.plain("and this")
    assert buf.getvalue() == "through rich\nand this\n"
    assert log.console is log._consoles["console"]


def test_consoles_are_made_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log, "_consoles", {})
    assert log.console.stderr and not log.out.stderr
    assert log.console is log.console
    with pytest.raises(AttributeError):
        log.nothing  # noqa: B018


def test_escape_is_richs_rule() -> None:
    fixed = ["[bold]", "\\[bold]", "\\\\[x]", "a\\", "a\\\\", "[1]", "[#fff]", "[/]", "[@click]",
             "[x][y]", "[[x]]", "[x", "x]", "", "\\", "[a b c]", "[A]", "C:\\path\\"]
    rng = random.Random(13)
    alphabet = "ab#/@A1[]\\ "
    rand = ["".join(rng.choice(alphabet) for _ in range(n))
            for n in itertools.chain.from_iterable(itertools.repeat(range(1, 10), 500))]
    for text in fixed + rand:
        assert log.escape(text) == rich_escape(text), text


@pytest.mark.parametrize(("text", "shown"), [
    ("plain text, tab\tand\nnewline", "plain text, tab\tand\nnewline"),
    ("red \x1b[31mRED\x1b[0m", "red \\x1b[31mRED\\x1b[0m"),
    ("title \x1b]0;owned\x07", "title \\x1b]0;owned\\x07"),
    ("over\rwrite\b", "over\\rwrite\\x08"),
    ("c1 \x9b2J del\x7f", "c1 \\x9b2J del\\x7f"),
    ("bidi \u202egnp.exe", "bidi \\u202egnp.exe"),
    ("é ü 日本", "é ü 日本"),
])
def test_printable(text: str, shown: str) -> None:
    """Control characters (but tab and newline) and bidirectional overrides are written as
    Python literals would write them: seen, not obeyed by the terminal."""
    assert log.printable(text) == shown


@pytest.mark.usefixtures("fresh")
def test_escapes_never_reach_the_terminal_but_our_colours_do() -> None:
    """A forced-terminal console (colours on) prints our markup as escape sequences and the
    text's own ESC as the four characters \\x1b."""
    buf = io.StringIO()
    log._consoles["console"] = log.new_console(file=buf, force_terminal=True)
    log.warn("from a file: \x1b[2J\x1b]0;title\x07")
    got = buf.getvalue()
    assert got.count("\x1b") == 2  # [yellow] on and off: ours
    assert "\\x1b[2J\\x1b]0;title\\x07" in got


@pytest.mark.parametrize(("text", "shown"), [
    ("https://user:pass@host/x", "https://***@host/x"),
    # a password holding @ (the first @ is not the end of the credentials)
    ("https://user:p@ss@host/x", "https://***@host/x"),
    ("pip: git+https://a:b%40c@h.example/r.git and https://t0k@@h2/y",
     "pip: git+https://***@h.example/r.git and https://***@h2/y"),
    ("https://host/path/file@1.0.tar.gz", "https://host/path/file@1.0.tar.gz"),
    ("no url here: a@b", "no url here: a@b"),
])
def test_redact_hides_the_whole_userinfo(text: str, shown: str) -> None:
    from rocmbuild.core.log import redact
    assert redact(text) == shown


@pytest.mark.parametrize(("text", "shown"), [
    # a value cut short before its @ (a message shows 40 characters of it)
    ("got ['https://user:hunter2hunter2hunter2...", "got ['https://***"),
    ("'https://user:hunter2'", "'https://***'"),
    ('"https://u:p\'q@h/x"', '"https://***@h/x"'),
    # ports and IPv6 hosts are no credentials
    ("https://host:8080/x", "https://host:8080/x"),
    ("http://[::1]:3141/simple", "http://[::1]:3141/simple"),
])
def test_redact_hides_cut_and_quoted_credentials(text: str, shown: str) -> None:
    from rocmbuild.core.log import redact
    assert redact(text) == shown


def test_strict_redact_strips_userinfo() -> None:
    """A value that may be a URL or a location (an --index, a config's URL): publish's and the
    nightly's redaction, formerly publish.target.redact."""
    from rocmbuild.core.log import redact

    def strict(text: str) -> str:
        return redact(text, strict=True)

    assert strict("https://bob:pw@host:8443/x/?a=1") == "https://***@host:8443/x/?a=1"
    assert strict("http://host/simple/") == "http://host/simple/"
    for raw, shown in [
        ("HTTP://u:pw@h/", "HTTP://***@h/"),
        ("https:/u:pw@h/", "***@h/"),
        ("//u:pw@h/", "//***@h/"),
        ("u:pw@host:/srv", "***@host:/srv"),
        ("https://u:p/w@h/", "https://***@h/"),
        ("https://u:p@w@h/", "https://***@h/"),
        ("file:///tmp/u%3Apw%40h", "file://***@h"),
        ("pw@", "***@"),
        ("@h", "***@h"),
        ("/srv/wheels", "/srv/wheels"),
    ]:
        assert strict(raw) == shown, raw


def test_one_redactor_for_both_kinds() -> None:
    """Messages keep an @ outside a URL's userinfo; a strict value loses all it may hide, and
    gets the message rules besides (a value cut short before its @)."""
    from rocmbuild.core.log import redact

    message = "fetch https://u:pw@h/x.tar.gz, then file@1.0.tar.gz from a@b"
    assert redact(message) == "fetch https://***@h/x.tar.gz, then file@1.0.tar.gz from a@b"
    assert redact(message, strict=True) == "***@b"
    assert redact("u:pw@host:/srv") == "u:pw@host:/srv"
    assert redact("u:pw@host:/srv", strict=True) == "***@host:/srv"
    assert redact("https://user:hunter2hunt...", strict=True) == "https://***"
    assert redact("https://h/a\x1bb", strict=True) == "https://h/a?b"


def test_every_printed_line_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """The one output path redacts, whatever a message echoes (a key, a table name, a value of
    the wrong type): log.printable, both the rich console and the plain fast path."""
    assert log.printable("[releases.\"https://u:pw@h\"]") == "[releases.\"https://***@h\"]"
    log.plain("k: https://u:pw@h/x")
    assert "pw" not in capsys.readouterr().err
