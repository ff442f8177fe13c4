"""The rules docs/architecture.md states, checked on the source: only run.py starts processes,
only commands/ and cli.py see argparse or exit, stages never import each other, the kernel gate
imports nothing of rocmbuild, and domain modules print only through log (progress and warnings),
never data on stdout."""

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
