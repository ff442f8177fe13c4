"""Recipe strings: credentials in a recipe's URLs and control characters in any of
its strings, refused when the recipe is loaded, before anything is fetched or built.

"leaks": a URL with a user name or password (``[[downloads]]`` url, ``source.git``,
``sdist.url`` of [source], an alternative or a release line, a patch's ``link``; and anywhere
in any other recipe string: ``build.pip_args`` ``--index-url=...``, a cmake argument, a
requirement, an env value such as PIP_INDEX_URL): one recipe error naming the file and key,
the URL shown as ``https://***@host/...``; the secret is in no output and no file the run
writes. The hint is ~/.netrc, which the downloader reads (tests in
tests/integration/test_download_netrc.py against a server demanding Basic auth).

"inputs": a control character (C0, DEL, C1, a bidi override or isolate) in any recipe string,
key or table name: accepted and shown escaped before, now one error naming the file and key
(``recipes/r.toml: build.env.CC: control character U+001B: ...``). A patch's reason may span
lines (tab and line feed), nothing else. Stack files, nightly.toml and ``[tool.rocmbuild]`` in
./pyproject.toml (that table only: the rest of the file is the project's own) are read through
the same check (``untrusted.controls``); a stack's members are numbered from 0 by it and by
every other check of the file (``members[1]`` is the second)."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"
SECRET = "Zq9corpusSecret"
ZERO64 = "0" * 64
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PLAN = ("plan", f"{{dir}}/{R}", "--arch", "gfx942")
TREE: dict[str, str | bytes] = {"recipes/tree/setup.py": "", "recipes/fix.patch": ""}


def _recipe(extra: str = "", *, name: str = '"demo"', source: str = 'path = "tree"',
            package: str = "") -> str:
    return (f'schema_version = 1\n[package]\nname = {name}\nversion = "1.0"\n{package}'
            f'[source]\n{source}\n{extra}')


def _leak(cid: str, key: str, text: str, argv: tuple[str, ...] = PLAN,
          scheme: str = "https") -> Case:
    return Case(cid, argv, EXIT["recipe"], f"r.toml: {key}: '{scheme}://***@", "leaks",
                files={R: text, **TREE}, secret=SECRET, writes_nothing=True)


def _ctl(cid: str, key: str, code: str, text: str, argv: tuple[str, ...] = PLAN) -> Case:
    return Case(cid, argv, EXIT["recipe"], f"r.toml: {key}: control character U+{code}",
                "inputs", files={R: text, **TREE}, writes_nothing=True)


def _download(url: str) -> str:
    return f'[[downloads]]\nname = "d"\nurl = "{url}"\nsha256 = "{ZERO64}"\nenv = "D"\n'


def _patch(reason: str = '"r"', file: str = '"fix.patch"', link: str = "") -> str:
    return (f"[[patches]]\nfile = {file}\nsha256 = \"{EMPTY_SHA}\"\nreason = {reason}\n"
            + (f'link = "{link}"\n' if link else ""))


def _sdist(url: str) -> str:
    return f'sdist = {{ url = "{url}", sha256 = "{ZERO64}" }}'


STACK = "stacks/s.toml"
NIGHTLY = ('[[matrix]]\nrecipes = ["hip-attention-probe"]\narchs = ["gfx942"]\n'
           '[publish]\nindex = "{dir}/index"\n')


def _stack(cid: str, key: str, code: str, text: str) -> Case:
    return Case(cid, ("stack", "plan", f"{{dir}}/{STACK}", "--arch", "gfx942"),
                EXIT["recipe"], f"s.toml: {key}: control character U+{code}", "inputs",
                files={STACK: text}, writes_nothing=True)


def _nightly(cid: str, key: str, code: str, text: str) -> Case:
    return Case(cid, ("nightly", "--config", "{dir}/nightly.toml", "--dry-run"), EXIT["usage"],
                f"nightly.toml: {key}: control character U+{code}", "inputs",
                files={"nightly.toml": text}, writes_nothing=True)


def _pyproject(cid: str, key: str, code: str, text: str) -> Case:
    return Case(cid, PLAN[:2], EXIT["usage"], f"pyproject.toml: {key}: control character U+{code}",
                "inputs", files={R: _recipe(), **TREE, "pyproject.toml": text},
                writes_nothing=True)


_MEMBER = '[[members]]\nrecipe = "hip-attention-probe"\n'

CASES: list[Case] = [
    # credentials in a recipe's URLs: refused, never shown
    _leak("recipe-download-url-userinfo", "downloads[0].url",
          _recipe(_download(f"https://ci:{SECRET}@files.example.invalid/aotriton.tar.gz"))),
    _leak("recipe-download-url-token-only", "downloads[0].url",
          _recipe(_download(f"https://{SECRET}@files.example.invalid/a.tar.gz"))),
    _leak("recipe-download-url-at-in-password", "downloads[0].url",
          _recipe(_download(f"https://ci:pw@{SECRET}@files.example.invalid/a.tar.gz"))),
    _leak("recipe-download-url-ftp-userinfo", "downloads[0].url",
          _recipe(_download(f"ftp://ci:{SECRET}@files.example.invalid/a.tar.gz")),
          scheme="ftp"),
    _leak("recipe-sdist-url-userinfo", "source.sdist.url",
          _recipe(source=_sdist(f"https://ci:{SECRET}@pypi.example.invalid/demo-1.0.tar.gz"))),
    _leak("recipe-git-url-userinfo", "source.git",
          _recipe(source=f'git = "https://oauth2:{SECRET}@git.example.invalid/demo.git"\n'
                  f'commit = "{COMMIT}"')),
    _leak("recipe-alternative-sdist-userinfo", "source.alternatives.pypi.sdist.url",
          _recipe("[source.alternatives.pypi]\n"
                  + _sdist(f"https://u:{SECRET}@pypi.example.invalid/demo-1.0.tar.gz") + "\n")),
    _leak("recipe-release-source-userinfo", "releases.main.source.git",
          _recipe("[releases.main]\n[releases.main.source]\n"
                  f'git = "https://u:{SECRET}@git.example.invalid/demo.git"\n'
                  f'commit = "{COMMIT}"\n')),
    _leak("recipe-patch-link-userinfo", "patches[0].link",
          _recipe(_patch(link=f"https://u:{SECRET}@issues.example.invalid/1"))),
    # and in any other recipe string: pip and cmake arguments, requirements, env values
    _leak("recipe-pip-args-index-url-userinfo", "build.pip_args[0]",
          _recipe(f'[build]\npip_args = ["--index-url=https://ci:{SECRET}@pypi.example.invalid/'
                  'simple"]\n')),
    _leak("recipe-pip-args-extra-index-url-item", "build.pip_args[1]",
          _recipe(f'[build]\npip_args = ["--extra-index-url", "https://{SECRET}@pypi.example.'
                  'invalid/simple"]\n')),
    _leak("recipe-cmake-arg-url-userinfo", "build.cmake_args[0]",
          _recipe(f'[build]\ncmake_args = ["-DDEPS_URL=https://u:{SECRET}@files.example.'
                  'invalid/d.tgz"]\n')),
    _leak("recipe-build-requires-url-userinfo", "build.build_requires[0]",
          _recipe(f'[build]\nbuild_requires = ["dep @ https://u:{SECRET}@files.example.invalid/'
                  'dep-1.0-py3-none-any.whl"]\n')),
    _leak("recipe-env-pip-index-url-userinfo", "build.env.PIP_INDEX_URL",
          _recipe(f'[build.env]\nPIP_INDEX_URL = "https://ci:{SECRET}@pypi.example.invalid/'
                  'simple"\n')),
    _leak("recipe-download-url-inner-url-userinfo", "downloads[0].url",
          _recipe(_download(f"https://files.example.invalid/r?to=https://u:{SECRET}@"
                            "files.example.invalid/a.tar.gz"))),
    _leak("recipe-userinfo-build-refused-early", "downloads[0].url",
          _recipe(_download(f"https://ci:{SECRET}@files.example.invalid/a.tar.gz")),
          argv=("build", f"{{dir}}/{R}", "--arch", "gfx942")),
    # control characters in any recipe string, key or table name
    _ctl("recipe-name-esc", "package.name", "001B", _recipe(name='"demo\\u001b[2J"')),
    _ctl("recipe-version-bidi-isolate", "package.version", "2069",
         _recipe().replace('version = "1.0"', 'version = "1.0\\u2069"')),
    _ctl("recipe-description-csi-c1", "package.description", "009B",
         _recipe(package='description = "fast \\u009b31m"\n')),
    _ctl("recipe-description-newline", "package.description", "000A",
         _recipe(package='description = """two\nlines"""\n')),
    _ctl("recipe-env-value-bel", "build.env.CC", "0007",
         _recipe('[build.env]\nCC = "clang\\u0007"\n')),
    _ctl("recipe-env-name-esc", "build.env.CC\\x1b", "001B",
         _recipe('[build.env]\n"CC\\u001b" = "clang"\n')),
    _ctl("recipe-env-value-rlo", "build.env.HIP_FLAGS", "202E",
         _recipe('[build.env]\nHIP_FLAGS = "-O3 \\u202e"\n')),
    _ctl("recipe-cmake-arg-cr", "build.cmake_args[0]", "000D",
         _recipe('[build]\ncmake_args = ["-DX=1\\r"]\n')),
    _ctl("recipe-imports-nul", "validate.imports[0]", "0000",
         _recipe('[validate]\nimports = ["demo\\u0000"]\n')),
    _ctl("recipe-imports-tab", "validate.imports[0]", "0009",
         _recipe('[validate]\nimports = ["demo\\t"]\n')),
    _ctl("recipe-patch-file-newline", "patches[0].file", "000A",
         _recipe(_patch(file='"fix.patch\\n"'))),
    _ctl("recipe-patch-reason-esc", "patches[0].reason", "001B",
         _recipe(_patch(reason='"""two\nlines \\u001b[1m"""'))),
    _ctl("recipe-variant-description-lro", "variants.lite.description", "202D",
         _recipe('[variants.lite]\ndescription = "\\u202dlite"\n')),
    _ctl("recipe-variant-name-fsi", "variants.lite\\u2068", "2068",
         _recipe('[variants."lite\\u2068"]\ndescription = "x"\n')),
    _ctl("recipe-option-help-del", "options.dims.help", "007F",
         _recipe('[options.dims]\nenv = "DIMS"\ndefault = "64"\nhelp = "dims\\u007f"\n')),
    _ctl("recipe-download-name-esc", "downloads[0].name", "001B",
         _recipe(_download("https://files.example.invalid/a.tar.gz")
                 .replace('name = "d"', 'name = "d\\u001b"'))),
    _ctl("recipe-git-url-tab", "source.git", "0009",
         _recipe(source=f'git = "https://git.example.invalid/demo.git\\t"\ncommit = "{COMMIT}"')),
    _ctl("recipe-when-value-esc", "downloads[0].when.arch", "001B",
         _recipe(_download("https://files.example.invalid/a.tar.gz")
                 + 'when = { arch = "gfx942\\u001b" }\n')),
    _ctl("recipe-esc-build-refused-early", "package.name", "001B",
         _recipe(name='"demo\\u001b"'), argv=("build", f"{{dir}}/{R}", "--arch", "gfx942")),
    # the stack file and nightly.toml go through the same check
    _stack("stack-member-recipe-esc", "members[0].recipe", "001B",
           'schema_version = 1\n[[members]]\nrecipe = "hip-attention-probe\\u001b"\n'),
    _stack("stack-description-nel", "description", "0085",
           f'schema_version = 1\ndescription = "a\\u0085b"\n{_MEMBER}'),
    # ... and number members from 0 as it does, as every other check of the file
    _stack("stack-second-member-variant-esc", "members[1].variant", "001B",
           f'schema_version = 1\n[[members]]\nrecipe = "ck-fmha-probe"\n{_MEMBER}'
           'variant = "x\\u001b"\n'),
    Case("stack-second-member-numbered-from-0", ("stack", "plan", f"{{dir}}/{STACK}", "--arch",
         "gfx942"), EXIT["recipe"], "s.toml: members[1].variant: hip-attention-probe has no "
         "variant 'nope'", "inputs", writes_nothing=True,
         files={STACK: f'schema_version = 1\n[[members]]\nrecipe = "ck-fmha-probe"\n{_MEMBER}'
                'variant = "nope"\n'}),
    # [tool.rocmbuild] in ./pyproject.toml too (the rest of that file is the project's own)
    _pyproject("pyproject-cache-dir-esc", "tool.rocmbuild.cache-dir", "001B",
               '[tool.rocmbuild]\narch = "gfx942"\ncache-dir = "c\\u001b[2J"\n'),
    _pyproject("pyproject-key-name-rlo", "tool.rocmbuild.jobs\\u202e", "202E",
               '[tool.rocmbuild]\narch = "gfx942"\n"jobs\\u202e" = 2\n'),
    _nightly("nightly-recipe-esc", "matrix[0].recipes[0]", "001B",
             NIGHTLY.replace('probe"', 'probe\\u001b"')),
    _nightly("nightly-index-rlo", "publish.index", "202E",
             NIGHTLY.replace('index"', 'index\\u202e"')),
]
