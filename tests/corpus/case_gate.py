"""Bad inputs of the kernel gate's issue-14 keys and flags: a recipe's upstream test paths and
floors, `validate --upstream-tests`, `--inject-fault`, and a baseline store that is not one."""

from __future__ import annotations

from tests.corpus import EXIT, Case

R = "recipes/r.toml"


def _recipe(extra: str) -> str:
    return f"""schema_version = 1
[package]
name = "demo"
version = "1.0"
[source]
path = "tree"
{extra}"""


def _plan(cid: str, needle: str, text: str) -> Case:
    return Case(cid, ("plan", f"{{dir}}/{R}", "--arch", "gfx942"), EXIT["recipe"], needle,
                "gate", files={R: text, "recipes/tree/setup.py": "\n"}, writes_nothing=True)


CASES = [
    _plan("upstream-tests-outside-tree", "r.toml: validate.upstream_tests[0]",
          _recipe('[validate]\nupstream_tests = ["../../etc/passwd"]\n')),
    _plan("upstream-tests-absolute", "r.toml: variants.v.upstream_tests[0]",
          _recipe('[variants.v]\nupstream_tests = ["/etc/passwd"]\n')),
    _plan("upstream-env-not-strings", "r.toml: validate.upstream_env",
          _recipe('[validate]\nupstream_env = { A = 1 }\n')),
    _plan("floor-negative", "r.toml: validate.floor.gfx942.fwd_tflops",
          _recipe('[validate.floor.gfx942]\nfwd_tflops = -5\n')),
    _plan("floor-unknown-key", "r.toml: validate.floor.gfx942.fwd_tflop",
          _recipe('[validate.floor.gfx942]\nfwd_tflop = 5\n')),
    _plan("floor-not-a-table", "r.toml: validate.floor.gfx942",
          _recipe('[validate]\nfloor = { gfx942 = 5 }\n')),
    Case("upstream-tests-not-a-number", ("validate", "{wheel}", "--upstream-tests", "many"),
         EXIT["usage"], "--upstream-tests", "gate", writes_nothing=True),
    Case("upstream-time-negative", ("validate", "{wheel}", "--upstream-time", "-5"),
         EXIT["usage"], "--upstream-time: must be a number of seconds > 0", "gate",
         writes_nothing=True),
    Case("upstream-time-nan", ("validate", "{wheel}", "--upstream-time", "nan"),
         EXIT["usage"], "--upstream-time", "gate", writes_nothing=True),
    Case("inject-unknown-fault", ("validate", "{wheel}", "--inject-fault", "sluggish"),
         EXIT["usage"], "--inject-fault", "gate", writes_nothing=True),
    Case("baseline-store-corrupt", ("validate", "{wheel}", "--no-kernels"), EXIT["usage"],
         "baselines/throughput.json: unreadable", "gate",
         files={"build/baselines/throughput.json": "{not json"}, writes_nothing=True),
]
