"""The cache key: sha256 over everything in a Plan that decides the wheel's bytes.

``cache_key`` is what ``render`` stores in ``Plan.cache_key``; ``key_of_inputs`` recomputes it
from a wheel's recorded plan (``verify``). Both hash the plan's provenance record
(``Plan.inputs_json``) through ``model.in_key``: which fields the key holds is said once, on each
Plan field (``model.part``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from typing import Any

from rocmbuild import __version__
from rocmbuild.core.config import SOURCE_TREE_IGNORE
from rocmbuild.plan.model import Plan, in_key


def cache_key(plan: Plan, keyed_env: dict[str, str]) -> str:
    """sha256 over everything that decides the wheel's bytes: not MAX_JOBS (the env is hashed
    with ``{jobs}`` unfilled), not where the recipe file lies, not how the ROCm version was
    found (the fields that say so: ``model.part``)."""
    material = plan.inputs_json()
    material["env"] = keyed_env
    if plan.source.kind == "path":  # a local tree is pinned by its content
        material["source"]["tree_sha256"] = tree_digest(Path(plan.source.path))
    return _hash(material)


def _hash(material: dict[str, Any]) -> str:
    """The cache key of a plan's provenance record (its env keyed): the entries the key holds
    (``model.in_key``), with rocmbuild's version."""
    material = in_key(material)
    material["rocmbuild"] = __version__
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def key_of_inputs(inputs: dict[str, Any]) -> str | None:
    """The cache key that ``Plan.inputs_json()`` (a wheel's recorded ``plan``) hashes to, as
    ``render`` computes it for the plan; None when it cannot be told from the JSON alone (a
    ``path`` source is keyed by its tree's content) or the JSON is no plan's (``verify`` reads
    it from an untrusted wheel)."""
    material = json.loads(json.dumps(inputs))  # a deep copy of JSON data
    source, rocm = material.get("source"), material.get("rocm")
    if not isinstance(source, dict) or not isinstance(rocm, dict) or source.get("kind") in (
            None, "path"):
        return None
    return _hash(material)


def tree_digest(root: Path) -> str:
    """The content of a local source tree, as the fetch stage will copy it."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if f.is_file() and not any(fnmatch.fnmatch(part, pat) for part in rel.parts
                                   for pat in SOURCE_TREE_IGNORE):
            h.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()
