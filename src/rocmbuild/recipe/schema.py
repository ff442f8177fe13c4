"""docs/recipes.md and schemas/recipe.schema.json, generated from the model's field metadata.

``python -m rocmbuild.recipe.schema`` (from the repository root) writes both;
``--check`` writes nothing and exits 1 when either file differs from what the model says.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

from rocmbuild.core.hostenv import PASS_ENV
from rocmbuild.recipe.check import Leaf, Tree, tree
from rocmbuild.recipe.keys import (
    PLACEHOLDERS,
    PLACEHOLDERS_DOC,
    SCHEMA_VERSION,
    SOURCE_KINDS,
    Key,
    default_of,
    keys,
)
from rocmbuild.recipe.model import TABLES, Recipe
from rocmbuild.recipe.releases import Release
from rocmbuild.recipe.tables import Download, Floor, Option, Patch, Source, Variant

DOCS = Path("docs/recipes.md")
JSON_SCHEMA = Path("schemas/recipe.schema.json")
_DEFS = {Source: "source", Variant: "variant", Patch: "patch", Download: "download",
         Floor: "floor", Option: "option", Release: "release"}


# ----------------------------------------------------------------------------- JSON Schema


def json_schema() -> dict[str, Any]:
    """The recipe format as JSON Schema (draft 2020-12), for taplo / Even Better TOML."""
    root = _object(tree(Recipe), Recipe)
    for _, k in keys(Recipe):
        if k.type == "table" and k.item is Source:
            root["properties"][k.toml].update(_kind_rules())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rocmbuild recipe",
        "description": f"A rocmbuild recipe (schema_version = {SCHEMA_VERSION}). Generated from "
        "src/rocmbuild/recipe/model.py; the reference is docs/recipes.md.",
        **root,
        "$defs": {
            "source": {**_object(tree(Source), Source), **_kind_rules()},
            "variant": _object(tree(Variant), Variant),
            "patch": _object(tree(Patch), Patch),
            "download": _object(tree(Download), Download),
            "floor": _object(tree(Floor), Floor),
            "option": _object(tree(Option), Option),
            "release": _release(),
        },
    }


def _release() -> dict[str, Any]:
    """A release line: the recipe's keys that a line may set; its source as [source]."""
    out = _object(tree(Release), Release)
    out["properties"]["source"].update(_kind_rules())
    return out


def placeholder_pattern() -> str:
    """A regular expression for text whose {placeholders} are all known ({{ and }} escape)."""
    names = "|".join(PLACEHOLDERS)
    return rf"^([^{{}}]|\{{\{{|\}}\}}|\{{({names})\}})*$"


def table_doc(cls: type, loc: str) -> str:
    """The reference text of table ``loc``: TABLES, or the doc of the key whose table it is."""
    docs = [k.doc for _, k in keys(cls) if k.toml == loc and k.type == "table"]
    return TABLES.get(loc) or (docs[0] if docs else "")


def _object(node: Tree, cls: type, prefix: str = "") -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, child in node.items():
        if isinstance(child, dict):
            props[name] = _object(child, cls, f"{prefix}{name}.")
            if table_doc(cls, prefix + name):
                props[name]["description"] = table_doc(cls, prefix + name)
            if any(k.toml == prefix + name and k.required is not None for _, k in keys(cls)) \
                    or any(isinstance(c, Leaf) and c.key.required is not None and not c.key.kind
                           for c in child.values()):
                required.append(name)  # [source], or a table with a required key ([package])
            continue
        props[name] = _value(child)
        # A source kind's own keys are required only with that kind (see _kind_rules), except
        # inside the kind's table (sdist.url).
        if child.key.required is not None and (not child.key.kind or "." in child.key.toml):
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _kind_rules() -> dict[str, Any]:
    """Exactly one of git, sdist, path; and what each kind needs beside its key."""
    needs: dict[str, list[str]] = {}
    for _, k in keys(Source):
        if k.kind and k.required is not None and "." not in k.toml and k.toml != k.kind:
            needs.setdefault(k.kind, []).append(k.toml)
    return {"oneOf": [{"required": [kind]} for kind in SOURCE_KINDS], "dependentRequired": needs}


def _value(leaf: Leaf) -> dict[str, Any]:
    k = leaf.key
    out: dict[str, Any] = {"description": k.doc}
    if k.type in ("string", "strings"):
        item = _string(k)
        out.update(item if k.type == "string" else {"type": "array", "items": item})
    elif k.type == "integer":
        out["type"] = "integer"
        if k.const is not None:
            out["const"] = k.const
    elif k.type == "number":
        out["type"] = "number"
        if k.positive:
            out["exclusiveMinimum"] = 0
    elif k.type == "boolean":
        out["type"] = "boolean"
    elif k.type == "env":
        value: dict[str, Any] = {"type": "string"}
        if k.placeholders:
            value["pattern"] = placeholder_pattern()
        out.update(type="object", additionalProperties=value)
    elif k.type == "conditions":
        one = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        out.update(type="object", properties={c: one for c in k.allowed()},
                   additionalProperties=False)
    elif k.type in ("tables", "array"):
        assert k.item is not None
        ref = {"$ref": f"#/$defs/{_DEFS[k.item]}"}
        out.update({"type": "object", "additionalProperties": ref} if k.type == "tables"
                   else {"type": "array", "items": ref})
    default = _default(leaf)
    if default is not None:
        out["default"] = default
    if k.example:
        out["examples"] = [tomllib.loads(f"v = {k.example}")["v"]]
    return out


def _string(k: Key) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    patterns = [k.pattern] if k.pattern else []
    if k.placeholders:
        patterns.append(placeholder_pattern())
    allowed = k.allowed()
    if allowed and k.versioned:
        patterns.append("^(" + "|".join(allowed) + ")([<>=!~].*)?$")
    elif allowed:
        out["enum"] = list(allowed)
    if len(patterns) == 1:
        out["pattern"] = patterns[0]
    elif patterns:
        out["allOf"] = [{"pattern": p} for p in patterns]
    return out


def _default(leaf: Leaf) -> Any:
    """The TOML value used when the key is absent, or None when there is none to state."""
    if leaf.key.required is not None or leaf.key.default_text:
        return None
    f = next(f for f in dataclasses.fields(leaf.owner) if f.name == leaf.name)
    value = default_of(f)
    if value is dataclasses.MISSING or value is None:
        return None
    if leaf.key.type in ("env", "conditions"):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


# ----------------------------------------------------------------------------- docs


INTRO = """\
# Recipe reference

<!-- Generated by `python -m rocmbuild.recipe.schema` from src/rocmbuild/recipe/model.py.
     Do not edit: change the model and regenerate (a unit test fails when this file is stale). -->

A recipe (`recipes/<name>.toml`) says what to build and how: where the source comes from and how
it is pinned, which GPU architectures the project supports and how the target list reaches its
build, the build environment, variants, patches, and what validation checks in the wheel. It is
data only; `rocmbuild plan <recipe> --arch gfx942` renders it for this host without building, and
reports **every** problem in the file at once, one line each:

```
recipes/flash-attn.toml: build.env.GPU_ARCH: unknown variable (did you mean GPU_ARCHS?)
```

## Writing a recipe

Start from the smallest one, `recipes/hip-attention-probe.toml`, or from this:

```toml
#:schema ../schemas/recipe.schema.json
schema_version = 1

[package]
name = "demo"

[source]
git = "https://github.com/example/demo.git"
commit = "0123456789abcdef0123456789abcdef01234567"   # a full sha: tags are not pins

[arch]
supported = ["gfx90a", "gfx942"]
env = { GPU_ARCHS = "{archs}" }

[build]
mem_per_job_gb = 2.0
env = { MAX_JOBS = "{jobs}" }

[validate]
imports = ["demo"]
kernel = "none"
```

Pin every source (a full git commit, or an sdist's sha256), give every patch a sha256 and a
reason, and measure `mem_per_job_gb` (it sets MAX_JOBS) rather than copying a setup.py figure.

A recipe is committed, so it holds no credentials: a URL with a user name or password
(`https://user:token@host/...`) anywhere in a recipe string is refused when the recipe is loaded,
shown as `https://***@host/...`: in `git`, `sdist.url`, a download's `url` or a patch's `link`,
and as much in an argument (`build.pip_args = ["--index-url=https://user:token@host/simple"]`,
`build.cmake_args`), a requirement or an env value (`PIP_INDEX_URL`). Put them in `~/.netrc` (or the
file `NETRC` names) as `machine <host> login <user> password <token>`: fetch sends each host its
own entry (a redirect to another host gets that host's, never the first one's); git over https
reads `~/.netrc` too. An ssh login name (`ssh://git@host/...`) is not a secret and stays.

Recipe text is printable: a control character (ESC, CR, NUL, DEL, the C1 controls) or a
bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069) in any key or value is
refused, naming the key (`recipes/r.toml: build.env.CC: control character U+001B: ...`); a tab
or line break is allowed only in a patch's `reason` (a TOML multi-line string).

## Recipes kept outside this repository

A recipe may live anywhere (`rocmbuild build ~/recipes/mine.toml`, or a directory named by
`--recipes DIR` or on `ROCMBUILD_RECIPE_PATH`, searched in that order before the shipped
recipes). Every relative path in it resolves against **the recipe file's
directory**, whatever the current directory: a local git repository (`git = "../flash-attention"`,
`git = "file://../flash-attention"`; `/abs/path` and `file:///abs/path` as they are), a `path`
source and each patch `file`. A missing one is reported when the recipe is loaded.

- **Submodules per variant.** `source.submodules` lists what every variant fetches; a variant's
  `submodules` narrows it (`[]`: none). The shipped flash-attn Triton variant fetches no
  `csrc/composable_kernel` (the fork's setup.py skips CK with the Triton backend), so it builds
  from a mirror that lacks the submodule.
- **CMake projects in a subdirectory.** `build.source_dir = "examples/hip"` configures with
  `-S examples/hip`; the build directory stays at the tree's top and the rest of the tree stays
  available (`../common` from the CMakeLists.txt). `build.cmake_args` are appended to the configure
  command; `-S`, `-B`, `-G` and `-DCMAKE_INSTALL_PREFIX` are rocmbuild's and refused there.
  `rocmbuild plan` prints every command shell-quoted, ready to paste.
- **The local label.** `+rocmX.Y` is the ROCm the build compiles against: the ROCm torch's HIP,
  else the ROCm root the HIP compiler uses (a Debian HIP under /usr counts when the build compiles
  HIP); `target.rocm` only when nothing was detected. `rocmbuild.json` records which in
  `rocm_version_from` (`flag`, `torch`, `rocm-root` or `recipe`), and `rocmbuild audit` warns when a
  shared object links a `libamdhip64.so.N` whose major is not the label's.
  `target.rocm_from = "sdk"` (PyTorch itself) skips the torch in the building interpreter: the
  label names the SDK the build compiles against. `target.label_torch = true` (extensions bound to
  one torch's C++ ABI, like the flash-attn CK variant) adds the torch the build imported:
  `+rocm6.2.torch2.9.cxx11abitrue.gfx942` (upstream writes `+rocm64torch2.9cxx11abiTRUE`; PEP 440
  labels are lower case, so ours is already in pip's normalised form). A variant may switch it off
  (`variants.triton.label_torch = false`: pure Python). The label carries plain gfx names; target
  features (`--arch gfx942:sramecc+:xnack-`) stay in provenance, `{archs}` and the audit.
- **Validation requirements.** A runtime dependency the wheel does not declare (triton for the
  flash-attn Triton variant) goes in `[validate] requires` (recorded in the wheel as
  `validate_requires`) or on the command line, `rocmbuild validate --with triton`; both install
  from pip's configured index / find-links (pip.conf, `PIP_INDEX_URL`, `PIP_FIND_LINKS`). When the
  validation venv lacks such a module, validate exits 10 (the host's problem) and names it; the
  wheel is not copied to broken/.

## The build's environment

The build (the hipify command, `pip wheel`, cmake) does not inherit the environment rocmbuild runs
in. It sees the plan's env (build.env, arch.env, the variant's env; `rocmbuild plan` prints it)
on top of only the host variables that match this allow-list, or the recipe's `build.pass_env`:

""" + textwrap.fill(", ".join(f"`{p}`" for p in PASS_ENV), 100) + """

Everything else is withheld: an exported `FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE` does not turn a
`--variant ck` build into a Triton wheel, and `CFLAGS`, `CPATH`, `CC` or `HSA_*` do not change
what is compiled (a recipe that wants one says `pass_env = ["CFLAGS"]`; a name or a pattern with
one `*`). `rocmbuild plan` prints the names of the host variables that pass (`plan --json`:
`host_env.passed`, `host_env.allow`), never their values: a proxy or index URL may hold a
password. `build.log` lists the names withheld (`# env withheld: ...`) and the variables the
build sets, with a URL's user:password and the value of any `*TOKEN*`/`*PASSWORD*`/`*SECRET*`
variable masked. The validation venv gets the same allow-list plus pip's whole `PIP_*`
configuration, GPU selection (`HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
`CUDA_VISIBLE_DEVICES`, `HSA_*`, ...) and Triton's cache and ptxas paths, less `PYTHONPATH`; a
wheel's own `runtime_env` is set by the validator.

## Editor support

`schemas/recipe.schema.json` is a JSON Schema (draft 2020-12) of this format. Editors that use
[taplo](https://taplo.tamasfe.dev/) (Even Better TOML in VS Code, taplo's language server in
others) pick it up from a comment on the first line of the recipe, with a path relative to the
recipe file:

```toml
#:schema ../schemas/recipe.schema.json
```

The shipped recipes start with that line, so completion, hover text and type errors work there.
The schema checks keys, types, choices and placeholder names; rocmbuild itself also checks what a
schema cannot (patch files and checksums, a local source directory, patch conditions naming
variants and sources that exist).

## Placeholders

Keys marked *placeholders* may use `{name}`, filled in when the plan is rendered (write `{{` for a
literal brace):

""" + "\n".join(f"- `{{{p}}}`" for p in PLACEHOLDERS) + "\n\n" \
    + PLACEHOLDERS_DOC.replace("``", "`") + "\n"


def docs() -> str:
    """docs/recipes.md: every table and key with its type, default, example and reference text."""
    sections: list[str] = [INTRO, "## Tables and keys\n"]
    _doc_tables(tree(Recipe), Recipe, "", sections)
    return "\n".join(sections).rstrip() + "\n"


def _doc_tables(node: Tree, cls: type, table: str, sections: list[str],
                heading: str = "", text: str = "") -> None:
    leaves = [(name, c) for name, c in node.items() if isinstance(c, Leaf)
              and c.key.type not in ("tables", "array")]
    if leaves:
        title = heading or (f"[{table}]" if table else "top level")
        about = text or table_doc(cls, table)
        sections.append(f"### `{title}`\n" if table else f"### {title}\n")
        if about:
            sections.append(about.replace("``", "`") + "\n")
        sections.append("| key | type | default | example | description |")
        sections.append("| --- | --- | --- | --- | --- |")
        for name, leaf in leaves:
            assert isinstance(leaf, Leaf)
            sections.append(_row(name, leaf))
        sections.append("")
    for name, child in node.items():
        full = f"{table}.{name}" if table else name
        if isinstance(child, dict):
            _doc_tables(child, cls, full, sections)
        elif child.key.type == "tables":
            item = child.key.item
            assert item is not None
            if item is Source:  # the same keys as [source]: say so instead of repeating them
                sections.append(f"### `[{full}.<name>]`\n")
                sections.append(child.key.doc.replace("``", "`") + "\n")
                continue
            _doc_tables(tree(item), item, f"{full}.<name>", sections,
                        text=child.key.doc, heading=f"[{full}.<name>]")
        elif child.key.type == "array":
            item = child.key.item
            assert item is not None
            _doc_tables(tree(item), item, full, sections, text=child.key.doc,
                        heading=f"[[{full}]]")


def _row(name: str, leaf: Leaf) -> str:
    k = leaf.key
    default = k.default_text or (
        f"one of {', '.join(SOURCE_KINDS)} is required" if k.toml == k.kind
        else "required" if k.required is not None and not k.kind
        else f"required with `{k.kind}`" if k.required is not None
        else _toml_value(_default(leaf))
    )
    example = f"`{name} = {k.example}`" if k.example else ""
    cells = [f"`{name}`", _type_text(k), default, example, k.doc.replace("``", "`")]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _type_text(k: Key) -> str:
    base = {
        "string": "string",
        "integer": "integer",
        "number": "number",
        "boolean": "boolean",
        "strings": "list of strings",
        "env": "table of strings",
        "conditions": "table of string or list of strings",
    }[k.type]
    extra = []
    if k.positive:
        extra.append("> 0")
    if k.const is not None:
        extra.append(f"= {k.const}")
    allowed = k.allowed()
    if allowed:
        extra.append(("keys: " if k.type == "conditions" else "one of ")
                     + ", ".join(f"`{a}`" for a in allowed)
                     + (" (with an optional PEP 440 range: `>=6.2,<7.1`)" if k.versioned else ""))
    if k.placeholders:
        extra.append("placeholders")
    if k.kind:
        extra.append(f"`{k.kind}` sources")
    return base + (f" ({'; '.join(extra)})" if extra else "")


def _toml_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str | int | float):
        return f"`{json.dumps(value)}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{json.dumps(value)}`"
    return f"`{json.dumps(value)}`"


# ----------------------------------------------------------------------------- entry point


def outputs() -> dict[Path, str]:
    """The generated files (relative to the repository root) and their content."""
    return {
        DOCS: docs(),
        JSON_SCHEMA: json.dumps(json_schema(), indent=2) + "\n",
    }


def stale(root: Path) -> list[Path]:
    """The generated files under ``root`` that differ from what the model says."""
    return [p for p, text in outputs().items()
            if not (root / p).is_file() or (root / p).read_text(encoding="utf-8") != text]


def write(root: Path) -> list[Path]:
    """Write the generated files that are stale; returns them."""
    changed = stale(root)
    for p, text in outputs().items():
        if p in changed:
            (root / p).parent.mkdir(parents=True, exist_ok=True)
            (root / p).write_text(text, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rocmbuild.recipe.schema",
        description="Write docs/recipes.md and schemas/recipe.schema.json from the recipe model.",
    )
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when either file is stale")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the repository root (default: the current directory)")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale(args.root)
        for p in bad:
            print(f"{p} is stale: run `python -m rocmbuild.recipe.schema`", file=sys.stderr)
        return 1 if bad else 0
    for p in write(args.root):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
