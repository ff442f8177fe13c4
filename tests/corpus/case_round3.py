"""Round three (issue 34): the features added in the last round (stacks, release lines,
``depends``, saved hosts with ROCm facts, ``[tool.rocmbuild]``, nightly.toml, pending records)
hardened like the older ones, one class each:

- ``credentials``: a ``user:password@`` URL in any place of any file a user writes (a key, a
  table name, a ``when`` value, a value of the wrong type, a list item, a stack member, a
  nightly.toml URL, ``[tool.rocmbuild]``) or any flag: refused at load, and never shown
  (``untrusted.credentials`` and the redactor on every printed line);
- ``bignumbers``: integers past Python's 4,300-digit limit in any TOML file, and past 19
  digits in any JSON one: one error line, never a traceback;
- ``longnames``: a name that becomes a path (recipe, stack, member, dependency, flag's file)
  longer than the system allows: one line (``fsutil.name_problem``);
- ``notfiles``: a FIFO, a directory or a symlink where a config file belongs, refused at once
  (each case has a short timeout: a reader that waits on a FIFO fails it);
- ``blame``: the error names the file and key the user wrote (a stack member's key, the
  ``--host`` file's key, ``target.rocm``, ``releases.<n>.build.depends``), never a flag the
  user did not type;
- ``promises``: what cannot be delivered is refused before anything is built or published
  (two members of one project, a stack with no arch view to lock, a non-torch
  ``[torch]`` recipe, a dependency of the dependent's own project, ``--dependency`` in
  ``sbatch_args``).

Every case is cheap: a ``plan``, ``stack plan``, ``nightly --dry-run``, ``validate --baseline``
or a command that fails at start-up; tiny inline fixtures, no build.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.corpus import EXIT, Case

USAGE, RECIPE = EXIT["usage"], EXIT["recipe"]
S = "Hunter2Pw9"
"""The secret: it must appear in no output, file or file name."""
URL = f"https://user:{S}@example.invalid/simple"
SHOWN = "https://***@example.invalid"
FAST = 20.0
"""The timeout of a case whose input could hang a reader (a FIFO)."""
BIG = "9" * 5000
"""Past Python's int() limit of 4,300 digits (sys.get_int_max_str_digits())."""

TINY = ('schema_version = 1\n[package]\nname = "tinypkg"\n[source]\npath = "."\n[build]\n'
        'backend = "pip-wheel"\nmem_per_job_gb = 0.5\n')
"""The smallest recipe that plans: a local path source, pure Python."""
HOST = Path(__file__).parents[1] / "fixtures" / "hosts" / "mi300x-rocm7.2-torch2.13.json"


def _recipe(cid: str, extra: str, needle: str, klass: str, code: int = RECIPE,
            secret: str | None = None, base: str = TINY,
            files: dict[str, str | bytes] | None = None) -> Case:
    """``plan ./r.toml``: TINY with ``extra`` appended (a table after [build] opens its own)."""
    return Case(f"r3-{cid}", ("plan", "./r.toml", "--arch", "gfx942"), code, needle, klass,
                files={"r.toml": base + extra, **(files or {})}, secret=secret,
                writes_nothing=True)


def _stack(cid: str, text: str, needle: str, klass: str, code: int = RECIPE,
           secret: str | None = None, files: dict[str, str | bytes] | None = None,
           build: bool = False) -> Case:
    """``stack plan s.toml`` (or ``stack build``: it must refuse before building anything)."""
    argv = ("stack", "build" if build else "plan", "s.toml", "--arch", "gfx942",
            *(("--index", "{dir}/index") if build else ()))
    return Case(f"r3-{cid}", argv, code, needle, klass,
                files={"s.toml": "schema_version = 1\n" + text, "r.toml": TINY, **(files or {})},
                secret=secret, writes_nothing=True)


_M = '[[matrix]]\nrecipes = ["hip-attention-probe"]\narchs = ["gfx942"]\n'
_P = '[publish]\nindex = "index"\n'


def _nightly(cid: str, text: str, needle: str, klass: str, secret: str | None = None) -> Case:
    return Case(f"r3-{cid}", ("nightly", "--config", "{dir}/nightly.toml", "--dry-run"), USAGE,
                needle, klass, files={"nightly.toml": text}, secret=secret, writes_nothing=True)


def _tool(cid: str, table: str, needle: str, klass: str, secret: str | None = None,
          argv: tuple[str, ...] = ("plan", "hip-attention-probe", "--arch", "gfx942")) -> Case:
    """``[tool.rocmbuild]`` of ./pyproject.toml (read by every command)."""
    return Case(f"r3-{cid}", argv, USAGE, needle, klass,
                files={"pyproject.toml": "[project]\nname = \"x\"\n[tool.rocmbuild]\n" + table},
                secret=secret, writes_nothing=True)


def _host(cid: str, edit: dict[str, object], needle: str, klass: str,
          secret: str | None = None, raw: str | None = None) -> Case:
    """``plan --host h.json``: the fixture host with ``edit`` (dotted key -> value) applied."""
    data = json.loads(HOST.read_text())
    for dotted, value in edit.items():
        *parents, last = dotted.split(".")
        node = data["host"]
        for p in parents:
            node = node[p]
        node[last] = value
    return Case(f"r3-{cid}", ("plan", "hip-attention-probe", "--arch", "gfx942", "--host",
                              "{dir}/h.json"), USAGE, needle, klass,
                files={"h.json": raw if raw is not None else json.dumps(data)}, secret=secret,
                writes_nothing=True)


# ------------------------------------------------------------------------------ credentials

_CRED_RECIPE = {
    # a key's name, a table's name (every kind of named table), in a value of each shape
    "env-key-name": (f'[build.env]\n"{URL}" = "1"\n', "r.toml: build.env."),
    "env-list-value": (f'[build.env]\nPIP_INDEX_URL = ["{URL}"]\n', "r.toml: build.env.PIP_INDEX"),
    "env-table-value": (f'[build.env]\nPIP_INDEX_URL = {{ u = "{URL}" }}\n',
                        "r.toml: build.env.PIP_INDEX_URL.u"),
    "env-int-then-url": (f'[build.env]\nA = 1\nB = ["x", "{URL}"]\n', "r.toml: build.env.B[1]"),
    "release-table-name": (f'[releases."{URL}"]\n', "r.toml: releases.https://***@"),
    "option-table-name": (f'[options."{URL}"]\nenv = "X"\ndefault = "1"\n',
                          "r.toml: options.https://***@"),
    "floor-table-name": (f'[validate.floor."{URL}"]\nfwd_tflops = 1.0\n',
                         "r.toml: validate.floor.https://***@"),
    "variant-table-name": (f'[variants."{URL}"]\n', "r.toml: variants.https://***@"),
    "alternative-name": (f'[source.alternatives."{URL}"]\npath = "."\n',
                         "r.toml: source.alternatives.https://***@"),
    "unknown-build-key": (f'"{URL}" = 1\n', "r.toml: build.https://***@"),
    "unknown-key-value": (f'colour = "{URL}"\n', "r.toml: build.colour"),
    "description-list": (f'[package.x]\ny = [["{URL}"]]\n', "r.toml: package.x.y[0][0]"),
    "patch-when-value": (f'[[patches]]\nfile = "p.patch"\nreason = "r"\nwhen = {{ variant = '
                         f'"{URL}" }}\n', "r.toml: patches[0].when.variant"),
    "patch-when-list": (f'[[patches]]\nfile = "p.patch"\nreason = "r"\nwhen = {{ source = '
                        f'["default", "{URL}"] }}\n', "r.toml: patches[0].when.source[1]"),
    "download-when": (f'[[downloads]]\nname = "d"\nurl = "https://h.invalid/d"\n'
                      f'sha256 = "{"0" * 64}"\nenv = "D"\nwhen = {{ arch = "{URL}" }}\n',
                      "r.toml: downloads[0].when.arch"),
    "release-when-like": (f'[releases.a]\nwhen = "{URL}"\n', "r.toml: releases.a.when"),
    "cmake-args-nested": (f'cmake_args = [["-D", "{URL}"]]\n', "r.toml: build.cmake_args[0][1]"),
    "pip-args-int-list": (f'pip_args = [1, "{URL}"]\n', "r.toml: build.pip_args[1]"),
    "password-with-at": (f'pip_args = ["https://u:{S}@x@example.invalid/s"]\n',
                         "r.toml: build.pip_args[0]"),
    "percent-encoded": (f'pip_args = ["https://u:{S}%40@example.invalid/s"]\n',
                        "r.toml: build.pip_args[0]"),
    "git-plus-https": (f'pip_args = ["git+https://u:{S}@example.invalid/r.git"]\n',
                       "r.toml: build.pip_args[0]"),
    "ssh-password": (f'pip_args = ["ssh://git:{S}@example.invalid/r"]\n',
                     "r.toml: build.pip_args[0]"),
    "url-inside-text": (f'[variants.v]\ndescription = "mirror at {URL} for us"\n',
                        "r.toml: variants.v.description"),
    "second-url": (f'pip_args = ["--extra-index-url https://a.invalid/s {URL}"]\n',
                   "r.toml: build.pip_args[0]"),
    "user-only": (f'[build.env]\nPIP_INDEX_URL = "https://{S}@example.invalid/s"\n',
                  "r.toml: build.env.PIP_INDEX_URL"),
    "depends-entry": (f'depends = ["{URL}"]\n', "r.toml: build.depends[0]"),
    "host-requires": (f'host_requires = ["{URL}"]\n', "r.toml: build.host_requires[0]"),
    "bool-key-table": (f'[build.x."{URL}"]\n', "r.toml: build.x.https://***@"),
}

_CRED_STACK = {
    "member-path": (f'[[members]]\nrecipe = "{URL}/r.toml"\n', "s.toml: members[0].recipe"),
    "member-name-key": (f'[[members]]\nrecipe = "r.toml"\n"{URL}" = 1\n',
                        "s.toml: members[0].https://***@"),
    "member-option": (f'[[members]]\nrecipe = "r.toml"\noptions = {{ o = "{URL}" }}\n',
                      "s.toml: members[0].options.o"),
    "member-option-name": (f'[[members]]\nrecipe = "r.toml"\noptions = {{ "{URL}" = "1" }}\n',
                           "s.toml: members[0].options.https://***@"),
    "member-variant-list": (f'[[members]]\nrecipe = "r.toml"\nvariant = ["{URL}"]\n',
                            "s.toml: members[0].variant[0]"),
    "description": (f'description = "from {URL}"\n[[members]]\nrecipe = "r.toml"\n',
                    "s.toml: description"),
    "torch-requires": (f'[torch]\nrequires = "{URL}"\n[[members]]\nrecipe = "r.toml"\n',
                       "s.toml: torch.requires"),
    "torch-table-name": (f'[torch."{URL}"]\n[[members]]\nrecipe = "r.toml"\n',
                         "s.toml: torch.https://***@"),
    "top-table-name": (f'["{URL}"]\n[[members]]\nrecipe = "r.toml"\n', "s.toml: https://***@"),
    "members-not-table": (f'members = ["{URL}"]\n', "s.toml: members[0]"),
}

_CRED_NIGHTLY = {
    "pypi": (f'pypi = "{URL}"\n' + _M + _P, "nightly.toml: pypi"),
    "publish-extra-key": (_M + _P + f'pypi = "{URL}"\n', "nightly.toml: publish.pypi"),
    "matrix-key": (_M + f'"{URL}" = 1\n' + _P, "nightly.toml: matrix[0].https://***@"),
    "matrix-recipe": (_M.replace('"hip-attention-probe"', f'"{URL}"') + _P,
                      "nightly.toml: matrix[0].recipes[0]"),
    "matrix-variants": (_M + f'variants = ["{URL}"]\n' + _P, "nightly.toml: matrix[0].variants[0]"),
    "matrix-options": (_M + f'options = {{ o = "{URL}" }}\n' + _P,
                       "nightly.toml: matrix[0].options.o"),
    "workdir": (f'workdir = "{URL}"\n' + _M + _P, "nightly.toml: workdir"),
    "reports-dir": (_M + _P + f'[reports]\ndir = "{URL}"\n', "nightly.toml: reports.dir"),
    "publish-stage": (_M + '[publish]\nindex = "index"\n' + f'stage = "{URL}"\n',
                      "nightly.toml: publish.stage"),
    "sbatch-args": (_M + _P + f'[executor]\nsbatch_args = ["--comment={URL}"]\n',
                    "nightly.toml: executor.sbatch_args[0]"),
    "table-name": (_M + _P + f'["{URL}"]\n', "nightly.toml: https://***@"),
    "notify-table-key": (_M + _P + f'[notify]\n"{URL}" = "x"\n', "nightly.toml: notify.https://"),
}

_CRED_TOOL = {
    "index-setting": (f'workdir = "{URL}"\n', "pyproject.toml: tool.rocmbuild.workdir"),
    "key-name": (f'"{URL}" = "x"\n', "pyproject.toml: tool.rocmbuild.https://***@"),
    "list-value": (f'arch = ["{URL}"]\n', "pyproject.toml: tool.rocmbuild.arch[0]"),
    "table-value": (f'jobs = {{ a = "{URL}" }}\n', "pyproject.toml: tool.rocmbuild.jobs.a"),
}

# flags and saved hosts: the values are refused elsewhere, and the redactor on every printed
# line keeps the secret out of the message that echoes them
_CRED_FLAGS = [
    Case("r3-cred-flag-variant", ("plan", "hip-attention-probe", "--arch", "gfx942", "--variant",
                                  URL), USAGE, "--variant", "credentials", secret=S,
         writes_nothing=True),
    Case("r3-cred-flag-release", ("plan", "hip-attention-probe", "--arch", "gfx942", "--release",
                                  URL), USAGE, "--release", "credentials", secret=S,
         writes_nothing=True),
    Case("r3-cred-flag-source", ("plan", "hip-attention-probe", "--arch", "gfx942", "--source",
                                 URL), USAGE, "--source", "credentials", secret=S,
         writes_nothing=True),
    Case("r3-cred-flag-opt", ("plan", "hip-attention-probe", "--arch", "gfx942", "--opt",
                              f"hip-attention-probe.x={URL}"), USAGE, "--opt", "credentials",
         secret=S, writes_nothing=True),
    Case("r3-cred-flag-recipe-name", ("plan", URL, "--arch", "gfx942"), USAGE, "recipe",
         "credentials", secret=S, writes_nothing=True),
    Case("r3-cred-flag-stack-name", ("stack", "plan", URL, "--arch", "gfx942"), USAGE, "stack",
         "credentials", secret=S, writes_nothing=True),
    Case("r3-cred-env-variant", ("plan", "hip-attention-probe", "--arch", "gfx942"), USAGE,
         "ROCMBUILD_JOBS", "credentials", env={"ROCMBUILD_JOBS": URL}, secret=S,
         writes_nothing=True),
    _host("cred-host-torch-version", {"torch.version": URL}, "torch.version", "credentials", S),
    _host("cred-host-rocm-version", {"rocm_root.version": URL}, "rocm_root.version",
          "credentials", S),
    _host("cred-host-dist-version", {"dists.pip": URL}, "dists.pip", "credentials", S),
    _host("cred-host-gpus", {"gpus": [1, URL]}, "gpus", "credentials", S),
    _host("cred-host-key", {}, "h.json", "credentials", S,
          raw=json.dumps({"schema": URL, "host": {}})),
]

CREDENTIALS = [
    *(_recipe(f"cred-recipe-{k}", extra, needle, "credentials", secret=S,
              files={"p.patch": "--- a/x\n+++ b/x\n"})
      for k, (extra, needle) in _CRED_RECIPE.items()),
    *(_stack(f"cred-stack-{k}", text, needle, "credentials", secret=S)
      for k, (text, needle) in _CRED_STACK.items()),
    *(_nightly(f"cred-nightly-{k}", text, needle, "credentials", secret=S)
      for k, (text, needle) in _CRED_NIGHTLY.items()),
    *(_tool(f"cred-tool-{k}", table, needle, "credentials", secret=S)
      for k, (table, needle) in _CRED_TOOL.items()),
    *_CRED_FLAGS,
]

# ------------------------------------------------------------------------------ big numbers

_BIG_RECIPE = {
    "mem": (TINY.replace("mem_per_job_gb = 0.5", f"mem_per_job_gb = {BIG}"), "r.toml"),
    "schema": (TINY.replace("schema_version = 1", f"schema_version = {BIG}"), "r.toml"),
    "negative": (TINY + f"disk_gb = -{BIG}\n", "r.toml"),
    "in-list": (TINY + f"pip_args = [{BIG}]\n", "r.toml"),
    "in-table": (TINY + f'[variants.v]\nmem_per_job_gb = {BIG}\n', "r.toml"),
    "release-line": (TINY + f'[releases.a.build]\nmem_per_job_gb = {BIG}\n', "r.toml"),
    "floor": (TINY + f'[validate.floor.gfx942]\nfwd_tflops = {BIG}\n', "r.toml"),
    "underscored": (TINY + "disk_gb = " + "_".join(["999"] * 1500) + "\n", "r.toml"),
    "hex": (TINY + "link_units_per_arch = 0x" + "f" * 5000 + "\n", "r.toml: build.link_units"),
    "float-digits": (TINY + f"disk_gb = {BIG}.5\n", "r.toml: build.disk_gb"),
    "float-exponent": (TINY + "disk_gb = 1e99999\n", "r.toml: build.disk_gb"),
}

_BIG_STACK = {
    "schema": ("[[members]]\nrecipe = \"r.toml\"\n", f"schema_version = {BIG}\n"),
    "option": (f'[[members]]\nrecipe = "r.toml"\noptions = {{ o = {BIG} }}\n', ""),
    "description": (f"description = {BIG}\n[[members]]\nrecipe = \"r.toml\"\n", ""),
    "member-variant": (f'[[members]]\nrecipe = "r.toml"\nvariant = {BIG}\n', ""),
}

_BIG_NIGHTLY = {
    "keep-days": _M + _P + f"[cache]\nkeep_days = {BIG}\n",
    "history": _M + _P + f"[reports]\nhistory = {BIG}\n",
    "timeout": _M + f"timeout = {BIG}\n" + _P,
    "top": _M + _P + f"colour = {BIG}\n",
    "hex-timeout": _M + "timeout = 0x" + "f" * 5000 + "\n" + _P,
}

_BIG_TOOL = {
    "jobs": f"jobs = {BIG}\n",
    "jobs-negative": f"jobs = -{BIG}\n",
    "unknown-key": f"colour = {BIG}\n",
    "in-list": f"arch = [{BIG}]\n",
    "hex-jobs": "jobs = 0x" + "f" * 5000 + "\n",
    "octal-jobs": "jobs = 0o" + "7" * 5000 + "\n",
    "float-jobs": f"jobs = {BIG}.0\n",
}

BIGNUMBERS = [
    *(_recipe(f"big-recipe-{k}", "", needle, "bignumbers", base=text)
      for k, (text, needle) in _BIG_RECIPE.items()),
    *(Case(f"r3-big-stack-{k}", ("stack", "plan", "s.toml", "--arch", "gfx942"), RECIPE,
           "s.toml", "bignumbers",
           files={"s.toml": (head or "schema_version = 1\n") + text, "r.toml": TINY},
           writes_nothing=True)
      for k, (text, head) in _BIG_STACK.items()),
    *(_nightly(f"big-nightly-{k}", text, "nightly.toml", "bignumbers")
      for k, text in _BIG_NIGHTLY.items()),
    *(_tool(f"big-tool-{k}", table, "pyproject.toml", "bignumbers")
      for k, table in _BIG_TOOL.items()),
    _tool("big-tool-jobs-build", f"jobs = {BIG}\n", "pyproject.toml", "bignumbers",
          argv=("build", "hip-attention-probe", "--arch", "gfx942")),
    _tool("big-tool-jobs-validate", f"jobs = {BIG}\n", "pyproject.toml", "bignumbers",
          argv=("validate", "{wheel}", "--no-kernels")),
    _host("big-host-cpus", {}, "h.json", "bignumbers",
          raw=HOST.read_text().replace('"cpus": 128', f'"cpus": {BIG}')),
    _host("big-host-memory", {}, "h.json", "bignumbers",
          raw=HOST.read_text().replace('"usable_bytes": 1099511627776',
                                       f'"usable_bytes": {BIG}')),
    _host("big-host-negative", {}, "h.json", "bignumbers",
          raw=HOST.read_text().replace('"cpus": 128', f'"cpus": -{BIG}')),
    Case("r3-big-baseline", ("validate", "{wheel}", "--no-kernels", "--baseline", "{dir}/b.json"),
         USAGE, "b.json", "bignumbers", files={"b.json": '{"kernel": "sdpa", "status": '
                                                       f'"passed", "throughput": [], "x": {BIG}}}'},
         writes_nothing=True),
]

# ------------------------------------------------------------------------------ long names

_LONG = "a" * 300
_DEEP = "/".join(["d" * 200] * 25)  # each part fits, the whole does not (5,000 bytes)

LONGNAMES = [
    Case("r3-long-recipe-name", ("plan", _LONG, "--arch", "gfx942"), USAGE, "recipe 'aaaa",
         "longnames", writes_nothing=True),
    Case("r3-long-recipe-file", ("plan", f"{_LONG}.toml", "--arch", "gfx942"), USAGE,
         "a file name is at most 255", "longnames", writes_nothing=True),
    Case("r3-long-recipe-path", ("plan", f"/{_DEEP}/r.toml", "--arch", "gfx942"), USAGE,
         "a path is at most 4095", "longnames", writes_nothing=True),
    Case("r3-long-recipe-build", ("build", _LONG, "--arch", "gfx942"), USAGE, "recipe 'aaaa",
         "longnames", writes_nothing=True),
    Case("r3-long-recipe-doctor", ("doctor", "--recipe", _LONG), USAGE, "recipe 'aaaa",
         "longnames", writes_nothing=True),
    Case("r3-long-stack-name", ("stack", "plan", _LONG, "--arch", "gfx942"), USAGE,
         "stack 'aaaa", "longnames", writes_nothing=True),
    Case("r3-long-stack-file", ("stack", "plan", f"{_LONG}.toml", "--arch", "gfx942"), USAGE,
         "a file name is at most 255", "longnames", writes_nothing=True),
    Case("r3-long-stack-build", ("stack", "build", f"/{_DEEP}.toml", "--arch", "gfx942"),
         USAGE, "a path is at most 4095", "longnames", writes_nothing=True),
    _stack("long-member-file", f'[[members]]\nrecipe = "{"b" * 260}.toml"\n',
           "s.toml: members[0].recipe: 'bbbb", "longnames"),
    _stack("long-member-dirs", f'[[members]]\nrecipe = "{"/".join(["c" * 250] * 2)}.toml"\n',
           "s.toml: members[0].recipe", "longnames"),
    _stack("long-torch-recipe", f'[torch]\nfrom = "recipe"\nrecipe = "{"t" * 280}.toml"\n'
           '[[members]]\nrecipe = "r.toml"\n', "s.toml: torch.recipe", "longnames"),
    _recipe("long-depends", 'depends = ["' + "e" * 260 + '"]\n', "r.toml: build.depends[0]",
            "longnames"),
    _recipe("long-variant-depends", '[variants.v]\ndepends = ["' + "f" * 300 + '"]\n',
            "r.toml: variants.v.depends[0]", "longnames"),
    _recipe("long-release-depends", '[releases.a.build]\ndepends = ["' + "g" * 300 + '"]\n',
            "r.toml: releases.a.build.depends[0]", "longnames"),
    _nightly("long-matrix-recipe", _M.replace("hip-attention-probe", "h" * 300) + _P,
             "nightly.toml: matrix[0].recipes", "longnames"),
    Case("r3-long-host-file", ("plan", "hip-attention-probe", "--arch", "gfx942", "--host",
                               f"{_LONG}.json"), USAGE, "--host", "longnames",
         writes_nothing=True),
    Case("r3-long-nightly-config", ("nightly", "--config", f"{_LONG}.toml", "--dry-run"), USAGE,
         "--config", "longnames", writes_nothing=True),
    Case("r3-long-recipes-dir", ("--recipes", _LONG, "plan", "hip-attention-probe", "--arch",
                                 "gfx942"), USAGE, "--recipes", "longnames",
         writes_nothing=True),
    Case("r3-long-recipe-path-var", ("plan", "hip-attention-probe", "--arch", "gfx942"), USAGE,
         "ROCMBUILD_RECIPE_PATH", "longnames", env={"ROCMBUILD_RECIPE_PATH": _LONG},
         writes_nothing=True),
    Case("r3-long-baseline", ("validate", "{wheel}", "--no-kernels", "--baseline",
                              f"{_LONG}.json"), USAGE, "--baseline", "longnames",
         writes_nothing=True),
]

# ------------------------------------------------------------------------------ not files


def _notfile(cid: str, argv: tuple[str, ...], needle: str, *, fifos: tuple[str, ...] = (),
             links: dict[str, str] | None = None, files: dict[str, str | bytes] | None = None,
             code: int = USAGE) -> Case:
    return Case(f"r3-{cid}", argv, code, needle, "notfiles", files=files or {}, fifos=fifos,
                links=links or {}, writes_nothing=True, timeout=FAST)


_PLAN = ("plan", "hip-attention-probe", "--arch", "gfx942")
NOTFILES = [
    # ./pyproject.toml: read by every command, and by the no-op memo before anything else
    _notfile("pyproject-fifo-plan", _PLAN, "pyproject.toml", fifos=("pyproject.toml",)),
    _notfile("pyproject-fifo-build", ("build", "hip-attention-probe", "--arch", "gfx942"),
             "pyproject.toml", fifos=("pyproject.toml",)),
    _notfile("pyproject-fifo-validate", ("validate", "{wheel}", "--no-kernels"),
             "pyproject.toml", fifos=("pyproject.toml",)),
    _notfile("pyproject-fifo-doctor", ("doctor", "--recipe", "hip-attention-probe"),
             "pyproject.toml", fifos=("pyproject.toml",)),
    _notfile("pyproject-fifo-cache", ("cache", "prune", "--keep-days", "1"), "pyproject.toml",
             fifos=("pyproject.toml",)),
    _notfile("pyproject-fifo-workdir-flag", ("--cache-dir", "{dir}/c", "build",
                                             "hip-attention-probe", "--arch", "gfx942"),
             "pyproject.toml", fifos=("pyproject.toml",)),
    Case("r3-pyproject-fifo-jobs-var", _PLAN, USAGE, "pyproject.toml", "notfiles",
         env={"ROCMBUILD_JOBS": "2", "ROCMBUILD_WORKDIR": "{dir}/w"}, fifos=("pyproject.toml",),
         writes_nothing=True, timeout=FAST),
    _notfile("pyproject-directory", _PLAN, "pyproject.toml", files={"pyproject.toml/x": "x"}),
    _notfile("pyproject-symlink", _PLAN, "pyproject.toml",
             files={"real.toml": '[tool.rocmbuild]\njobs = 2\n'},
             links={"pyproject.toml": "{dir}/real.toml"}),
    _notfile("pyproject-dangling-symlink", _PLAN, "pyproject.toml",
             links={"pyproject.toml": "{dir}/absent.toml"}),
    _notfile("pyproject-fifo-symlink", _PLAN, "pyproject.toml", fifos=("p.fifo",),
             links={"pyproject.toml": "{dir}/p.fifo"}),
    _notfile("pyproject-dev-zero", _PLAN, "pyproject.toml", links={"pyproject.toml": "/dev/zero"}),
    # stack files, recipes, nightly.toml, saved hosts
    _notfile("stack-fifo", ("stack", "plan", "s.toml", "--arch", "gfx942"), "s.toml",
             fifos=("s.toml",), code=RECIPE),
    _notfile("stack-symlink", ("stack", "plan", "s.toml", "--arch", "gfx942"), "s.toml",
             files={"real.toml": 'schema_version = 1\n[[members]]\nrecipe = "flash-attn"\n'},
             links={"s.toml": "{dir}/real.toml"}, code=RECIPE),
    _notfile("stack-member-fifo", ("stack", "plan", "s.toml", "--arch", "gfx942"),
             "s.toml: members[0].recipe", files={"s.toml": 'schema_version = 1\n[[members]]\n'
                                                'recipe = "m.toml"\n'},
             fifos=("m.toml",), code=RECIPE),
    _notfile("stack-member-directory", ("stack", "plan", "s.toml", "--arch", "gfx942"),
             "s.toml: members[0].recipe", files={"s.toml": 'schema_version = 1\n[[members]]\n'
                                                'recipe = "m.toml"\n', "m.toml/x": "x"},
             code=RECIPE),
    _notfile("nightly-fifo", ("nightly", "--config", "{dir}/n.toml", "--dry-run"), "--config",
             fifos=("n.toml",)),
    _notfile("host-fifo", (*_PLAN, "--host", "{dir}/h.json"), "--host", fifos=("h.json",)),
    _notfile("host-directory", (*_PLAN, "--host", "{dir}/h.json"), "--host",
             files={"h.json/x": "x"}),
    _notfile("recipe-fifo-by-path", ("plan", "./r.toml", "--arch", "gfx942"), "r.toml",
             fifos=("r.toml",)),
    _notfile("recipe-symlink", ("plan", "./r.toml", "--arch", "gfx942"),
             "r.toml: cannot read: is a symbolic link", files={"real.toml": TINY},
             links={"r.toml": "{dir}/real.toml"}, code=RECIPE),
    _notfile("recipe-dependency-symlink", ("plan", "./r.toml", "--arch", "gfx942"),
             "d.toml: cannot read: is a symbolic link",
             files={"r.toml": TINY + 'depends = ["d"]\n',
                    "real.toml": TINY.replace("tinypkg", "other")},
             links={"d.toml": "{dir}/real.toml"}, code=RECIPE),
    _notfile("recipe-in-recipes-dir-symlink", ("--recipes", "{dir}/rs", "plan", "mine", "--arch",
                                               "gfx942"),
             "mine.toml: cannot read: is a symbolic link", files={"real.toml": TINY},
             links={"rs/mine.toml": "{dir}/real.toml"}, code=RECIPE),
]

# ------------------------------------------------------------------------------ blame

_FA = '[[members]]\nrecipe = "flash-attn"\n'
BLAME = [
    # a stack member's choices are named by the stack file's key, never --opt / --variant
    _stack("blame-member-option-value", _FA + 'options = { opt_dim = "7" }\n',
           "s.toml: members[0].options.opt_dim: '7'", "blame", code=USAGE),
    _stack("blame-member-option-value-second", '[[members]]\nrecipe = "r.toml"\n' + _FA
           + 'options = { opt_dim = "33" }\n', "s.toml: members[1].options.opt_dim", "blame",
           code=USAGE),
    _stack("blame-member-option-not-honoured", _FA + 'variant = "triton"\n'
           'options = { opt_dim = "128" }\n', "s.toml: members[0].options", "blame",
           code=USAGE),
    _stack("blame-member-source-not-on-line", _FA + 'release = "main"\nsource = "pypi"\n',
           "s.toml: members[0].source: flash-attn has no source 'pypi'", "blame", code=USAGE),
    _stack("blame-torch-member-option", '[torch]\nfrom = "recipe"\nrecipe = "pytorch"\n'
           'options = { nope = "1" }\n[[members]]\nrecipe = "r.toml"\n',
           "s.toml: torch.options.nope", "blame"),
    # a saved host's versions: the --host file and key, not a toolchain error or --rocm-version
    _host("blame-host-torch-version", {"torch.version": "banana"},
          "torch.version: 'banana' is not a version", "blame"),
    _host("blame-host-torch-rocm", {"torch.rocm": "7.x"}, "torch.rocm: '7.x'", "blame"),
    _host("blame-host-torch-hip", {"torch.hip": "seven"}, "torch.hip: 'seven'", "blame"),
    _host("blame-host-root-version", {"rocm_root.version": "7"}, "rocm_root.version: '7'",
          "blame"),
    _host("blame-host-root-hip", {"rocm_root.hip_version": "hip"},
          "rocm_root.hip_version: 'hip'", "blame"),
    _host("blame-host-dist", {"dists.ninja": "latest"}, "dists.ninja: 'latest'", "blame"),
    _host("blame-host-torch-cuda", {"torch.cuda": "twelve"}, "torch.cuda: 'twelve'", "blame"),
    # a recipe's ROCm default is a version, checked when the recipe loads
    *(_recipe(f"blame-target-rocm-{k}", f'[target]\nrocm = "{v}"\n', "r.toml: target.rocm",
              "blame")
      for k, v in {"banana": "banana", "empty": "", "major-only": "6", "letter": "6.x",
                   "prefix": "v6.2", "five-parts": "6.2.1.0.1", "space": "6.2 "}.items()),
    _recipe("blame-target-rocm-in-line", '[releases.a.target]\nrocm = "next"\n',
            "r.toml: releases.a.target.rocm", "blame"),
    # a line's dependency is named as the file holds it
    _recipe("blame-release-build-depends", '[releases.a.build]\ndepends = ["nosuch"]\n',
            "r.toml: releases.a.build.depends[0]: unknown recipe 'nosuch'", "blame"),
    _recipe("blame-variant-depends", '[variants.v]\ndepends = ["nosuch"]\n',
            "r.toml: variants.v.depends[0]: unknown recipe 'nosuch'", "blame"),
    # '===' is a string match no host version makes: refused where it is written
    *(_recipe(f"blame-arbitrary-equality-{k}", f'host_requires = ["{v}"]\n',
              "r.toml: build.host_requires", "blame")
      for k, v in {"torch": "torch===2.13.0+cpu", "rocm-torch": "rocm-torch===2.13",
                   "sdk": "rocm-sdk===7.2.0", "mixed": "torch>=2.9,===2.13.0"}.items()),
    _recipe("blame-arbitrary-equality-line", '[releases.a.build]\nhost_requires = '
            '["torch===2.13.0"]\n', "r.toml: releases.a.build.host_requires", "blame"),
]

# ------------------------------------------------------------------------------ promises

_TORCHLIKE = TINY.replace('name = "tinypkg"', 'name = "{name}"')
PROMISES = [
    # two members of one project: no lock installs both (names equal once normalized)
    *(_stack(f"promise-same-project-{k}", '[[members]]\nrecipe = "r.toml"\n[[members]]\n'
             'recipe = "r2.toml"\n', "s.toml: members[1].recipe", "promises",
             files={"r.toml": _TORCHLIKE.replace("{name}", mine),
                    "r2.toml": _TORCHLIKE.replace("{name}", theirs)})
      for k, (mine, theirs) in {"same": ("tinypkg", "tinypkg"), "case": ("tinypkg", "TinyPkg"),
                                "underscore": ("tiny-pkg", "tiny_pkg"),
                                "dots": ("tiny-pkg", "Tiny.Pkg"),
                                "runs": ("tiny-pkg", "tiny__-pkg")}.items()),
    _stack("promise-same-project-build", '[[members]]\nrecipe = "r.toml"\n[[members]]\n'
           'recipe = "r2.toml"\n', "s.toml: members[1].recipe", "promises",
           files={"r2.toml": TINY}, build=True),
    _stack("promise-same-project-as-torch", '[torch]\nfrom = "recipe"\nrecipe = "t.toml"\n'
           '[[members]]\nrecipe = "t2.toml"\n', "s.toml: members[0].recipe", "promises",
           files={"t.toml": _TORCHLIKE.replace("{name}", "torch"),
                  "t2.toml": _TORCHLIKE.replace("{name}", "Torch")}),
    # the stack's torch must be torch
    _stack("promise-torch-not-torch", '[torch]\nfrom = "recipe"\nrecipe = "r.toml"\n'
           '[[members]]\nrecipe = "flash-attn"\n', "s.toml: torch.recipe: 'r' builds "
           "'tinypkg', not torch", "promises"),
    _stack("promise-torch-not-torch-build", '[torch]\nfrom = "recipe"\nrecipe = "r.toml"\n'
           '[[members]]\nrecipe = "flash-attn"\n', "s.toml: torch.recipe", "promises",
           build=True),
    _stack("promise-torch-named-torchvision", '[torch]\nfrom = "recipe"\nrecipe = "t.toml"\n'
           '[[members]]\nrecipe = "r.toml"\n', "s.toml: torch.recipe: 't' builds 'torchvision'",
           "promises", files={"t.toml": _TORCHLIKE.replace("{name}", "torchvision")}),
    # no arch view: nothing could be locked
    _stack("promise-no-arch-view", '[[members]]\nrecipe = "n.toml"\n',
           "s.toml: members: no member has device code", "promises",
           files={"n.toml": TINY + 'rocm_runtime = "none"\n'}),
    _stack("promise-no-arch-view-two", '[[members]]\nrecipe = "n.toml"\n[[members]]\n'
           'recipe = "n2.toml"\n', "s.toml: members: no member has device code", "promises",
           files={"n.toml": TINY + 'rocm_runtime = "none"\n',
                  "n2.toml": _TORCHLIKE.replace("{name}", "other") + 'rocm_runtime = "none"\n'}),
    _stack("promise-no-arch-view-build", '[[members]]\nrecipe = "n.toml"\n',
           "s.toml: members: no member has device code", "promises",
           files={"n.toml": TINY + 'rocm_runtime = "none"\n'}, build=True),
    # a dependency of the dependent's own project would overwrite its wheel
    _recipe("promise-depends-same-project", 'depends = ["r2"]\n',
            "r.toml: build.depends[0]: 'r2' builds 'tinypkg'", "promises",
            files={"r2.toml": TINY}),
    _recipe("promise-depends-same-project-normalized", 'depends = ["r2"]\n',
            "r.toml: build.depends[0]: 'r2' builds 'Tiny.Pkg'", "promises",
            base=TINY.replace('"tinypkg"', '"tiny-pkg"'),
            files={"r2.toml": _TORCHLIKE.replace("{name}", "Tiny.Pkg")}),
    _recipe("promise-depends-same-project-line", '[releases.a.build]\ndepends = ["r2"]\n',
            "r.toml: releases.a.build.depends[0]: 'r2' builds", "promises",
            files={"r2.toml": TINY}),
    _recipe("promise-depends-same-project-variant", '[variants.v]\ndepends = ["r2"]\n',
            "r.toml: variants.v.depends[0]: 'r2' builds", "promises", files={"r2.toml": TINY}),
    # the validation array waits for its build array through --dependency: never undone
    *(_nightly(f"promise-sbatch-{k}", _M + _P + f"[executor]\nsbatch_args = {v}\n",
               "nightly.toml: executor.sbatch_args: sbatch reads", "promises")
      for k, v in {"dependency": '["--dependency=afterok:1"]', "prefix": '["--dep=singleton"]',
                   "short": '["-dafterany:7"]', "bundled": '["-vd", "after:1"]',
                   "separate": '["--dependency", "afterok:1"]',
                   "second": '["--mem=1G", "--depend=afternotok:3"]'}.items()),
]

CASES = [*CREDENTIALS, *BIGNUMBERS, *LONGNAMES, *NOTFILES, *BLAME, *PROMISES]
