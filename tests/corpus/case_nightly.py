"""Bad nightly.toml files and flags: every one a single line naming ``nightly.toml: <key>``
with a hint and exit 2, nothing built, published or served; the webhook URL (a secret) never
printed. All run as ``nightly --dry-run`` or fail before the lock."""

from __future__ import annotations

import json

from tests.corpus import EXIT, Case

SECRET = "HookT0kenXyZ"
_M = '[[matrix]]\nrecipes = ["hip-attention-probe"]\narchs = ["gfx942"]\n'
_P = '[publish]\nindex = "index"\n'


_RUN = "20261130T161500Z"


def _manifest(**over: str) -> str:
    """A --no-wait run's manifest.json as the controller writes it, one key changed since."""
    data = {"run": _RUN, "started": "2026-11-30T16:15:00Z", "config": "{dir}/nightly.toml",
            "index": "{dir}/index", "stage": "staging", "promote_to": "stable", "cells": []}
    return json.dumps({**data, **over})


def _case(cid: str, text: str, needle: str, *extra: str, secret: str | None = None,
          code: int = EXIT["usage"]) -> Case:
    return Case(cid, ("nightly", "--config", "{dir}/nightly.toml", "--dry-run", *extra), code,
                needle, "nightly", files={"nightly.toml": text}, secret=secret,
                writes_nothing=True)


CASES = [
    _case("nightly-no-matrix", _P, "nightly.toml: matrix: expected one or more"),
    _case("nightly-arch-native", _M.replace('"gfx942"', '"gfx942"') + _M.replace(
        '"gfx942"', '"native"') + _P, "nightly.toml: matrix[1].archs: 'native'"),
    _case("nightly-unknown-key", _M + 'colour = "red"\n' + _P,
          "nightly.toml: matrix[0].colour: unknown key"),
    _case("nightly-bad-timeout", _M + 'timeout = "soon"\n' + _P,
          "nightly.toml: matrix[0].timeout: 'soon' is not a duration"),
    _case("nightly-follow-not-bool", _M + 'follow = "yes"\n' + _P,
          "nightly.toml: matrix[0].follow: expected true or false"),
    _case("nightly-duplicate-cell", _M + _M + _P, "nightly.toml: matrix[1]: cell "),
    _case("nightly-no-index", _M, "nightly.toml: publish.index: missing"),
    _case("nightly-same-stage", _M + _P + 'stage = "stable"\n',
          "nightly.toml: publish.promote_to: is the staging stage"),
    _case("nightly-bad-max-size", _M + _P + '[retention]\nmax_size = "lots"\n',
          "nightly.toml: retention.max_size: 'lots' is not a size"),
    _case("nightly-bad-executor", _M + _P + '[executor]\nkind = "k8s"\n',
          "nightly.toml: executor.kind: 'k8s' is not local or slurm"),
    _case("nightly-timeout-above-job", _M + 'timeout = "9h"\n' + _P
          + '[executor]\ntime = "8h"\n', "nightly.toml: executor.time: cell "),
    _case("nightly-executor-unknown-key", _M + _P + '[executor]\nkind = "slurm"\nqueue = "x"\n',
          "nightly.toml: executor.queue: unknown key"),
    _case("nightly-executor-bad-partition", _M + _P + '[executor]\npartition = "a b"\n',
          "nightly.toml: executor.partition: 'a b' is not a Slurm name"),
    _case("nightly-executor-own-sbatch-arg", _M + _P + '[executor]\nsbatch_args = ["--array=1"]\n',
          "nightly.toml: executor.sbatch_args: --array is the executor's own"),
    _case("nightly-bad-history", _M + _P + "[reports]\nhistory = 0\n",
          "nightly.toml: reports.history"),
    _case("nightly-notify-not-http", _M + _P + f'[notify]\nurl = "ftp://u:{SECRET}@h/x"\n',
          "nightly.toml: notify.url", secret=SECRET),
    _case("nightly-index-secret-bad", _M + f'[publish]\nindex = "ftp://u:{SECRET}@h/x"\n',
          "nightly.toml: publish.index", secret=SECRET),
    _case("nightly-not-toml", "[[matrix]\n", "nightly.toml: (file): not valid TOML"),
    _case("nightly-only-unknown", _M + _P, "--only/--cell: no cell 'nope'", "--only", "nope"),
    Case("nightly-cell-without-run-dir", ("nightly", "--config", "{dir}/nightly.toml", "--cell",
                                          "x"), EXIT["usage"], "--cell and --run-dir",
         "nightly", files={"nightly.toml": _M + _P}, writes_nothing=True),
    Case("nightly-collect-not-a-run", ("nightly", "--config", "{dir}/nightly.toml", "--collect",
                                       "../etc"), EXIT["usage"], "--collect: '../etc' is neither",
         "nightly", files={"nightly.toml": _M + _P}),
    Case("nightly-collect-other-config", ("nightly", "--config", "{dir}/nightly.toml",
                                          "--collect", _RUN), EXIT["usage"],
         "--collect: run 20261130T161500Z was started with --config '", "nightly",
         files={"nightly.toml": _M + _P, f"reports/{_RUN}/manifest.json": _manifest(
             config="{dir}/old.toml")}, writes_nothing=True),
    Case("nightly-collect-index-changed", ("nightly", "--config", "{dir}/nightly.toml",
                                           "--collect", _RUN), EXIT["usage"],
         "--collect: run 20261130T161500Z was started with publish.index '",
         "nightly", files={"nightly.toml": _M + _P, f"reports/{_RUN}/manifest.json": _manifest(
             index="{dir}/old-index")}, writes_nothing=True),
]

