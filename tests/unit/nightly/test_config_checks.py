"""nightly.toml checked as a whole before anything runs: read once (a pipe or FIFO is one line,
never a hang), the publisher's stage names, sbatch_args as sbatch's getopt_long reads them,
paths and URLs, and the matrix against the real recipes of recipes/ (a cell that builds what
another cell builds is refused, naming both matrix entries)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmbuild.core.errors import UsageError
from rocmbuild.nightly import check, config, tables
from rocmbuild.nightly.slurm.settings import own_option, settings_from_table

M = '[[matrix]]\nrecipes = ["flash-attn"]\narchs = ["gfx942"]\n'
P = '[publish]\nindex = "index"\n'


def _load(tmp_path: Path, text: str) -> config.NightlyConfig:
    p = tmp_path / "nightly.toml"
    p.write_text(text)
    return config.load(p)


def _refused(tmp_path: Path, text: str) -> UsageError:
    with pytest.raises(UsageError) as exc:
        cfg = _load(tmp_path, text)
        check.check(cfg.cells, cfg.path.name)
    assert "\n" not in exc.value.message and exc.value.hint
    return exc.value


@pytest.mark.parametrize(("arg", "read_as"), [
    ("--array=1", "--array"), ("--arr=1", "--array"), ("--a", "--array"),
    ("--out=x", "--output"), ("--ou=x", "--output"), ("--output", "--output"),
    ("--chd=/", "--chdir"), ("--exp=NONE", "--export"), ("--export", "--export"),
    ("--job=n", "--job-name"), ("--wr=id", "--wrap"), ("--pars", "--parsable"),
    ("--help", "--help"), ("--usage", "--usage"), ("--vers", "--version"),
    ("--test-only", "--test-only"), ("--", "--"),
    # the validation array is chained to its build array by --dependency: never undone
    ("--dependency=afterok:1", "--dependency"), ("--dep=singleton", "--dependency"),
    ("-dafterany:7", "--dependency"), ("-vd", "--dependency"),
    ("-a1", "--array"), ("-a", "--array"), ("-o", "--output"), ("-ox", "--output"),
    ("-Qo/tmp/x", "--output"), ("-vvD/", "--chdir"), ("-Jname", "--job-name"), ("-h", "--help"),
    ("-", "-"),
])
def test_sbatch_spellings_of_the_executors_options(arg: str, read_as: str) -> None:
    """sbatch uses getopt_long: a unique prefix of a long option is that option, short options
    bundle and take their value joined; each spelling of an option the executor sets itself
    is caught."""
    assert own_option(arg) == read_as


@pytest.mark.parametrize("arg", ["--qos=normal", "--constraint=mi300x", "--account=p",
                                 "--export-file=env", "--exclusive", "--time=10", "-qnormal",
                                 "-pgpu", "-Qqnormal", "-t10", "-q-ao", "--partition=x",
                                 "--hint=nomultithread", "--verbose", "--wait"])
def test_other_sbatch_options_pass(arg: str) -> None:
    assert own_option(arg) is None
    assert settings_from_table({"sbatch_args": [arg]}, "x", Path("/")).extra_args == (arg,)


@pytest.mark.parametrize(("args", "words"), [
    (["--out=x"], "sbatch reads '--out=x' as --output"),
    (["-a1"], "sbatch reads '-a1' as --array"),
    (["--qos", "normal"], "'normal' is not an sbatch option"),
    (["-o", "x"], "sbatch reads '-o' as --output"),
    (["--qos=a\nb"], "is not an sbatch option"),
])
def test_sbatch_args_refused(args: list[str], words: str) -> None:
    with pytest.raises(UsageError) as exc:
        settings_from_table({"sbatch_args": args}, "nightly.toml: executor", Path("/"))
    assert exc.value.message.startswith("nightly.toml: executor.sbatch_args: ")
    assert words in exc.value.message and exc.value.hint


@pytest.mark.parametrize(("value", "words"), [
    ("a\0b", "contains a NUL byte"), ("~nosuchuser4711/x", "~nosuchuser4711: no such user"),
    ("a\nb", "contains a control character"), ("x" * 5000, "is longer than 4096"),
])
def test_shared_dir_refused(tmp_path: Path, value: str, words: str) -> None:
    with pytest.raises(UsageError) as exc:
        settings_from_table({"shared_dir": value}, "nightly.toml: executor", tmp_path)
    assert exc.value.message == f"nightly.toml: executor.shared_dir: {words}" or \
        exc.value.message.startswith(f"nightly.toml: executor.shared_dir: {words}")


def test_shared_dir_home_and_file_in_the_way(tmp_path: Path) -> None:
    s = settings_from_table({"shared_dir": "~/x"}, "x", tmp_path)
    assert s.shared_dir == Path(os.path.expanduser("~/x"))
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError) as exc:
        settings_from_table({"shared_dir": "f/sub"}, "nightly.toml: executor", tmp_path)
    assert exc.value.message == (f"nightly.toml: executor.shared_dir: {tmp_path / 'f'} is a "
                                 "file, not a directory")


def test_reports_outside_shared_dir_refused_for_slurm(tmp_path: Path) -> None:
    text = M + P + '[executor]\nkind = "slurm"\nshared_dir = "/shared"\n'
    err = _refused(tmp_path, text)
    assert err.message.startswith("nightly.toml: executor.shared_dir: the reports dir ")
    cfg = _load(tmp_path, M + P + '[reports]\ndir = "s/r"\n[executor]\nkind = "slurm"\n'
                'shared_dir = "s"\n')
    assert cfg.reports == tmp_path / "s" / "r"


@pytest.mark.parametrize(("url", "problem"), [
    ("https://", "has no host"), ("http:///x", "has no host"), ("https://:80/x", "has no host"),
    ("https://h:99999/x", "is not a URL"), ("https://h:x/", "is not a URL"),
    ("https://h:0/x", "has port 0"), ("ftp://h/x", "is not an http(s) URL"),
    ("hooks.example.com/x", "is not an http(s) URL"), ("https://h/a b", "whitespace"),
    ("https://[::1/x", "is not a URL"),
])
def test_url_problems(url: str, problem: str) -> None:
    assert problem in (tables.url_problem(url) or "")


@pytest.mark.parametrize("url", ["https://hooks.example.com/T/B/x?k=v", "http://127.0.0.1:8080/",
                                 "https://u:p@h.example/x", "http://[::1]:9/x"])
def test_urls_that_work(url: str) -> None:
    assert tables.url_problem(url) is None


def test_notify_url_without_host_names_the_key_not_the_url(tmp_path: Path) -> None:
    err = _refused(tmp_path, M + P + '[notify]\nurl = "https:///T0kenSecret"\n')
    assert err.message == "nightly.toml: notify.url: the webhook URL has no host"


@pytest.mark.parametrize(("key", "name"), [("stage", "simple"), ("stage", "files"),
                                           ("promote_to", "files"), ("promote_to", "simple"),
                                           ("stage", "a/b"), ("promote_to", ".hidden")])
def test_stage_names_are_the_publishers(tmp_path: Path, key: str, name: str) -> None:
    """The publisher's own check (publish.static_index.check_stage_name), before any build."""
    err = _refused(tmp_path, M + P + f'{key} = "{name}"\n')
    assert err.message == f"nightly.toml: publish.{key}: invalid stage name {name!r}"


@pytest.mark.parametrize(("matrix", "words"), [
    (M + 'variants = ["default", "ck"]\n', "matrix[0].variants: cell flash-attn.ck.default."
     "gfx942 builds what cell flash-attn.default.default.gfx942 of matrix[0] builds"),
    (M + M + 'variants = ["ck"]\n', "matrix[1].variants: cell flash-attn.ck.default.gfx942 "
     "builds what cell flash-attn.default.default.gfx942 of matrix[0] builds"),
    (M.replace('"gfx942"', '"gfx90a,gfx942"') + M.replace('"gfx942"', '"gfx942,gfx90a"'),
     "matrix[1].archs: cell flash-attn.default.default.gfx942-gfx90a builds what cell "
     "flash-attn.default.default.gfx90a-gfx942 of matrix[0] builds"),
    (M.replace('"gfx942"', '"gfx90a,gfx942"') + M.replace('"gfx942"', '"gfx942,gfx90a,gfx942"'),
     "matrix[1].archs: cell "),
    ('[[matrix]]\nrecipes = ["ck-fmha-probe"]\narchs = ["gfx942"]\n[[matrix]]\nrecipes = '
     '["ck-fmha-probe"]\narchs = ["gfx942"]\noptions = { directions = "fwd" }\n',
     "matrix[1]: cell ck-fmha-probe.default.default.gfx942 is already in the matrix, from "
     "matrix[0]"),
    (M + M.replace('"flash-attn"', '"../../recipes/flash-attn.toml"'),
     "matrix[1]: cell flash-attn.default.default.gfx942 is already in the matrix, from "
     "matrix[0]"),
])
def test_two_cells_one_build(tmp_path: Path, matrix: str, words: str) -> None:
    """One error naming both matrix entries, before anything is planned or built."""
    root = Path(__file__).resolve().parents[3]
    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    (tmp_path / "recipes").symlink_to(root / "recipes")
    with pytest.raises(UsageError) as exc:
        cfg = _load(d, matrix + P)
        check.check(cfg.cells, cfg.path.name)
    assert exc.value.message.startswith("nightly.toml: ") and words in exc.value.message


def test_same_arch_set_in_one_entry(tmp_path: Path) -> None:
    err = _refused(tmp_path, M.replace('"gfx942"', '"gfx90a,gfx942", "gfx942,gfx90a"') + P)
    assert err.message == ("nightly.toml: matrix[0].archs: 'gfx90a,gfx942' and 'gfx942,gfx90a' "
                           "are the same targets")


@pytest.mark.parametrize(("line", "words"), [
    ('variants = ["nope"]', "matrix[0].variants: flash-attn has no variant 'nope'"),
    ('sources = ["nope"]', "matrix[0].sources: flash-attn has no source 'nope'"),
    ('options = { nope = "1" }', "matrix[0].options: flash-attn has no option 'nope'"),
    ('sources = ["pypi"]\noptions = { opt_dim = "7" }', "matrix[0].options: flash-attn.opt_dim: "),
    ('options = { opt_dim = "64" }', "matrix[0].options: flash-attn.opt_dim is not honoured by "
     "source 'default'"),
    ('archs = ["gfx908"]', "matrix[0].archs: gfx908 is not supported by flash-attn.toml"),
    ('recipes = ["nosuch"]', "matrix[0].recipes: unknown recipe 'nosuch'"),
])
def test_matrix_values_name_the_key_not_a_flag(tmp_path: Path, line: str, words: str) -> None:
    """The recipe layer's own checks (Recipe.on_variant, render.source_of, options.resolve,
    gfx.parse_archs) with the nightly key as the flag: never ``--variant: ...``."""
    key = line.split(" = ")[0]
    text = "[[matrix]]\n" + "\n".join(
        ln for ln in ('recipes = ["flash-attn"]', 'archs = ["gfx942"]') if
        not ln.startswith(key)) + "\n" + line + "\n" + P
    err = _refused(tmp_path, text)
    assert err.message.startswith(f"nightly.toml: {words}"), err.message
    assert "--" not in err.message.split(": ", 2)[1]


def test_probe_has_no_variants(tmp_path: Path) -> None:
    err = _refused(tmp_path, M.replace("flash-attn", "hip-attention-probe")
                   + 'variants = ["x"]\n' + P)
    assert err.message == ("nightly.toml: matrix[0].variants: hip-attention-probe has no "
                           "variants")


def test_load_works_on_the_bytes_read_once(tmp_path: Path) -> None:
    """``load(path, raw)`` never opens ``path`` again: the bytes are all it reads."""
    gone = tmp_path / "gone" / "nightly.toml"
    cfg = config.load(gone, (M + P).encode())
    assert cfg.cells[0].id == "flash-attn.default.default.gfx942"
    assert cfg.workdir == tmp_path / "gone" / "build"
    assert config.workdir_of(gone, ('workdir = "w"\n' + M + P).encode()) == \
        tmp_path / "gone" / "w"


def test_fifo_without_writer_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "nightly.toml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError) as exc:
        config.read(fifo)
    assert exc.value.message == f"--config: {fifo}: is a pipe, not a regular file"
    assert "process substitution" in (exc.value.hint or "")


def test_symlink_and_directory_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(M + P)
    (tmp_path / "link.toml").symlink_to(real)
    for p, why in ((tmp_path / "link.toml", "is a symbolic link"),
                   (tmp_path, "is not a regular file")):
        with pytest.raises(UsageError) as exc:
            config.read(p)
        assert exc.value.message.startswith(f"--config: {p}: {why}")


@pytest.mark.parametrize(("message", "key"), [
    ("--variant: flash-attn line main does not build variant 'triton'", "variants"),
    ("--source: flash-attn has no source 'pypi'", "sources"),
    ("--opt: flash-attn.opt_dim is not honoured by source 'pypi' on line main", "options"),
    ("--arch: gfx908 is not supported by flash-attn.toml: arch.supported", "archs"),
    ("--release: flash-attn has release lines; name one", "recipes"),
])
def test_planning_errors_name_the_key(message: str, key: str) -> None:
    """What the recipe layer can only say once a release line is picked for this host (a line
    that does not build the cell's variant or has no such source) names the matrix key and the
    cell, not the flag (``run.plan`` plans one cell at a time through ``check.renamed``)."""
    from rocmbuild.nightly.model import Cell

    cell = Cell(id="flash-attn.triton.pypi.gfx942", recipe="flash-attn", variant="triton",
                source="pypi", arch="gfx942", entry=2)
    got = check.renamed(UsageError(message, hint="h"), cell, "nightly.toml")
    rest = message.split(": ", 1)[1]
    assert got.message == f"nightly.toml: matrix[2].{key}: {rest} (cell {cell.id})"
    assert got.hint == "h"
    other = UsageError("--only/--cell: no cell 'x' in nightly.toml", hint="h")
    assert check.renamed(other, cell, "nightly.toml") is other
