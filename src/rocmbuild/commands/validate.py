"""``rocmbuild validate``: install wheels in a fresh venv, import, guard, audit, kernel gate."""

from __future__ import annotations

import argparse

from rocmbuild.commands import common


def register(sub: common.Subparsers) -> None:
    p = sub.add_parser(
        "validate",
        help="install wheels in a fresh venv, import, check torch compatibility, audit, and gate "
        "the attention kernels on a GPU",
        description="Validate wheels: isolated install and import, torch compatibility guard, "
        "code-object audit, and (on a GPU) attention correctness and throughput. Failing wheels "
        "move to <workdir>/broken/.")
    p.add_argument("wheels", nargs="*", help="wheel files to validate together")
    common.add_arch(p, "gfx targets the audit requires", "the wheel's rocmbuild.json archs")
    p.add_argument("--torch-from", default=None, help="site-packages dir holding the torch to "
                   "validate against " + common.env_help("torch_from", "the torch this Python "
                                                         "imports"))
    p.add_argument("--kernels", action=argparse.BooleanOptionalAction, default=True,
                   help="run the GPU kernel gate (SKIPPED without a GPU) [default on]")
    p.add_argument("--kernel", default="auto", choices=["auto", "flash-attn", "sdpa", "hipattn"],
                   help="kernel under test; auto: flash-attn when a wheel provides it, plus the "
                   "hipattn probe on AMD hosts; sdpa checks the harness itself")
    p.add_argument("--quick", action="store_true", help="small correctness/throughput subset")
    p.add_argument("--inject-fault", choices=["scale", "no-causal", "nan"], default=None,
                   help="self-test: wrap the kernel with a deliberate error; the gate must fail")
    p.add_argument("--cross-check", action="store_true",
                   help="also time every call with triton.testing.do_bench")
    p.add_argument("--baseline", default=None, help="JSON report of the last good run on this "
                   "host/arch; fail on a throughput drop beyond max(10%%, 3x run-to-run spread)")
    common.add_json(p, "the report")
    p.add_argument("--json-file", default=None, metavar="FILE",
                   help="write the JSON report here")
    p.add_argument("--md", default=None, metavar="FILE", help="write the Markdown report here")
    p.add_argument("--html", default=None, metavar="FILE", help="write the HTML report here")
    p.add_argument("--keep-broken", action="store_true",
                   help="leave failing wheels in place instead of moving them to broken/")
    p.add_argument("--keep-venv", action="store_true", help="keep the validation venv")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rocmbuild import validate

    return validate.cli_validate(args)
