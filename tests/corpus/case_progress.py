"""Bad values of the progress and repair settings: a usage error naming the variable or the
recipe key, at start-up (before any stage runs)."""

from __future__ import annotations

from tests.corpus import EXIT, Case
from tests.corpus.case_inputs import OK

BUILD = ("build", "{dir}/r.toml", "--arch", "gfx942")

CASES = [
    *[Case(f"env-progress-seconds-{cid}", BUILD, EXIT["usage"], "ROCMBUILD_PROGRESS_SECONDS",
           "tracebacks", env={"ROCMBUILD_PROGRESS_SECONDS": value}, files={"r.toml": OK},
           writes_nothing=True, timeout=30)
      for cid, value in (("word", "often"), ("negative", "-1"), ("nan", "nan"))],
    Case("recipe-repair-not-bool", ("plan", "{dir}/r.toml", "--arch", "gfx942"),
         EXIT["recipe"], "build.repair", "inputs",
         files={"r.toml": OK + '\n[build]\nrepair = "yes"\n'}, writes_nothing=True),
]
