"""Recipe options (``[options.<name>]``, ``--opt <recipe>.<name>=<value>``): the schema and its
checks, how render puts them into the env, the cache key and the provenance, the flag's parsing,
and the pure parts of the compile-unit count (the ck-fmha filter and generate.py's argv). Only
values and small recipe files; the real generate.py runs in tests/integration/test_units.py."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from rocmbuild.commands.common import parse_opts
from rocmbuild.core.errors import RecipeError, UsageError
from rocmbuild.host.compiler import HipCompiler
from rocmbuild.pipeline import units
from rocmbuild.plan import planning
from rocmbuild.plan.render import Target, render
from rocmbuild.recipe.load import load
from rocmbuild.recipe.search import find_recipe
from tests.conftest import REPO
from tests.unit.plan.test_render import HOST


def flash(line: str = "2.8-fork", **kw: object):  # type: ignore[no-untyped-def]
    recipe = load(find_recipe("flash-attn")).on_line(line)
    return render(recipe, Target(arch=str(kw.pop("arch", "gfx942")), **kw),  # type: ignore[arg-type]
                  HOST)


def sdist(**kw: object):  # type: ignore[no-untyped-def]
    """The 2.8-fork line from the PyPI sdist, whose setup.py passes OPT_DIM to generate.py."""
    return flash(source="pypi", **kw)


def test_flash_attn_opt_dim_reaches_env_key_and_provenance() -> None:
    flash = sdist
    default = flash()
    assert default.env["OPT_DIM"] == "32,64,128,256"
    assert default.options == (("ck_units", "all"), ("opt_dim", "32,64,128,256"))
    only = flash(options=(("opt_dim", "128"),))
    assert only.env["OPT_DIM"] == "128" and only.env_key["OPT_DIM"] == "128"
    assert only.to_json()["options"] == {"ck_units": "all", "opt_dim": "128"}
    # rocmbuild.json's plan
    assert only.inputs_json()["options"] == {"ck_units": "all", "opt_dim": "128"}
    assert only.cache_key != default.cache_key
    # the default given explicitly is the same build
    assert flash(options=(("opt_dim", "32,64,128,256"),)).cache_key == default.cache_key


def test_opt_dim_refused_on_the_fork_source_naming_line_and_source() -> None:
    """The fork at b3ae4966 never passes OPT_DIM to generate.py: its plans do not set it, and
    --opt is refused in one line naming the recipe, the line and the source."""
    fork = flash()
    assert "OPT_DIM" not in fork.env and fork.options == ()
    with pytest.raises(UsageError, match=r"^--opt: flash-attn.opt_dim is not honoured by "
                       r"source 'default' on line 2.8-fork: the fork's setup.py") as e:
        flash(options=(("opt_dim", "128"),))
    assert "\n" not in str(e.value) and e.value.hint.startswith(
        "source(s) that honour it on line 2.8-fork: --source pypi")


def test_opt_dim_honoured_on_main() -> None:
    """Dao-AILab main reads OPT_DIM (setup.py l.472) and passes it as --optdim (l.499-501)."""
    main = flash("main", options=(("opt_dim", "64,128"),))
    assert main.env["OPT_DIM"] == "64,128" and main.options == (("opt_dim", "64,128"),)
    assert flash("main").env["OPT_DIM"] == "32,64,128,256"
    with pytest.raises(UsageError, match="does not apply to variant 'triton'"):
        planning.plan(load(find_recipe("flash-attn")), Target(
            arch="gfx942", variant="triton", release="main", options=(("opt_dim", "128"),)),
            HOST)


def test_option_sources_are_checked(tmp_path: Path) -> None:
    f = tmp_path / "demo.toml"
    f.write_text(RECIPE.format(options='[options.dims]\nenv = "DIMS"\ndefault = "1"\n'
                               'help = "x"\nsources = ["pypy"]'))
    with pytest.raises(RecipeError) as e:
        load(f)
    assert "demo.toml: options.dims.sources[0]: 'pypy' is not a source here; sources: " \
        "default" in " ".join(e.value.problems), e.value.problems


def test_option_scoped_to_its_variant() -> None:
    flash = sdist
    triton = flash(variant="triton")
    assert "OPT_DIM" not in triton.env and triton.options == ()
    assert "options" not in triton.to_json()
    with pytest.raises(UsageError, match=r"--opt: flash-attn.opt_dim does not apply to "
                       r"variant 'triton'"):
        flash(variant="triton", options=(("opt_dim", "128"),))


@pytest.mark.parametrize(("given", "message"), [
    (("opt_dm", "128"), r"flash-attn has no option 'opt_dm' \(did you mean opt_dim\?\)"),
    (("opt_dim", "96"), r"flash-attn.opt_dim: '96' is not a ,-separated list"),
    (("opt_dim", "128,128"), r"'128,128' .*\(repeated\)"),
    (("opt_dim", ""), r"flash-attn.opt_dim: '' is not"),
])
def test_bad_option_values(given: tuple[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        sdist(options=(given,))


def test_parse_opts() -> None:
    assert parse_opts(["flash-attn.opt_dim=128", "flash-attn.opt_dim=64,128"],
                      "flash-attn") == (("opt_dim", "64,128"),)  # the last one wins
    assert parse_opts(["ck-fmha-probe.units=fmha_*=x"], "ck-fmha-probe") == (
        ("units", "fmha_*=x"),)
    with pytest.raises(UsageError, match=r"--opt: 'pytorch.opt_dim=128' names recipe "
                       r"'pytorch', but this builds flash-attn") as e:
        parse_opts(["pytorch.opt_dim=128"], "flash-attn")
    assert e.value.hint == "--opt flash-attn.opt_dim=128"
    for bad in ("opt_dim=128", "flash-attn.opt_dim", "flash-attn.=1"):
        with pytest.raises(UsageError, match="is not RECIPE.NAME=VALUE"):
            parse_opts([bad], "flash-attn")


RECIPE = """schema_version = 1
[package]
name = "demo"
[source]
path = "."
[build]
env = {{ MAX_JOBS = "{{jobs}}" }}
[variants.a]
[variants.b]
{options}
"""


@pytest.mark.parametrize(("options", "problem"), [
    ('[options.dims]\nenv = "DIMS"\ndefault = "96"\nhelp = "x"\nchoices = ["64", "128"]',
     "options.dims.default: '96' is not a ,-separated list of 64, 128"),
    ('[options.dims]\nenv = "DIMS"\ndefault = "1"\nhelp = "x"\nvariants = ["c"]',
     "options.dims.variants[0]: 'c' is not a variant"),
    ('[options.dims]\nenv = "MAX_JOBS"\ndefault = "1"\nhelp = "x"',
     "options.dims.env: MAX_JOBS is also set by build.env"),
    ('[options.Dims]\nenv = "DIMS"\ndefault = "1"\nhelp = "x"',
     "options.Dims: option name 'Dims' must be lower case"),
    ('[options.dims]\nenv = "DIMS"\nhelp = "x"', "options.dims.default: missing"),
    ('[options.dims]\nenv = "DIMS"\ndefault = "a b"\nhelp = "x"\npattern = "^[a-z]+$"',
     "options.dims.default: 'a b' does not match"),
    ('[options.dims]\nenv = "DIMS"\ndefault = "1"\nhelp = "x"\npattern = "("',
     "options.dims.pattern: not a regular expression"),
    ('[options.dims]\nenv = "2X"\ndefault = "1"\nhelp = "x"', "options.dims.env: must name"),
])
def test_option_schema_errors(tmp_path: Path, options: str, problem: str) -> None:
    f = tmp_path / "demo.toml"
    f.write_text(RECIPE.format(options=options))
    with pytest.raises(RecipeError) as e:
        load(f)
    assert any(problem in p for p in e.value.problems), e.value.problems


def test_ck_fmha_probe_recipe_options() -> None:
    r = load(find_recipe("ck-fmha-probe"))
    host = replace(HOST, compiler=HipCompiler(path="/usr/bin/clang++-22", kind="clang",
                                              version="22.1.8", rocm_path=None,
                                              device_lib_path=None, flags=()))
    assert set(r.options) == {"directions", "opt_dim", "units"}
    assert r.unit_count == "ck-fmha" and r.backend == "cmake"
    # the same sdist, pinned the same, as flash-attn's pypi source
    fa = load(find_recipe("flash-attn")).on_line("2.8-fork").alternatives["pypi"]
    (sdist,) = r.downloads
    assert (sdist.url, sdist.sha256, sdist.env) == (fa.url, fa.sha256, "FLASH_ATTN_SDIST")
    plan = render(r, Target(arch="gfx942", options=(("directions", "fwd,bwd"),)), host)
    assert plan.env["CK_FMHA_DIRECTIONS"] == "fwd,bwd" and plan.env["OPT_DIM"] == "64"
    with pytest.raises(UsageError, match="'fwd,sideways' is not"):
        render(r, Target(arch="gfx942", options=(("directions", "fwd,sideways"),)), host)
    with pytest.raises(UsageError, match="does not match"):
        render(r, Target(arch="gfx942", options=(("units", "a b"),)), host)


NAMES = [
    "fmha_fwd_d64_fp16_batch_b128_qr_async_vr_psddv_nlogits_nbias_nmask_nlse_ndropout_nskip.cpp",
    "fmha_fwd_d64_fp16_batch_b128_qr_async_vr_psskddv_nlogits_nbias_nmask_nlse_ndropout_nskip.cpp",
    "fmha_fwd_d64_bf16_group_b128_qr_vr_psddv_nlogits_nbias_mask_lse_dropout_nskip.cpp",
    "fmha_fwd_api.cpp",
]


def _probe_select():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "select_units", REPO / "probes/ck-fmha/select_units.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.select


@pytest.mark.parametrize(("pattern", "want"), [
    ("*", [0, 1, 2, 3]),
    ("", [0, 1, 2, 3]),
    ("fmha_fwd_d64_fp16_*_nlogits_nbias_nmask_nlse_ndropout_*", [0, 1]),
    ("fmha_fwd_d64_fp16_batch_*_psddv_nlogits_nbias_nmask_nlse_ndropout_*", [0]),
    ("fmha_fwd_d64_*_mask_lse_dropout_*", [2]),
    ("FMHA_*", []),  # case-sensitive
    ("fmha_fwd_api", [3]),
])
def test_unit_filter_probe_and_count_agree(pattern: str, want: list[int]) -> None:
    """The probe's CMake helper and `plan --units` select the same units."""
    expected = [NAMES[i] for i in want]
    assert units.select(NAMES, pattern) == expected
    assert _probe_select()(NAMES, pattern) == sorted(expected)


def test_generate_argv_is_setup_pys() -> None:
    calls = units.generate_argv(Path("/ck/generate.py"), {"OPT_DIM": "128"}, Path("/t"))
    assert [d for d, _ in calls] == ["fwd", "fwd_appendkv", "fwd_splitkv", "bwd"]
    _, argv = calls[0]
    assert argv[1:] == ["-B", "/ck/generate.py", "-d", "fwd", "--receipt", "2", "--optdim",
                        "128", "--list_blobs", "/t/fwd.txt"]
    calls = units.generate_argv(Path("/g.py"), {"CK_FMHA_DIRECTIONS": "bwd"}, Path("/t"))
    assert [d for d, _ in calls] == ["bwd"]  # no OPT_DIM: no --optdim (the fork's setup.py)
    assert "--optdim" not in calls[0][1] and "--targets" not in calls[0][1]
    # Dao-AILab main (l.499-501): --optdim and every arch in one --targets
    (_, argv), *_ = units.generate_argv(Path("/g.py"), {"OPT_DIM": "128"}, Path("/t"),
                                        ("gfx90a", "gfx942"))
    assert argv[5:] == ["--receipt", "2", "--optdim", "128", "--targets", "gfx90a,gfx942",
                        "--list_blobs", "/t/fwd.txt"]
    count = units.UnitCount(697, "generate.py", (("OPT_DIM", "128"),))
    assert count.line() == "compile units: 697 (OPT_DIM=128)"
    assert count.to_json() == {"count": 697, "how": "generate.py", "settings": {"OPT_DIM": "128"}}


def test_ninja_counter_is_the_cmake_default() -> None:
    """unit_count "auto": ninja for the cmake backend, configured with the backend's own
    configure command; pip-wheel recipes without a counter are not counted."""
    host = replace(HOST, compiler=HipCompiler(path="/usr/bin/clang++-22", kind="clang",
                                              version="22.1.8", rocm_path=None,
                                              device_lib_path=None, flags=()))
    r = load(find_recipe("ck-fmha-probe"))
    plan = render(replace(r, unit_count="auto"), Target(arch="gfx942"), host)
    assert plan.unit_count == "ninja" and plan.unit_configure == plan.commands[0]
    assert plan.unit_configure[:2] == ("cmake", "-S")
    off = render(replace(r, unit_count="none"), Target(arch="gfx942"), host)
    assert off.unit_count == "" and off.unit_configure == ()
    assert units.not_counted(off) == units.UnitCount(None, 'build.unit_count = "none"')
    tri = flash(variant="triton")
    assert units.not_counted(tri) == units.UnitCount(None, "no counter for this backend")
    assert units.not_counted(tri).line() == "compile units: not counted (no counter for this " \
        "backend)"
    probe = render(load(find_recipe("hip-attention-probe")), Target(arch="gfx942"), host)
    assert probe.unit_count == "ninja" and "-DCMAKE_HIP_ARCHITECTURES=gfx942" in \
        probe.unit_configure


def test_object_outputs_are_the_compile_edges() -> None:
    listed = ("CMakeFiles/u.dir/a.cpp.o: CXX_COMPILER__u_unscanned_Release\n"
              "CMakeFiles/u.dir/k.hip.o: HIP_COMPILER__u_unscanned_Release\n"
              "libu.so: CXX_SHARED_LIBRARY_LINKER__u_Release\n"
              "build.ninja: RERUN_CMAKE\n"
              "all: phony\n"
              "CMakeFiles/w.dir/x.obj: CXX_COMPILER__w_Release\n")
    assert units.object_outputs(listed) == ["CMakeFiles/u.dir/a.cpp.o",
                                            "CMakeFiles/u.dir/k.hip.o", "CMakeFiles/w.dir/x.obj"]
    assert units.UnitCount(6, "ninja", note="ninja, after configure").line() == \
        "compile units: 6 (ninja, after configure)"



def test_a_partial_value_marks_the_plan_and_its_label() -> None:
    """ck_units=smoke builds one kernel: the plan says partial, its label carries ``partial``
    (publishing refuses such a wheel), the key differs; the default builds the whole project."""
    whole = sdist()
    smoke = sdist(options=(("ck_units", "smoke"),))
    assert whole.partial == () and "partial" not in whole.label()
    assert smoke.partial == ("ck_units=smoke",)
    assert smoke.label() == "rocm6.2.partial.gfx942"
    assert smoke.label("torch2.13.cxx11abitrue", build_only=True) == \
        "rocm6.2.torch2.13.cxx11abitrue.buildonly.partial.gfx942"
    assert smoke.env["ROCMBUILD_CK_UNITS"] == "smoke"
    assert smoke.cache_key != whole.cache_key
    assert [p.file.name for p in smoke.patches][-1] == "0003-ck-units-smoke-filter.patch"
    with pytest.raises(UsageError, match="ck_units"):
        sdist(options=(("ck_units", "some"),))
