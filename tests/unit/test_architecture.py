"""The rules docs/architecture.md states, checked on the source: only run.py starts processes,
only commands/ and cli.py see argparse or exit, stages never import each other, the kernel gate
imports nothing of rocmbuild, and domain modules print only through log (progress and warnings),
never data on stdout."""

from __future__ import annotations

import ast
from pathlib import Path

import rocmbuild

SRC = Path(rocmbuild.__file__).parent
STAGES = {p.stem for p in (SRC / "stages").glob("*.py") if p.stem != "__init__"}


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
PROGRAMS = ("validate/kernelgate/", "recipe/schema.py", "launchers/")


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
    bad = [n for n, t in modules().items() if n != "run.py" and not n.startswith("launchers/")
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
        if name.startswith(("validate/kernelgate/", "launchers/")):
            assert not {m for m in imported(tree) if m.startswith("rocmbuild")}, name


def test_nothing_imports_the_command_layer() -> None:
    bad = [n for n, t in modules().items() if not is_command_layer(n)
           and any(m.startswith(("rocmbuild.commands", "rocmbuild.cli")) for m in imported(t))]
    assert bad == []


def test_shared_values_import_no_domain_module() -> None:
    """Rule 7 (arrows point down): recipe/, host and results sit below the domain modules and
    the stages, so they import none of them (the nightly's Pin lives in results). The
    kernel gate imports nothing of rocmbuild: a leaf, its adapter names may be read."""
    above = ("rocmbuild.nightly", "rocmbuild.pipeline", "rocmbuild.stages", "rocmbuild.publish",
             "rocmbuild.validate", "rocmbuild.verify", "rocmbuild.prune", "rocmbuild.doctor")
    bad = [f"{n}: {m}" for n, t in modules().items()
           if n.startswith("recipe/") or n in ("host.py", "results.py")
           for m in sorted(imported(t))
           if m.startswith(above) and not m.startswith("rocmbuild.validate.kernelgate")]
    assert bad == []
