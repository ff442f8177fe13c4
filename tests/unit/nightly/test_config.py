"""The nightly's config, the PEP 691 resolution (a real HTTP server on 127.0.0.1, in a thread),
the reasons and the lock, in process."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmbuild.artifacts.wheel import WheelFormatError
from rocmbuild.core import settings
from rocmbuild.core.errors import Busy, FetchError, UsageError
from rocmbuild.nightly import changes, config, lock
from rocmbuild.nightly.model import Cell, Pin

REPO = Path(__file__).resolve().parents[3]
SHA = "ab" * 32


def test_sample_config_loads_and_expands() -> None:
    cfg = config.load(REPO / "nightly.toml")
    ids = [c.id for c in cfg.cells]
    assert ids == ["flash-attn.triton.pypi.gfx942", "flash-attn.ck.default.gfx90a",
                   "flash-attn.ck.default.gfx942", "hip-attention-probe.default.default.gfx90a",
                   "hip-attention-probe.default.default.gfx942"]
    c = cfg.cells[0]
    assert c.follow and c.timeout_s == 7200 and c.variant == "triton" and c.source == "pypi"
    assert cfg.stage == "staging" and cfg.promote_to == "stable" and cfg.history == 30
    assert cfg.max_size == 200 << 30 and cfg.keep_days == 14
    assert cfg.executor.kind == "local" and cfg.notify_url is None
    assert cfg.workdir == REPO / "build" and cfg.pypi == "https://pypi.org/simple/"


def test_executor_table_is_the_slurm_settings(tmp_path: Path) -> None:
    """One place defines [executor]'s keys (slurm.SETTING_KEYS): the config checker takes them
    all and hands them to slurm.settings_from_table; any other key is one unknown-key line."""
    from rocmbuild.nightly.slurm.settings import SETTING_KEYS

    p = tmp_path / "nightly.toml"
    head = '[[matrix]]\nrecipes = ["x"]\narchs = ["gfx942"]\n[publish]\nindex = "i"\n'
    p.write_text(head + '[reports]\ndir = "shared/reports"\n'
                 '[executor]\nkind = "slurm"\npartition = "cpu"\ngpu_partition = "mi300"\n'
                 'account = "proj1"\nsbatch_args = ["--qos=normal"]\ntime = "8h"\n'
                 'shared_dir = "shared"\npoll = "5s"\njob_name = "nightly"\n')
    ex = config.load(p).executor
    assert ex.kind == "slurm" and ex.slurm is not None
    s = ex.slurm
    assert (s.partition, s.gpu_partition, s.account, s.extra_args) == (
        "cpu", "mi300", "proj1", ("--qos=normal",))
    assert (s.max_time_s, s.shared_dir, s.poll_s, s.job_name) == (
        8 * 3600, tmp_path / "shared", 5.0, "nightly")
    assert ex.gpu_partition == "mi300" and ex.time_s == 8 * 3600
    p.write_text(head + '[executor]\nqueue = "x"\n')
    with pytest.raises(UsageError) as exc:
        config.load(p)
    assert exc.value.message == "nightly.toml: executor.queue: unknown key"
    assert all(k in (exc.value.hint or "") for k in ("kind", *SETTING_KEYS))


def test_notify_url_never_in_repr_or_errors(tmp_path: Path) -> None:
    p = tmp_path / "nightly.toml"
    p.write_text('[[matrix]]\nrecipes = ["x"]\narchs = ["gfx942"]\n[publish]\nindex = "i"\n'
                 '[notify]\nurl = "https://hooks.example.com/T0k3nSecret"\n')
    cfg = config.load(p)
    assert cfg.notify_url and "T0k3nSecret" not in repr(cfg)
    p.write_text('[[matrix]]\nrecipes = ["x"]\narchs = ["gfx942"]\n[publish]\nindex = "i"\n'
                 '[notify]\nurl = "ftp://u:T0k3nSecret@h/x"\n')
    with pytest.raises(UsageError) as exc:
        config.load(p)
    assert "T0k3nSecret" not in exc.value.message and "notify.url" in exc.value.message


_HEAD = '[[matrix]]\nrecipes = ["x"]\narchs = ["gfx942"]\n'


def test_every_tables_problems_are_kept_with_their_dotted_keys(tmp_path: Path) -> None:
    """[publish], [reports], [executor].kind and the top-level keys are settings models: one
    read keeps every problem of every table (in the file's table order), each under its dotted
    key with its hint, and the first is the error; a secret in publish.index is in none."""
    p = tmp_path / "nightly.toml"
    p.write_text('workdir = 7\npypi = "ftp://mirror/simple"\n' + _HEAD
                 + '[publish]\nindex = "https://u:T0k3nSecret@h/up"\nstage = ""\n'
                 '[reports]\nhistory = 0\n[executor]\nkind = "k8s"\n')
    r = settings.Reader(p.name)
    with pytest.raises(UsageError) as exc:
        config.load(p, r=r)
    assert r.lines() == [
        "nightly.toml: publish.stage: is empty",
        "nightly.toml: reports.history: '0' is out of range (1 to 10000)",
        "nightly.toml: executor.kind: 'k8s' is not local or slurm",
        "nightly.toml: workdir: expected a string, got 7 (an integer)",
        "nightly.toml: pypi: 'ftp://mirror/simple' is not an http(s) URL"]
    assert [pr.hint for pr in r.problems] == [
        "give a value or leave the key out", "e.g. history = 30 (1 to 10000)",
        'kind = "local" runs the cells here; "slurm" submits an sbatch array',
        'quote it: key = "..."', "the simple index's URL, e.g. https://pypi.org/simple/"]
    assert exc.value.message == r.lines()[0] and exc.value.hint == r.problems[0].hint
    assert "T0k3nSecret" not in "".join(r.lines())


@pytest.mark.parametrize(("text", "seconds"), [('"90m"', 5400), ('"2h"', 7200), ('"30"', 30),
                                               ("30", 30), ('"1d"', 86400), ('"0.5s"', 1)])
def test_durations(tmp_path: Path, text: str, seconds: int) -> None:
    """matrix.timeout goes through core.quantity.duration (the CLI's parser), in whole
    seconds rounded up."""
    p = tmp_path / "nightly.toml"
    p.write_text(_HEAD + f"timeout = {text}\n" + '[publish]\nindex = "i"\n')
    assert config.load(p).cells[0].timeout_s == seconds


@pytest.mark.parametrize(("text", "value"), [('"200G"', 200 << 30), ('"512MiB"', 512 << 20),
                                             ("1000", 1000), ('"1.5K"', 1536), ("0", 0)])
def test_sizes(tmp_path: Path, text: str, value: int) -> None:
    p = tmp_path / "nightly.toml"
    p.write_text(_HEAD + '[publish]\nindex = "i"\n' + f"[retention]\nmax_size = {text}\n")
    assert config.load(p).max_size == value


@pytest.mark.parametrize(("line", "words"), [
    ('timeout = "0"', "matrix[0].timeout: '0' is out of range"),
    ('timeout = "2 weeks"', "matrix[0].timeout: '2 weeks' is not a duration"),
    ("timeout = inf", "matrix[0].timeout: 'inf' is out of range"),
    ("timeout = nan", "matrix[0].timeout: 'nan' is out of range"),
    ("timeout = " + "9" * 400, "matrix[0].timeout: '" + "9" * 40 + "...' is out of range"),
    ('timeout = "' + "9" * 400 + '"', "matrix[0].timeout: '" + "9" * 40 + "...' is not a"),
    ("[retention]\nmax_size = " + "9" * 400, "retention.max_size: '" + "9" * 40 + "...' is out"),
    ('[retention]\nmax_size = "lots"', "retention.max_size: 'lots' is not a size"),
    ("[retention]\nmax_size = -1", "retention.max_size: '-1' is out of range"),
    ("[retention]\nmax_size = inf", "retention.max_size: 'inf' is out of range"),
    ("[retention]\nkeep_days = nan", "retention.keep_days: 'nan' is out of range"),
    ("[retention]\nkeep_days = -inf", "retention.keep_days: '-inf' is out of range"),
    ("[retention]\nkeep_days = -1", "retention.keep_days: '-1' is out of range"),
    ("[retention]\nkeep_days = " + "9" * 400, "retention.keep_days: '" + "9" * 40),
    ("[reports]\nhistory = " + "9" * 400, "reports.history: '" + "9" * 40 + "...' is out"),
    ("[reports]\nhistory = 2.5", "reports.history: '2.5' is not a number of runs"),
    ("[executor]\ntime = " + "9" * 400, "executor.time: '" + "9" * 40 + "...' is out of"),
    ("[executor]\npoll = nan", "executor.poll: 'nan' is out of range"),
])
def test_numbers_are_one_line_naming_the_key(tmp_path: Path, line: str, words: str) -> None:
    """Every number of nightly.toml goes through core.quantity: 400 digits, NaN, infinity or a
    negative value is one UsageError naming the key, never an OverflowError."""
    p = tmp_path / "nightly.toml"
    where = "" if line.startswith("[") else line + "\n"
    tail = line + "\n" if line.startswith("[") else ""
    p.write_text(_HEAD + where + '[publish]\nindex = "i"\n' + tail)
    with pytest.raises(UsageError) as exc:
        config.load(p)
    assert exc.value.message.startswith("nightly.toml: ") and words in exc.value.message
    assert "\n" not in exc.value.message and exc.value.hint


class _Index(http.server.BaseHTTPRequestHandler):
    pages: dict[str, bytes] = {}
    accepts: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        self.accepts.append(self.headers.get("Accept", ""))
        body = self.pages.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def _file(name: str, sha: str = SHA, **kw: object) -> dict[str, object]:
    return {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": sha}, **kw}


def test_newest_released_sdist_from_pep691(index: str) -> None:
    _Index.pages["/simple/flash-attn/"] = json.dumps({"meta": {"api-version": "1.1"}, "files": [
        _file("flash_attn-2.8.3.tar.gz"),
        _file("flash_attn-2.8.4.tar.gz", sha="cd" * 32),
        _file("flash_attn-2.9.0rc1.tar.gz"),                   # a pre-release
        _file("flash_attn-2.9.0.tar.gz", yanked="broken"),     # yanked
        _file("flash_attn-2.10.0.tar.gz", sha="not-hex"),      # no usable sha256
        _file("flash_attn-3.0.0-cp311-cp311-linux_x86_64.whl"),  # not an sdist
        "garbage",
    ]}).encode()
    pin = changes.newest_sdist("flash-attn", index)
    assert pin == Pin("sdist", "2.8.4", url=index.replace("/simple/", "/files/")
                      + "flash_attn-2.8.4.tar.gz", sha256="cd" * 32)
    assert _Index.accepts[-1] == changes.ACCEPT


def test_index_answers_that_are_not_pep691(index: str) -> None:
    _Index.pages["/simple/demo/"] = b"<html>not json</html>"
    with pytest.raises(FetchError, match="not PEP 691 JSON"):
        changes.newest_sdist("demo", index)
    _Index.pages["/simple/demo/"] = json.dumps({"files": [_file("demo-1.0a1.tar.gz")]}).encode()
    with pytest.raises(FetchError, match="no released sdist"):
        changes.newest_sdist("demo", index)
    with pytest.raises(FetchError, match="pypi: "):
        changes.newest_sdist("missing", index)


def test_sdist_project_from_the_recipe_url() -> None:
    url = "https://files.pythonhosted.org/packages/x/flash_attn-2.8.3.post1.tar.gz"
    assert changes.sdist_project(url) == "flash-attn"


def test_wheel_project_reads_the_name_through_the_one_parser() -> None:
    """The project (normalized) and the version as the name spells it; a name that is no wheel
    name is one WheelFormatError naming it (a hand split gave an IndexError, or a wrong part)."""
    assert changes.wheel_project("Flash_Attn-2.8.3+rocm7.2-1-cp311-cp311-linux_x86_64.whl") == (
        "flash-attn", "2.8.3+rocm7.2")
    assert changes.wheel_project("demo-1.0.post1-py3-none-any.whl") == ("demo", "1.0.post1")
    for bad in ("demo.whl", "demo-1.0.whl", "demo-one-py3-none-any.whl"):
        with pytest.raises(WheelFormatError, match=f"{bad}: not a wheel filename"):
            changes.wheel_project(bad)


def test_reasons_compare_with_the_last_manifest() -> None:
    cell = Cell("c", "r", None, "default", "gfx942", follow=True)
    f = changes.Facts("r1", (("a.patch", "p1"),), (("compiler", "clang 19"),))
    pin = Pin("git", "b" * 40)
    assert changes.reasons(cell, pin, f, None) == ["never built"]
    before = {"pin": {"kind": "git", "value": "a" * 40},
              "facts": {"recipe_sha256": "r0", "patches": {"a.patch": "p0"},
                        "toolchain": {"compiler": "clang 22"}}}
    assert changes.reasons(cell, pin, f, before) == [
        f"new upstream commit {'b' * 12} (was {'a' * 12})", "recipe changed",
        "patch changed: a.patch", "toolchain changed: compiler"]
    same = {"pin": pin.to_json(), "facts": f.to_json()}
    assert changes.reasons(cell, pin, f, same) == []


def test_lock_second_holder_is_refused_and_stale_record_taken_over(tmp_path: Path) -> None:
    (tmp_path / lock.NAME).write_text(json.dumps({"pid": 999999999, "host": "gone",
                                                  "started": "2026-11-29T03:00:00Z"}))
    with lock.held(tmp_path, "r1") as note:
        assert "pid 999999999 on gone since 2026-11-29T03:00:00Z" in note
        with pytest.raises(Busy) as exc, lock.held(tmp_path, "r2"):
            pass
        assert "another nightly is running here (pid " in exc.value.message
    assert (tmp_path / lock.NAME).read_text() == ""  # a clean end leaves no record
    with lock.held(tmp_path, "r3") as note:
        assert note == ""


def test_default_stage_is_publishs() -> None:
    """config keeps its own copy (it imports nothing of publish: the lock comes first)."""
    from rocmbuild.publish.static_index import DEFAULT_STAGE

    assert config.DEFAULT_STAGE == DEFAULT_STAGE
