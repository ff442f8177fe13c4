"""patches/flash-attn/0001 as a file and as recipes/flash-attn.toml records it: a unified diff of
the one file it changes, pinned by its real sha256, with a reason that says why it exists.
What the patch does at run time: tests/integration/test_flash_attn_patch_runtime.py."""

from __future__ import annotations

import hashlib
import tomllib
from typing import Any

from rocmbuild.core.config import REPO_ROOT

PATCH = (REPO_ROOT / "patches" / "flash-attn"
         / "0001-triton-amd-drop-amd-only-autotune-keys-on-non-hip.patch")
RECIPE = REPO_ROOT / "recipes" / "flash-attn.toml"


def recorded() -> dict[str, Any]:
    """The recipe's [[patches]] entry for PATCH (exactly one)."""
    entries = [
        p for p in tomllib.loads(RECIPE.read_text()).get("patches", [])
        if (RECIPE.parent / p["file"]).resolve() == PATCH.resolve()
    ]
    assert len(entries) == 1, f"{RECIPE.name} must list {PATCH.name} once: {entries}"
    entry: dict[str, Any] = entries[0]
    return entry


def test_patch_is_a_unified_diff_with_reason() -> None:
    text = PATCH.read_text()
    assert text.startswith("--- a/flash_attn/flash_attn_triton_amd/__init__.py\n")
    assert "+++ b/flash_attn/flash_attn_triton_amd/__init__.py" in text
    reason = recorded()["reason"]
    # says why: what it drops, when, and the error it works around
    assert "waves_per_eu" in reason and "not HIP" in reason and "KeyError" in reason, reason


def test_recipe_pins_the_patch_by_its_real_sha256() -> None:
    assert recorded()["sha256"] == hashlib.sha256(PATCH.read_bytes()).hexdigest()


PATCH_MAIN = REPO_ROOT / "patches" / "flash-attn" / "0002-main-aiter-from-build-env.patch"


def test_main_patch_removes_the_aiter_pip_install_on_main_triton_only() -> None:
    """0002: setup.py's `pip install --no-build-isolation third_party/aiter` (Dao-AILab main
    0251105a, l.257-268) goes; an importability check of aiter stays. Pinned by its real sha256
    and scoped to the main line's Triton variant."""
    text = PATCH_MAIN.read_text()
    assert text.startswith("--- a/setup.py\n+++ b/setup.py\n")
    removed = [ln for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert any('"pip", "install", "--no-build-isolation", "third_party/aiter"' in ln
               for ln in removed)
    assert not any('"-m", "pip"' in ln for ln in added)
    assert any('find_spec("aiter")' in ln for ln in added)
    (entry,) = [p for p in tomllib.loads(RECIPE.read_text())["patches"]
                if (RECIPE.parent / p["file"]).resolve() == PATCH_MAIN.resolve()]
    assert entry["sha256"] == hashlib.sha256(PATCH_MAIN.read_bytes()).hexdigest()
    assert entry["when"] == {"release": "main", "variant": "triton"}
    assert "third_party/aiter" in entry["reason"]
