"""patches/flash-attn/0001 at run time: applies with `git apply` to the sdist's (empty)
flash_attn/flash_attn_triton_amd/__init__.py, and drops the AMD-only options only on a non-HIP
Triton backend and only for that package's kernels.

Triton's GPU backends cannot run here, so ``triton`` is a small stand-in package written by the
test: a JITFunction whose run() records the keyword arguments it gets, and a driver that reports
the backend named by an environment variable. The real kernels ran on an H200
(docs/dev/benchmarks-notebook.md).
The patch file and its recipe entry are checked in tests/unit/test_flash_attn_patch.py.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from rocmbuild.core.config import REPO_ROOT
from rocmbuild.core.run import run

PATCH = (REPO_ROOT / "patches" / "flash-attn"
         / "0001-triton-amd-drop-amd-only-autotune-keys-on-non-hip.patch")

FAKE_TRITON = {
    "triton/__init__.py": "from . import runtime\n",
    "triton/runtime/__init__.py": "from . import driver, jit\n",
    "triton/runtime/driver.py": textwrap.dedent("""
        import os
        class _Target:
            backend = os.environ["FAKE_TRITON_BACKEND"]
        class _Active:
            def get_current_target(self):
                return _Target()
        active = _Active()
    """),
    "triton/runtime/jit.py": textwrap.dedent("""
        class JITFunction:
            def __init__(self, fn):
                self.fn = fn
            def run(self, *args, **kwargs):
                return sorted(kwargs)
    """),
}

PROBE = textwrap.dedent("""
    import json, types
    import flash_attn.flash_attn_triton_amd  # applies the patch's runtime switch
    from triton.runtime.jit import JITFunction
    def kernel(): pass
    ours = types.FunctionType(kernel.__code__, {}, "k")
    ours.__module__ = "flash_attn.flash_attn_triton_amd.fwd_prefill"
    other = types.FunctionType(kernel.__code__, {}, "k")
    other.__module__ = "someone_else"
    kw = dict(grid=(1,), BLOCK_M=64, waves_per_eu=2, matrix_instr_nonkdim=16, kpack=2)
    print(json.dumps({"ours": JITFunction(ours).run(**kw), "other": JITFunction(other).run(**kw)}))
""")


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("fa")
    pkg = root / "flash_attn" / "flash_attn_triton_amd"
    pkg.mkdir(parents=True)
    (root / "flash_attn" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")  # as in flash_attn-2.8.3.post1.tar.gz
    run(["git", "init", "-q", root])
    run(["git", "apply", "--verbose", PATCH], cwd=root)
    for rel, text in FAKE_TRITON.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _kwargs_seen(root: Path, backend: str) -> dict:
    env = {"PATH": "/usr/bin:/bin", "FAKE_TRITON_BACKEND": backend}
    r = run([sys.executable, "-c", PROBE], cwd=root, env=env, capture=True)
    return json.loads(r.output.splitlines()[-1])


def test_non_hip_backend_drops_amd_only_options_for_flash_attn_kernels(patched_tree):
    seen = _kwargs_seen(patched_tree, "cuda")
    assert seen["ours"] == ["BLOCK_M", "grid"]
    assert "waves_per_eu" in seen["other"]  # other packages' kernels are left alone


def test_hip_backend_is_untouched(patched_tree):
    seen = _kwargs_seen(patched_tree, "hip")
    assert seen["ours"] == ["BLOCK_M", "grid", "kpack", "matrix_instr_nonkdim", "waves_per_eu"]
