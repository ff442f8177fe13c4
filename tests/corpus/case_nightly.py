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


def _manifest(**over: object) -> str:
    """A --no-wait run's manifest.json as the controller writes it, one key changed since."""
    data = {"run": _RUN, "started": "2026-11-30T16:15:00Z", "config": "{dir}/nightly.toml",
            "index": "{dir}/index", "stage": "staging", "promote_to": "stable", "cells": []}
    return json.dumps({**data, **over})


def _case(cid: str, text: str, needle: str, *extra: str, secret: str | None = None,
          code: int = EXIT["usage"], klass: str = "nightly",
          files: dict[str, str | bytes] | None = None) -> Case:
    return Case(cid, ("nightly", "--config", "{dir}/nightly.toml", "--dry-run", *extra), code,
                needle, klass, files={"nightly.toml": text, **(files or {})}, secret=secret,
                writes_nothing=True)


def _config(cid: str, text: str, needle: str, *extra: str, secret: str | None = None,
            files: dict[str, str | bytes] | None = None) -> Case:
    """Round two, class 4: the config checked as a whole (also in the dry run)."""
    return _case(cid, text, needle, *extra, secret=secret, klass="config", files=files)


def _number(cid: str, text: str, needle: str) -> Case:
    """Round two, class 2: a number of nightly.toml (core.quantity: 400 digits, NaN, inf, -1)."""
    return _case(cid, text, needle, klass="json")


def _file(cid: str, config: str, needle: str, *extra: str,
          files: dict[str, str | bytes] | None = None, dry: bool = True) -> Case:
    """Round two, class 3: a --config that is not a regular file, read once, never a hang."""
    return Case(cid, ("nightly", "--config", config, *(("--dry-run",) if dry else ()), *extra),
                EXIT["usage"], needle, "files", files=files or {}, writes_nothing=True,
                timeout=60.0)


_FA = '[[matrix]]\nrecipes = ["flash-attn"]\narchs = ["gfx942"]\n'
_CK = '[[matrix]]\nrecipes = ["ck-fmha-probe"]\narchs = ["gfx942"]\n'
_SL = '[executor]\nkind = "slurm"\n'
_BIG = "9" * 400


def _sbatch(cid: str, args: str, needle: str) -> Case:
    return _config(cid, _M + _P + f"[executor]\nsbatch_args = {args}\n",
                   f"nightly.toml: executor.sbatch_args: {needle}")


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
          "nightly.toml: executor.sbatch_args: sbatch reads '--array=1' as --array"),
    _case("nightly-bad-history", _M + _P + "[reports]\nhistory = 0\n",
          "nightly.toml: reports.history"),
    _case("nightly-notify-not-http", _M + _P + f'[notify]\nurl = "ftp://u:{SECRET}@h/x"\n',
          "nightly.toml: notify.url", secret=SECRET),
    _case("nightly-index-secret-bad", _M + f'[publish]\nindex = "ftp://u:{SECRET}@h/x"\n',
          "nightly.toml: publish.index", secret=SECRET),
    _case("nightly-not-toml", "[[matrix]\n", "nightly.toml: (file): invalid TOML"),
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

# Round two (issue 24): the whole config before anything runs, its numbers, its file.
CASES += [
    _config("nightly-stage-simple", _M + _P + 'stage = "simple"\n',
            "nightly.toml: publish.stage: invalid stage name 'simple'"),
    _config("nightly-stage-files", _M + _P + 'stage = "files"\n',
            "nightly.toml: publish.stage: invalid stage name 'files'"),
    _config("nightly-promote-files", _M + _P + 'promote_to = "files"\n',
            "nightly.toml: publish.promote_to: invalid stage name 'files'"),
    _config("nightly-promote-simple", _M + _P + 'promote_to = "simple"\n',
            "nightly.toml: publish.promote_to: invalid stage name 'simple'"),
    _config("nightly-stage-slash", _M + _P + 'stage = "a/b"\n',
            "nightly.toml: publish.stage: invalid stage name 'a/b'"),
    _config("nightly-variant-default-twice", _FA + 'variants = ["default", "ck"]\n' + _P,
            "nightly.toml: matrix[0].variants: cell flash-attn.ck.default.gfx942 builds what "
            "cell flash-attn.default.default.gfx942 of matrix[0] builds"),
    _config("nightly-variant-default-two-entries", _FA + _FA + 'variants = ["ck"]\n' + _P,
            "nightly.toml: matrix[1].variants: cell flash-attn.ck.default.gfx942 builds what "
            "cell flash-attn.default.default.gfx942 of matrix[0] builds"),
    _config("nightly-arch-set-twice", _FA.replace('"gfx942"', '"gfx90a,gfx942", "gfx942,gfx90a"')
            + _P, "nightly.toml: matrix[0].archs: 'gfx90a,gfx942' and 'gfx942,gfx90a' are the "
            "same targets"),
    _config("nightly-arch-set-two-entries", _FA.replace('"gfx942"', '"gfx90a,gfx942"')
            + _FA.replace('"gfx942"', '"gfx942,gfx90a"') + _P,
            "nightly.toml: matrix[1].archs: cell flash-attn.default.default.gfx942-gfx90a builds "
            "what cell flash-attn.default.default.gfx90a-gfx942 of matrix[0] builds"),
    _config("nightly-arch-repeated-inside", _FA.replace('"gfx942"', '"gfx942", "gfx942,gfx942"')
            + _P, "nightly.toml: matrix[0].archs: 'gfx942' and 'gfx942,gfx942' are the same"),
    _config("nightly-option-default-twice", _CK + _CK + 'options = { directions = "fwd" }\n'
            + _P, "nightly.toml: matrix[1]: cell ck-fmha-probe.default.default.gfx942 is already "
            "in the matrix, from matrix[0]"),
    _config("nightly-variant-unknown", _FA + 'variants = ["nope"]\n' + _P,
            "nightly.toml: matrix[0].variants: flash-attn has no variant 'nope'"),
    _config("nightly-variant-none", _M + 'variants = ["x"]\n' + _P,
            "nightly.toml: matrix[0].variants: hip-attention-probe has no variants"),
    _config("nightly-source-unknown", _FA + 'sources = ["nope"]\n' + _P,
            "nightly.toml: matrix[0].sources: flash-attn has no source 'nope'"),
    _config("nightly-option-unknown", _FA + 'options = { nope = "1" }\n' + _P,
            "nightly.toml: matrix[0].options: flash-attn has no option 'nope'"),
    _config("nightly-option-not-honoured", _FA + 'options = { opt_dim = "64" }\n' + _P,
            "nightly.toml: matrix[0].options: flash-attn.opt_dim is not honoured by source"),
    _config("nightly-option-bad-value", _FA + 'sources = ["pypi"]\noptions = { opt_dim = "7" }\n'
            + _P, "nightly.toml: matrix[0].options: flash-attn.opt_dim: "),
    _config("nightly-arch-unsupported", _FA.replace('"gfx942"', '"gfx908"') + _P,
            "nightly.toml: matrix[0].archs: gfx908 is not supported by flash-attn.toml"),
    _config("nightly-recipe-unknown", _M.replace("hip-attention-probe", "nosuch") + _P,
            "nightly.toml: matrix[0].recipes: unknown recipe 'nosuch'"),
    _config("nightly-whole-matrix-with-only", _M + _FA + 'variants = ["nope"]\n' + _P,
            "nightly.toml: matrix[1].variants: flash-attn has no variant 'nope'", "--only",
            "hip-attention-probe.default.default.gfx942"),
    _config("nightly-recipe-path-nul", _M.replace("hip-attention-probe", "a\\u0000.toml") + _P,
            "nightly.toml: matrix[0].recipes[0]: control character U+0000"),
    _sbatch("nightly-sbatch-array-prefix", '["--arr=1"]', "sbatch reads '--arr=1' as --array"),
    _sbatch("nightly-sbatch-output-prefix", '["--out=x"]', "sbatch reads '--out=x' as --output"),
    _sbatch("nightly-sbatch-array-short", '["-a1"]', "sbatch reads '-a1' as --array"),
    _sbatch("nightly-sbatch-output-separate", '["-o", "x"]', "sbatch reads '-o' as --output"),
    _sbatch("nightly-sbatch-output-bundled", '["-Qo/tmp/x"]',
            "sbatch reads '-Qo/tmp/x' as --output"),
    _sbatch("nightly-sbatch-chdir-prefix", '["--chd=/"]', "sbatch reads '--chd=/' as --chdir"),
    _sbatch("nightly-sbatch-export-prefix", '["--exp=NONE"]',
            "sbatch reads '--exp=NONE' as --export"),
    _sbatch("nightly-sbatch-job-name", '["-Jx"]', "sbatch reads '-Jx' as --job-name"),
    _sbatch("nightly-sbatch-wrap", '["--wrap=id"]', "sbatch reads '--wrap=id' as --wrap"),
    _sbatch("nightly-sbatch-test-only", '["--test"]', "sbatch reads '--test' as --test-only"),
    _sbatch("nightly-sbatch-end-of-options", '["--"]', "sbatch reads '--' as --"),
    _sbatch("nightly-sbatch-separate-value", '["--qos", "normal"]',
            "'normal' is not an sbatch option"),
    _config("nightly-shared-dir-nul", _M + _P + _SL + 'shared_dir = "/a\\u0000b"\n',
            "nightly.toml: executor.shared_dir: control character U+0000"),
    _config("nightly-shared-dir-no-user", _M + _P + _SL + 'shared_dir = "~nosuchuser4711/x"\n',
            "nightly.toml: executor.shared_dir: ~nosuchuser4711: no such user"),
    _config("nightly-shared-dir-newline", _M + _P + _SL + 'shared_dir = "/a\\nb"\n',
            "nightly.toml: executor.shared_dir: control character U+000A"),
    _config("nightly-shared-dir-a-file", _M + _P + _SL + 'shared_dir = "f/x"\n',
            "nightly.toml: executor.shared_dir: ", files={"f": "a file\n"}),
    _config("nightly-reports-outside-shared", _M + _P + _SL + 'shared_dir = "/shared"\n',
            "nightly.toml: executor.shared_dir: the reports dir "),
    _config("nightly-workdir-nul", 'workdir = "w\\u0000"\n' + _M + _P,
            "nightly.toml: workdir: control character U+0000"),
    _config("nightly-reports-dir-a-file", _M + _P + '[reports]\ndir = "r/x"\n',
            "nightly.toml: reports.dir: ", files={"r": "a file\n"}),
    _config("nightly-cache-dir-no-user", 'cache_dir = "~nosuchuser4711"\n' + _M + _P,
            "nightly.toml: cache_dir: ~nosuchuser4711: no such user"),
    _config("nightly-notify-no-host", _M + _P + f'[notify]\nurl = "https:///{SECRET}"\n',
            "nightly.toml: notify.url: the webhook URL has no host", secret=SECRET),
    _config("nightly-notify-empty-host", _M + _P + f'[notify]\nurl = "https://?t={SECRET}"\n',
            "nightly.toml: notify.url: the webhook URL has no host", secret=SECRET),
    _config("nightly-notify-bad-port", _M + _P + f'[notify]\nurl = "https://h:99999/{SECRET}"\n',
            "nightly.toml: notify.url: the webhook URL is not a URL", secret=SECRET),
    _config("nightly-notify-port-zero", _M + _P + f'[notify]\nurl = "https://h:0/{SECRET}"\n',
            "nightly.toml: notify.url: the webhook URL has port 0", secret=SECRET),
    _config("nightly-notify-space", _M + _P + f'[notify]\nurl = "https://h/a {SECRET}"\n',
            "nightly.toml: notify.url: the webhook URL contains whitespace", secret=SECRET),
    _config("nightly-pypi-no-host", 'pypi = "https://"\n' + _M + _P,
            "nightly.toml: pypi: 'https://' has no host"),
    _number("nightly-keep-days-nan", _M + _P + "[retention]\nkeep_days = nan\n",
            "nightly.toml: retention.keep_days: 'nan' is out of range"),
    _number("nightly-keep-days-inf", _M + _P + "[retention]\nkeep_days = inf\n",
            "nightly.toml: retention.keep_days: 'inf' is out of range"),
    _number("nightly-keep-days-negative", _M + _P + "[retention]\nkeep_days = -1\n",
            "nightly.toml: retention.keep_days: '-1' is out of range"),
    _number("nightly-keep-days-huge", _M + _P + f"[retention]\nkeep_days = {_BIG}\n",
            "nightly.toml: retention.keep_days: '9999"),
    _number("nightly-max-size-huge", _M + _P + f"[retention]\nmax_size = {_BIG}\n",
            "nightly.toml: retention.max_size: '9999"),
    _number("nightly-max-size-huge-text", _M + _P + f'[retention]\nmax_size = "{_BIG}G"\n',
            "nightly.toml: retention.max_size: '9999"),
    _number("nightly-max-size-negative", _M + _P + "[retention]\nmax_size = -1\n",
            "nightly.toml: retention.max_size: '-1' is out of range"),
    _number("nightly-max-size-inf", _M + _P + "[retention]\nmax_size = inf\n",
            "nightly.toml: retention.max_size: 'inf' is out of range"),
    _number("nightly-max-size-nan", _M + _P + "[retention]\nmax_size = nan\n",
            "nightly.toml: retention.max_size: 'nan' is out of range"),
    _number("nightly-timeout-huge", _M + f"timeout = {_BIG}\n" + _P,
            "nightly.toml: matrix[0].timeout: '9999"),
    _number("nightly-timeout-nan", _M + "timeout = nan\n" + _P,
            "nightly.toml: matrix[0].timeout: 'nan' is out of range"),
    _number("nightly-timeout-negative", _M + "timeout = -5\n" + _P,
            "nightly.toml: matrix[0].timeout: '-5' is out of range"),
    _number("nightly-executor-time-huge", _M + _P + f"[executor]\ntime = {_BIG}\n",
            "nightly.toml: executor.time: '9999"),
    _number("nightly-executor-poll-inf", _M + _P + "[executor]\npoll = inf\n",
            "nightly.toml: executor.poll: 'inf' is out of range"),
    _number("nightly-history-huge", _M + _P + f"[reports]\nhistory = {_BIG}\n",
            "nightly.toml: reports.history: '9999"),
    _number("nightly-history-fraction", _M + _P + "[reports]\nhistory = 1.5\n",
            "nightly.toml: reports.history: '1.5' is not a number of runs"),
    _file("nightly-config-directory", "{dir}", ": is not a regular file"),
    _file("nightly-config-dev-null", "/dev/null", "--config: /dev/null: is not a regular file"),
    _file("nightly-config-stdin", "/dev/stdin", "--config: /dev/stdin: "),
    _file("nightly-config-missing", "{dir}/nope.toml", "--config: cannot read "),
    _file("nightly-config-directory-run", "{dir}", ": is not a regular file", dry=False),
    _file("nightly-config-too-large", "{dir}/nightly.toml", "larger than 1048576 bytes",
          files={"nightly.toml": "# " + "x" * (1 << 20) + "\n"}),
    _file("nightly-config-not-utf8", "{dir}/nightly.toml", "nightly.toml: (file): not UTF-8",
          files={"nightly.toml": b"\xff\xfe[[matrix]]\n"}),
]

# A cell of a run whose config changed since the controller read it (its sha256 in the manifest).
_CELL = "hip-attention-probe.default.default.gfx942"
_ENTRY = [{"cell": {"id": _CELL, "recipe": "hip-attention-probe", "variant": None,
                    "source": "default", "arch": "gfx942"}, "pin": {}, "decision": "build"}]


def _cell_case(cid: str, manifest: str, needle: str) -> Case:
    return Case(cid, ("nightly", "--config", "{dir}/nightly.toml", "--run-dir",
                      f"{{dir}}/reports/{_RUN}", "--cell", _CELL), EXIT["usage"], needle,
                "integrity", files={"nightly.toml": _M + _P,
                                    f"reports/{_RUN}/manifest.json": manifest},
                writes_nothing=True)


CASES += [
    _cell_case("nightly-cell-config-changed", _manifest(config_sha256="0" * 64, cells=_ENTRY),
               f"nightly.toml: changed since run {_RUN} read it (sha256 "),
    _cell_case("nightly-cell-config-sha-missing", _manifest(cells=_ENTRY),
               "manifest.json: config_sha256: missing or not a sha256"),
]
