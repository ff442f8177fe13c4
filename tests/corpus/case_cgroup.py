"""Bad Slurm allocation variables: a usage error naming the variable, before any work."""

from __future__ import annotations

from tests.corpus import EXIT, Case
from tests.corpus.case_inputs import OK

PLAN = ("plan", "{dir}/r.toml", "--arch", "gfx942")

CASES = [
    Case(f"env-{name.lower().replace('_', '-')}-{cid}", PLAN, EXIT["usage"], name, "tracebacks",
         env={name: value}, files={"r.toml": OK}, writes_nothing=True, timeout=30)
    for name, cid, value in (("SLURM_CPUS_PER_TASK", "zero", "0"),
                             ("SLURM_MEM_PER_CPU", "word", "lots"),
                             ("SLURM_MEM_PER_NODE", "suffix", "16G"))
]
