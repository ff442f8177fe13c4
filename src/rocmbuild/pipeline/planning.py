"""The one way to plan: a recipe, a Target and a Host, rendered with the unit memory earlier
builds measured (``cache.learned``, read from the cache they recorded it in).

``rocmbuild build`` and ``plan`` (through commands/common.py), ``doctor --recipe``, ``verify``
and the nightly (each cell's decision and its build) all plan here, so that for the same inputs
they agree on MAX_JOBS, its reason and the cache key. How each finds its Host differs (flags, a
saved host file, a fixture root, the wheel's compiler) and stays with the caller; the recipe is
passed loaded, because detecting the host needs it (its compiler and Python requirements).

The plan carries the learned figure it used (``Plan.learned``, None: the recipe's
``mem_per_job_gb``); ``Plan.job_mem_gb`` is the memory per compile job MAX_JOBS was planned
with, which the Slurm executor asks for (x jobs). Learning never changes the cache key.
"""

from __future__ import annotations

from pathlib import Path

from rocmbuild.cache import learned
from rocmbuild.host.detect import Host
from rocmbuild.recipe import render
from rocmbuild.recipe.model import Recipe
from rocmbuild.recipe.plan import Plan


def plan_for(recipe: Recipe, target: render.Target, host: Host, cache: Path) -> Plan:
    """``recipe`` rendered for ``target`` on ``host``, MAX_JOBS from the units earlier builds of
    it measured (``<cache>/learned/<recipe>/``) when they match its variant, archs and compiler,
    else from the recipe's ``mem_per_job_gb``."""
    return render.render(recipe, target, host, learned.load(cache, recipe.path.stem))
