"""Bad inputs for `verify` and `--build-tag`: wheels without or with damaged provenance (a
recipe "name" that is a path must never be loaded), files that are no wheels, build tags that
PEP 427 refuses from the flag and from the variable. None of them may build or write anything."""

from __future__ import annotations

import io
import json
import zipfile

from tests.corpus import EXIT, Case

GOOD = {"recipe": "flash-attn", "recipe_sha256": "0" * 64, "plan": {}, "archs": ["gfx942"],
        "variant": "triton", "gpu_vendor": "amd", "rocm_version": "6.2", "build_tag": None}
NAME = "pkg-1.0+rocm6.2.gfx942-py3-none-any.whl"


def _wheel(provenance: object | None) -> bytes:
    """A small wheel with ``provenance`` as its rocmbuild.json (None: no rocmbuild.json)."""
    di = "pkg-1.0+rocm6.2.gfx942.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{di}/METADATA", "Metadata-Version: 2.1\nName: pkg\n"
                    "Version: 1.0+rocm6.2.gfx942\n")
        zf.writestr("pkg/__init__.py", "")
        if provenance is not None:
            zf.writestr(f"{di}/rocmbuild.json", json.dumps(provenance))
    return buf.getvalue()


def _damaged(cid: str, change: dict[str, object], key: str) -> Case:
    return Case(id=f"verify-provenance-{cid}", argv=("verify", f"{{dir}}/{NAME}"),
                code=EXIT["usage"], needle=f"rocmbuild.json: {key}: must be", klass="verify",
                files={NAME: _wheel({**GOOD, **change})}, writes_nothing=True)


CASES = [
    Case(id="verify-no-provenance", argv=("verify", f"{{dir}}/{NAME}"), code=EXIT["usage"],
         needle="no rocmbuild provenance", klass="verify", files={NAME: _wheel(None)},
         writes_nothing=True),
    Case(id="verify-not-a-wheel-name", argv=("verify", "{dir}/notes.txt"), code=EXIT["usage"],
         needle="notes.txt: not a wheel filename", klass="verify", files={"notes.txt": "x"},
         writes_nothing=True),
    Case(id="verify-missing-wheel", argv=("verify", f"{{dir}}/gone/{NAME}"), code=EXIT["usage"],
         needle="no such wheel file", klass="verify", writes_nothing=True),
    _damaged("recipe-is-a-path", {"recipe": "../../etc/flash-attn.toml"}, "recipe"),
    _damaged("recipe-not-a-string", {"recipe": ["flash-attn"]}, "recipe"),
    _damaged("plan-not-a-table", {"plan": "x"}, "plan"),
    _damaged("archs-empty", {"archs": []}, "archs"),
    _damaged("archs-injection", {"archs": ["gfx942;rm -rf /"]}, "archs"),
    _damaged("bad-build-tag", {"build_tag": "x-1"}, "build_tag"),
    Case(id="verify-recipe-hash-differs", argv=("verify", f"{{dir}}/{NAME}"),
         code=EXIT["recipe"], needle="the wheel was built from 000000000000", klass="verify",
         files={NAME: _wheel(GOOD)}, writes_nothing=True),
    Case(id="build-tag-flag", argv=("plan", "flash-attn", "--arch", "gfx942", "--build-tag",
                                    "one"),
         code=EXIT["usage"], needle="--build-tag: 'one' is not a build tag", klass="verify",
         writes_nothing=True),
    Case(id="build-tag-variable", argv=("build", "flash-attn", "--arch", "gfx942"),
         env={"ROCMBUILD_BUILD_TAG": "1-2"}, code=EXIT["usage"],
         needle="ROCMBUILD_BUILD_TAG: '1-2' is not a build tag", klass="verify",
         writes_nothing=True),
]
