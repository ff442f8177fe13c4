"""The rules docs/architecture.md states, checked on the source: only core/run.py starts
processes, only commands/ and cli.py see argparse or exit, stages never import each other, the
kernel gate imports nothing of rocmbuild, domain modules print only through log (progress and
warnings), never data on stdout, arrows point down, no function is over 120 lines, and module
names say one thing: a basename two rooms share is declared with its meaning in each, the names
that misled stay gone, commands/ holds the commands and stages/ the stages."""

from __future__ import annotations

import ast
from pathlib import Path

import rocmbuild

SRC = Path(rocmbuild.__file__).parent
STAGES = {p.stem for p in (SRC / "stages").glob("*.py") if p.stem not in ("__init__", "context")}


def modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text()) for p in SRC.rglob("*.py")}


def imported(tree: ast.Module) -> set[str]:
    """Every module name imported, with ``from x import y`` also giving ``x.y``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


# Programs of their own, run with `python -m`: the kernel gate (inside the validation venv) and
# the maintainers' generator of docs/recipes.md and the recipe JSON schema.
PROGRAMS = ("programs/", "recipe/schema.py")


def calls(tree: ast.Module) -> list[tuple[str, str, int]]:
    """(owner, name, line) of every call: ``sys.exit()`` is ("sys", "exit"), ``log.out.print()``
    is ("log.out", "print"), ``print()`` is ("", "print")."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.append(("", f.id, node.lineno))
            elif isinstance(f, ast.Attribute):
                v = f.value
                owner = (v.id if isinstance(v, ast.Name) else
                         f"{v.value.id}.{v.attr}" if isinstance(v, ast.Attribute)
                         and isinstance(v.value, ast.Name) else "")
                out.append((owner, f.attr, node.lineno))
    return out


def is_command_layer(name: str) -> bool:
    return (name.startswith("commands/") or name in ("cli.py", "__main__.py")
            or name.startswith(PROGRAMS))


def test_only_run_py_starts_processes() -> None:
    # launchers/ are programs a build runs in its children: they exec the compiler they front
    bad = [n for n, t in modules().items()
           if n != "core/run.py" and not n.startswith("programs/launchers/")
           and imported(t) & {"subprocess", "os.system", "os.execv", "os.posix_spawn"}]
    assert bad == []


def test_only_the_command_layer_sees_argparse_or_exits() -> None:
    bad = []
    for name, tree in modules().items():
        if is_command_layer(name):
            continue
        if "argparse" in imported(tree):
            bad.append(f"{name}: imports argparse")
        bad += [f"{name}:{line}: exits" for owner, called, line in calls(tree)
                if (owner, called) in (("sys", "exit"), ("os", "_exit"), ("", "exit"))]
    assert bad == []


def test_stages_never_import_each_other() -> None:
    bad = []
    for name, tree in modules().items():
        if not name.startswith("stages/") or name.endswith("__init__.py"):
            continue
        for mod in imported(tree):
            for stage in STAGES - {Path(name).stem}:
                if mod in (f"rocmbuild.stages.{stage}",):
                    bad.append(f"{name} imports {mod}")
    assert bad == []


def test_domain_modules_do_not_print_data() -> None:
    """stdout (log.out and print) is for a command's data: only the command layer writes it."""
    bad = [f"{name}:{line}: {owner or 'print'}" for name, tree in modules().items()
           if not is_command_layer(name) for owner, called, line in calls(tree)
           if (owner, called) == ("", "print") or owner == "log.out"]
    assert bad == []


def test_kernel_gate_is_self_contained() -> None:
    for name, tree in modules().items():
        if name.startswith("programs/"):
            assert not {m for m in imported(tree) if m.startswith("rocmbuild")}, name


def test_nothing_imports_the_command_layer() -> None:
    bad = [n for n, t in modules().items() if not is_command_layer(n)
           and any(m.startswith(("rocmbuild.commands", "rocmbuild.cli")) for m in imported(t))]
    assert bad == []


# The layers, lowest first. A module imports only from its own package and from packages of a
# lower layer (docs/architecture.md draws them).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "programs"),
    ("artifacts",),
    ("host", "cache", "sources"),
    ("recipe",),
    ("plan",),
    ("buildtools", "validate", "publish"),
    ("stages",),
    ("pipeline",),
    ("nightly",),
    ("commands",),
    ("cli", "__main__"),
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def room(name: str) -> str:
    """The package a module file belongs to (``host/detect.py`` -> ``host``)."""
    return name.split("/")[0].removesuffix(".py")


def target_room(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if parts[0] == "rocmbuild" and len(parts) > 1 else None


def test_only_init_main_and_cli_sit_at_the_top() -> None:
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"]
    assert {room(n) for n in modules()} - {"__init__"} <= set(RANK)


def test_package_inits_are_empty() -> None:
    """An ``__init__`` with code runs on every import of its package: the no-op rebuild's import
    budget (docs/dev/benchmarks-notebook.md) depends on them staying empty."""
    bad = [str(p.relative_to(SRC)) for p in SRC.rglob("__init__.py")
           if p.parent != SRC and not str(p.relative_to(SRC)).startswith(PROGRAMS)
           and p.read_text().strip()]
    assert bad == []


def test_arrows_point_down() -> None:
    """Rule 7: a module imports from its own package or from a lower layer, never up."""
    bad = []
    for name, tree in modules().items():
        mine = room(name)
        if mine == "__init__":
            continue
        for mod in sorted(imported(tree)):
            other = target_room(mod)
            if other is None or other == mine or other == "__version__" or mine == "__main__":
                continue
            if other not in RANK or RANK[other] >= RANK[mine]:
                bad.append(f"{name} ({mine}) imports {mod}")
    assert bad == []


def test_no_import_circle() -> None:
    """No two modules import each other, directly or through others (lazy imports included:
    a circle is one whichever import runs first)."""
    names = {"rocmbuild." + n.removesuffix(".py").replace("/", ".").removesuffix(".__init__"): t
             for n, t in modules().items()}
    graph = {m: {i for i in imported(t) if i in names and i != m} for m, t in names.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_module_over_500_lines() -> None:
    bad = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 500}
    assert bad == {}


MAX_FUNCTION_LINES = 120


def test_no_function_over_120_lines() -> None:
    """Every function and method, from its ``def`` to its last line (a nested function counts
    inside its parent, and on its own)."""
    bad = {f"{name}:{node.lineno} {node.name}": n for name, tree in modules().items()
           for node in ast.walk(tree)
           if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
           and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES}
    assert bad == {}



def uses(tree: ast.Module, module: str, functions: set[str]) -> list[int]:
    """The lines where ``tree`` calls one of ``functions`` of ``module``
    (``rocmbuild.plan.render``), whatever it was imported as: the function itself (``from m
    import f [as g]``) or the module (``from rocmbuild.plan import render as r``, ``import
    rocmbuild.plan.render as r``)."""
    parent, _, leaf = module.rpartition(".")
    as_module: set[str] = set()
    as_function: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == parent:
            as_module |= {a.asname or a.name for a in node.names if a.name == leaf}
        elif isinstance(node, ast.ImportFrom) and node.module == module:
            as_function |= {a.asname or a.name for a in node.names if a.name in functions}
        elif isinstance(node, ast.Import):
            as_module |= {a.asname for a in node.names if a.name == module and a.asname}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in as_function)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in functions
            and isinstance(node.func.value, ast.Name) and node.func.value.id in as_module))]


def test_the_recipe_room_knows_no_host_cache_or_artifact() -> None:
    """recipe/ reads and checks recipe files; what a recipe becomes on a host (the plan, its
    key, its wheel) is plan/'s. The floors alone would allow recipe/ to import host/, cache/ and
    artifacts/ (they sit lower)."""
    bad = [f"{name} imports {mod}" for name, tree in modules().items()
           if name.startswith("recipe/") for mod in sorted(imported(tree))
           if target_room(mod) in ("host", "cache", "artifacts")]
    assert bad == []

def private_reaches(tree: ast.Module) -> list[str]:
    """Where ``tree`` imports a private name (``_x``) of another rocmbuild module or reads one
    off a name it imported from rocmbuild (``cell._entry``, ``Plan._x``)."""
    names: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rocmbuild"):
            for a in node.names:
                names.add(a.asname or a.name)
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{node.lineno}: imports {node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name.startswith("rocmbuild") and a.asname}
    out += [f"{node.lineno}: {node.value.id}.{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_")
            and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
            and node.value.id in names]
    return out


def test_no_module_reaches_into_another_modules_private_names() -> None:
    """A private name is its module's own: a caller elsewhere gets a public one (issue 33:
    revalidate called ``cell._entry``, now ``cell.manifest_entry``)."""
    bad = [f"{name}:{where}" for name, tree in modules().items()
           for where in private_reaches(tree)]
    assert bad == []
    assert private_reaches(ast.parse(
        "from rocmbuild.nightly import cell as c\nfrom rocmbuild.x import _y\nc._entry()")) == [
        "2: imports rocmbuild.x._y", "3: c._entry"]

def test_render_is_called_only_inside_the_plan_room() -> None:
    bad = [f"{name}:{line}" for name, tree in modules().items() if not name.startswith("plan/")
           for line in uses(tree, "rocmbuild.plan.render", {"render"})]
    assert bad == []


def test_a_plan_host_is_found_in_one_place() -> None:
    """``plan.planning.host_for`` is where a plan's host is detected or read; no other module
    composes host detection with planning. The one exception: the no-op memo re-detects with
    the wants its memo stored (it must not import the plan machinery)."""
    bad = [f"{name}:{line}" for name, tree in modules().items()
           if name not in ("plan/planning.py", "commands/noop_memo.py")
           and not name.startswith("host/")
           for line in uses(tree, "rocmbuild.host.detect", {"detect", "load"})]
    assert bad == []

def place(name: str) -> tuple[str, str]:
    """(room, basename) of a module file: ``nightly/slurm/settings.py`` -> ("nightly/slurm",
    "settings"); a top-level file's room is ""."""
    room_dir, _, file = name.rpartition("/")
    return room_dir, file.removesuffix(".py")


# Every module basename that more than one room uses, with what the word is (a noun: the thing
# the module holds; a verb: what it does, one word class per name) and the one meaning it has in
# each room. Two modules may share a name only when it says the same kind of thing in both: a
# noun in one room and a verb in another (host/detect beside the old nightly/detect, core/run
# beside the old nightly/run) misleads a reader. A new shared name goes here, with its meanings.
# ``__init__`` and ``__main__`` are Python's names, not ours.
SHARED_NAMES: dict[str, tuple[str, dict[str, str]]] = {
    "audit": ("verb", {
        "artifacts": "audit a wheel's device code against the requested archs",
        "commands": "the `audit` command: audit wheels and shared objects",
        "stages": "the audit stage: audit the wheel the build made"}),
    "build": ("verb", {
        "commands": "the `build` command: build one recipe",
        "pipeline": "build one Plan: the stage tuple, the key's locks, storing",
        "stages": "the build stage: run the backend's build commands"}),
    "bundle": ("verb", {
        "buildtools": "bundle the ROCm runtime into a wheel",
        "stages": "the bundle stage: bundle it when rocm_runtime = \"bundle\""}),
    "check": ("verb", {
        "recipe": "check a recipe file: every problem at once",
        "nightly": "check the matrix against its recipes before anything runs",
        "programs/modelcheck": "check the attention under test inside a decoder against the "
                               "references (the model check)"}),
    "components": ("noun", {
        "core": "the ROCm component table: packages, libraries, install names",
        "host": "the components a ROCm root holds, found by file checks"}),
    "config": ("noun", {
        "core": "where things live: workspace, cache, recipe paths",
        "nightly": "nightly.toml as a NightlyConfig"}),
    "doctor": ("noun", {
        "commands": "the `doctor` command",
        "pipeline": "the doctor's checks of this host, one line each"}),
    "drift": ("noun", {
        "sources": "a pin against what upstream has now",
        "nightly": "the report's upstream drift section"}),
    "harness": ("noun", {
        "programs/kernelgate": "the kernel gate's command line in the validation venv",
        "programs/modelcheck": "the model check's command line in the validation venv"}),
    "lock": ("noun", {
        "core": "advisory file locks (flock)",
        "nightly": "the one-nightly-per-workspace lock and its holder's record"}),
    "matrix": ("noun", {
        "nightly": "one [[matrix]] table of nightly.toml, expanded into cells",
        "programs/kernelgate": "the gate's correctness cases and throughput shapes"}),
    "model": ("noun", {
        "recipe": "the Recipe value",
        "plan": "the Plan value",
        "validate": "validation's options and report",
        "nightly": "the typed values the nightly's parts pass"}),
    "settings": ("noun", {
        "core": "the settings reader: typed values from config files and saved hosts",
        "nightly/slurm": "the Slurm executor's settings and a task's resources"}),
    "stack": ("noun", {
        "recipe": "a stack file, read",
        "pipeline": "a stack planned, built, validated and published together",
        "commands": "the `stack` command"}),
    "tables": ("noun", {
        "recipe": "a recipe's nested tables, one dataclass each",
        "nightly": "nightly.toml's tables besides [[matrix]], one settings model each"}),
    "upstream": ("noun", {
        "sources": "what upstream has now: git refs, index pages",
        "validate": "the package's own upstream tests, sampled"}),
    "validate": ("verb", {
        "commands": "the `validate` command: validate wheels",
        "stages": "the validate stage: validate the wheel the build made"}),
    "verify": ("verb", {
        "commands": "the `verify` command",
        "pipeline": "verify a wheel: rebuild it from its provenance and compare"}),
}

# Names the house gave up because they misled, and where the module lives now. None may come back.
GONE_MODULES = {
    "nightly/detect": "nightly/changes (change detection; host/detect detects the host)",
    "nightly/run": "nightly/controller (core/run runs processes)",
    "recipe/options": "plan/recipe_options (core/options: the settings and their flags)",
    "plan/options": "plan/recipe_options (core/options: the settings and their flags)",
}
GONE_ANYWHERE = {
    "quickhit": "commands/noop_memo (the no-op rebuild's memo)",
    "livecode": "buildtools/preprocessed (the lines the preprocessor keeps)",
}


def test_shared_module_names_mean_one_thing() -> None:
    rooms: dict[str, set[str]] = {}
    for name in modules():
        room_dir, base = place(name)
        if base not in ("__init__", "__main__"):
            rooms.setdefault(base, set()).add(room_dir)
    shared = {base: rs for base, rs in rooms.items() if len(rs) > 1}
    declared = {base: set(meanings) for base, (_, meanings) in SHARED_NAMES.items()}
    assert shared == declared, "declare a shared name in SHARED_NAMES, with its meaning per room"
    assert {kind for kind, _ in SHARED_NAMES.values()} <= {"noun", "verb"}


def test_misleading_names_do_not_come_back() -> None:
    found = [name for name in modules() if name.removesuffix(".py") in GONE_MODULES
             or place(name)[1] in GONE_ANYWHERE]
    assert found == []


def test_validation_is_called_validate() -> None:
    """``check`` checks input (a recipe, the matrix); what validates a wheel says so
    (``nightly.revalidate.validate_wheel``, once ``revalidate.check``): no module, function or
    class called ``check`` in validate/ or in a module named for validation."""
    bad = []
    for name, tree in modules().items():
        room_dir, base = place(name)
        if room_dir != "validate" and "validate" not in base:
            continue
        bad += [name] if base == "check" else []
        bad += [f"{name}:{node.lineno}" for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and node.name.lstrip("_").lower() == "check"]
    assert bad == []


# commands/ modules that are no subcommand: what the commands share.
COMMAND_HELPERS = {
    "common": "the flags and steps several commands share",
    "noop_memo": "the no-op rebuild's memo, served before anything is parsed",
    "parser": "the command line's parser",
    "registry": "COMMANDS, in --help's order, and the `rocmbuild <recipe>` shorthand",
}


def test_command_modules_are_the_commands() -> None:
    """Each commands/<name>.py is the subcommand ``<name>`` the parser registers, or a helper."""
    import argparse

    from rocmbuild.commands.parser import build_parser
    from rocmbuild.commands.registry import COMMANDS

    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(subs.choices) == sorted(COMMANDS)
    files = {p.stem for p in (SRC / "commands").glob("*.py")} - {"__init__"}
    assert sorted(files - set(COMMAND_HELPERS)) == sorted(COMMANDS)
    assert set(COMMAND_HELPERS) <= files


def test_stage_modules_are_the_stages() -> None:
    """Each stages/<name>.py but context.py is the stage ``<name>`` of the builder's list."""
    from rocmbuild.pipeline.build import STAGES as BUILDER_STAGES

    assert sorted(s.name for s in BUILDER_STAGES) == sorted(STAGES)
