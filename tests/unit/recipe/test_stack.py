"""The stack file reader (recipe/stack.py): every bad input is one line naming the file and key
(``finetune.toml: members[1].variant: ...``), all at once, as a RecipeError (exit 3); a stack
name that names no file is a UsageError (exit 2). The members name real recipes: the shipped
flash-attn (variants, lines, options) and tests/recipes/stack-*.toml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmbuild.core import config
from rocmbuild.core.errors import RecipeError, UsageError
from rocmbuild.recipe import stack

RECIPES = Path(__file__).parents[2] / "recipes"
PURE = f'recipe = "{RECIPES / "stack-pure.toml"}"'
EXT = f'recipe = "{RECIPES / "stack-ext.toml"}"'
HEAD = "schema_version = 1\n"


def _write(tmp_path: Path, text: str, name: str = "finetune.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _problems(path: Path) -> list[str]:
    with pytest.raises(RecipeError) as info:
        stack.load_stack(path)
    assert info.value.exit_code == 3
    assert all("\n" not in p and p.startswith(f"{path.name}: ") for p in info.value.problems)
    return info.value.problems


def test_a_good_stack_reads_its_members_in_order(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD + 'description = "two"\n[torch]\nfrom = "host"\n'
               'requires = ">=2.9,<2.14"\n'
               f"[[members]]\n{PURE}\n[[members]]\n{EXT}\n"
               '[[members]]\nrecipe = "flash-attn"\nvariant = "triton"\nsource = "pypi"\n')
    st = stack.load_stack(p)
    assert (st.name, st.torch_from, st.torch_requires, st.torch) == \
        ("finetune", "host", ">=2.9,<2.14", None)
    assert [(m.key, m.name, m.variant, m.source) for m in st.members] == [
        ("members[0]", "stack-pure", None, "default"), ("members[1]", "stack-ext", None, "default"),
        ("members[2]", "flash-attn", "triton", "pypi")]


def test_a_relative_member_path_is_relative_to_the_stack_file(tmp_path: Path) -> None:
    rel = os.path.relpath(RECIPES / "stack-pure.toml", tmp_path)
    st = stack.load_stack(_write(tmp_path, HEAD + f'[[members]]\nrecipe = "{rel}"\n'))
    assert st.members[-1].recipe.path.resolve() == (RECIPES / "stack-pure.toml").resolve()


def _torch_recipe(tmp_path: Path, name: str = "torch") -> str:
    """A recipe of the project ``name`` (stack-pure's, renamed), as ``recipe = "..."``."""
    text = (RECIPES / "stack-pure.toml").read_text().replace('name = "stack-pure"',
                                                             f'name = "{name}"')
    text = text.replace('path = "../fixtures', f'path = "{RECIPES.parent}/fixtures')
    (tmp_path / "mytorch.toml").write_text(text)
    return f'recipe = "{tmp_path / "mytorch.toml"}"'


def test_torch_from_a_recipe_is_a_member_built_first(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD + f'[torch]\nfrom = "recipe"\n{_torch_recipe(tmp_path)}\n'
               f'[[members]]\n{EXT}\n')
    st = stack.load_stack(p)
    assert st.torch is not None and st.torch.key == "torch"
    assert [m.key for m in st.all_members] == ["torch", "members[0]"]


BAD = [
    ("no-version", f"[[members]]\n{PURE}\n", "finetune.toml: schema_version: missing"),
    ("version", 'schema_version = 2\n[[members]]\n' + PURE + "\n",
     "schema_version: unsupported version 2"),
    ("top-key", HEAD + f"memebers = []\n[[members]]\n{PURE}\n",
     "memebers: unknown key (did you mean members?)"),
    ("no-members", HEAD, "members: missing"),
    ("empty-members", HEAD + "members = []\n", "members: expected a non-empty list"),
    ("member-not-table", HEAD + 'members = ["flash-attn"]\n', "members[0]: expected a table"),
    ("member-no-recipe", HEAD + '[[members]]\nvariant = "ck"\n', "members[0].recipe: missing"),
    ("member-key", HEAD + f"[[members]]\n{PURE}\nvarient = \"x\"\n",
     "members[0].varient: unknown key (did you mean variant?)"),
    ("unknown-recipe", HEAD + f'[[members]]\n{PURE}\n[[members]]\nrecipe = "flash-atn"\n',
     "members[1].recipe: unknown recipe 'flash-atn' (did you mean flash-attn?)"),
    ("recipe-file", HEAD + '[[members]]\nrecipe = "nothere.toml"\n',
     "members[0].recipe: recipe file"),
    ("bad-recipe", HEAD + f'[[members]]\nrecipe = "{RECIPES / "bad-no-name.toml"}"\n',
     "members[0].recipe: recipe "),
    ("variant", HEAD + f'[[members]]\n{PURE}\n[[members]]\nrecipe = "flash-attn"\n'
     'variant = "trito"\n',
     "finetune.toml: members[1].variant: flash-attn has no variant 'trito' (did you mean "
     "triton?); variants: ck, triton"),
    ("variant-type", HEAD + f"[[members]]\n{PURE}\nvariant = 3\n",
     "members[0].variant: expected a string, got int"),
    ("release", HEAD + '[[members]]\nrecipe = "flash-attn"\nrelease = "2.9"\n',
     "members[0].release: flash-attn has no release line '2.9'; lines: main, 2.8.3, 2.8-fork"),
    ("source", HEAD + f'[[members]]\n{PURE}\nsource = "pypi"\n',
     "members[0].source: stack-pure has no source 'pypi'; sources: default"),
    ("option", HEAD + '[[members]]\nrecipe = "flash-attn"\noptions = { opt_dm = "128" }\n',
     "members[0].options.opt_dm: flash-attn has no option 'opt_dm' (did you mean opt_dim?)"),
    ("option-type", HEAD + '[[members]]\nrecipe = "flash-attn"\noptions = { opt_dim = [1] }\n',
     "members[0].options.opt_dim: expected a string or an integer, got list"),
    ("options-type", HEAD + f'[[members]]\n{PURE}\noptions = "x"\n',
     "members[0].options: expected a table"),
    ("twice", HEAD + f"[[members]]\n{PURE}\n[[members]]\n{PURE}\n",
     "members[1].recipe: 'stack-pure' is already members[0]"),
    ("torch-from", HEAD + f'[torch]\nfrom = "pip"\n[[members]]\n{PURE}\n',
     "torch.from: 'pip' is not one of host, recipe"),
    ("torch-requires", HEAD + f'[torch]\nrequires = "2.9+"\n[[members]]\n{PURE}\n',
     "torch.requires: '2.9+' is not a version range"),
    ("torch-requires-pep440", HEAD + f'[torch]\nrequires = "~=2"\n[[members]]\n{PURE}\n',
     "torch.requires: '~=2' is not a version range"),
    ("torch-host-recipe", HEAD + f'[torch]\nrecipe = "pytorch"\n[[members]]\n{PURE}\n',
     "torch.recipe: only with from = \"recipe\""),
    ("torch-no-recipe", HEAD + f'[torch]\nfrom = "recipe"\n[[members]]\n{PURE}\n',
     "torch.recipe: missing"),
    ("torch-type", HEAD + f'torch = "host"\n[[members]]\n{PURE}\n',
     "torch: expected a table, got str"),
    ("description", HEAD + f"description = 1\n[[members]]\n{PURE}\n",
     "description: expected a string"),
    ("toml", HEAD + "[[members]\n", "finetune.toml: invalid TOML"),
]


def test_torch_from_a_recipe_that_is_not_torch_is_refused(tmp_path: Path) -> None:
    """The stack's torch pins the lock: a recipe of another project is the stack file's error,
    named at torch.recipe, before anything is planned."""
    p = _write(tmp_path, HEAD + f'[torch]\nfrom = "recipe"\n{PURE}\n[[members]]\n{EXT}\n')
    assert _problems(p) == ["finetune.toml: torch.recipe: 'stack-pure' builds 'stack-pure', "
                            "not torch: the stack's torch must be a torch recipe (e.g. "
                            "\"pytorch\")"]


def test_two_members_of_one_project_are_refused(tmp_path: Path) -> None:
    """Two recipes whose wheels are one project (names equal once normalized, PEP 503): no
    lock installs both, so the stack file is refused at the second member."""
    other = _torch_recipe(tmp_path, "Stack_Pure")
    p = _write(tmp_path, HEAD + f"[[members]]\n{PURE}\n[[members]]\n{other}\n")
    assert _problems(p) == ["finetune.toml: members[1].recipe: 'mytorch' builds 'Stack_Pure', "
                            "which members[0] (stack-pure) builds too: a stack installs one "
                            "wheel of each project"]


def test_the_file_name_is_the_stack_name(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD + f"[[members]]\n{PURE}\n", "my stack.toml")
    assert _problems(p) == ["my stack.toml: (file name): 'my stack' is not a stack name "
                            "(letters, digits, '.', '_', '-'; it names the lock files' "
                            "directory)"]


@pytest.mark.parametrize(("text", "want"), [(t, w) for _, t, w in BAD],
                         ids=[i for i, _, _ in BAD])
def test_bad_stack_file(tmp_path: Path, text: str, want: str) -> None:
    problems = _problems(_write(tmp_path, text))
    assert any(want in p for p in problems), problems


def test_members_are_numbered_from_0_by_every_check(tmp_path: Path) -> None:
    """The reader's checks and the control-character check (``untrusted.controls``, on the
    parsed file) name the second member alike: members[1], as a recipe's downloads[1]."""
    second = f"[[members]]\n{PURE}\n[[members]]\nrecipe = \"flash-attn\"\nvariant = "
    assert _problems(_write(tmp_path, HEAD + second + '"q"\n'))[0].startswith(
        "finetune.toml: members[1].variant: flash-attn has no variant 'q'")
    assert _problems(_write(tmp_path, HEAD + second + '"q\\u001b"\n')) == [
        "finetune.toml: members[1].variant: control character U+001B"]


def test_every_problem_at_once(tmp_path: Path) -> None:
    problems = _problems(_write(tmp_path, 'schema_version = 9\n[[members]]\nrecipe = "x-y"\n'
                                '[[members]]\nrecipe = "flash-attn"\nvariant = "q"\n'))
    assert [p.split(": ")[1] for p in problems] == \
        ["schema_version", "members[0].recipe", "members[1].variant"], problems


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_bytes(b"schema_version = 1\ndescription = \"\xff\"\n")
    assert _problems(p) == ["s.toml: not UTF-8 text (byte 34: b'\\xff')"]


def test_too_large(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD + "#" * stack.MAX_BYTES + "\n")
    assert _problems(p) == [f"finetune.toml: larger than {stack.MAX_BYTES} bytes"]


def test_too_many_members(tmp_path: Path) -> None:
    text = HEAD + f"[[members]]\n{PURE}\n" * (stack.MAX_MEMBERS + 1)
    assert _problems(_write(tmp_path, text)) == [
        f"finetune.toml: members: {stack.MAX_MEMBERS + 1} members (at most {stack.MAX_MEMBERS})"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    real = _write(tmp_path, HEAD + f"[[members]]\n{PURE}\n", "real.toml")
    p = tmp_path / "s.toml"
    if kind == "symlink":
        p.symlink_to(real)
    elif kind == "fifo":
        os.mkfifo(p)  # read without blocking: refused, never waited on
    else:
        p.mkdir()
    (problem,) = _problems(p)
    assert problem.startswith("s.toml: cannot read: "), problem


def test_find_by_path_and_by_name(tmp_path: Path) -> None:
    p = _write(tmp_path, HEAD)
    assert stack.find(str(p)) == p
    assert stack.find("finetune") == config.DATA_ROOT / "stacks" / "finetune.toml"
    with pytest.raises(UsageError, match=r"unknown stack 'finetun' \(did you mean finetune\?\)"
                       ) as info:
        stack.find("finetun")
    assert info.value.exit_code == 2
    with pytest.raises(UsageError, match="stack file .*nothere.toml not found"):
        stack.find(str(tmp_path / "nothere.toml"))


def test_the_shipped_finetune_stack_reads_once_its_recipes_exist() -> None:
    """stacks/finetune.toml names bitsandbytes and deepspeed (issue 25, written in parallel):
    it must read once they are in recipes/."""
    shipped = config.DATA_ROOT / "recipes"
    if not all((shipped / f"{n}.toml").is_file() for n in ("bitsandbytes", "deepspeed")):
        pytest.skip("the bitsandbytes and deepspeed recipes are not in this checkout yet")
    st = stack.load_stack(config.DATA_ROOT / "stacks" / "finetune.toml")
    assert [m.name for m in st.members] == ["flash-attn", "bitsandbytes", "deepspeed"]
