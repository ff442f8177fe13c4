"""The attention kernel gate: correctness against an fp64 reference, and throughput.

This package is self-contained: it imports only the standard library and, inside functions,
torch and the kernel under test; never rocmbuild. rocmbuild copies the directory into the
validation venv and runs it there (``python -m <package> --kernel flash-attn --json OUT``); the
JSON it writes is read back as ``rocmbuild.validate.kernelrun.KernelRun``.

- matrix.py     the correctness cases and the throughput shapes
- reference.py  the fp64 reference, the error metric, tolerances, one correctness case
- adapters.py   the kernels under test (flash-attn, sdpa, hipattn) and fault injection
- timing.py     FLOPs, peak table, device-event timing with input rotation, do_bench cross-check
- harness.py    the whole gate in one process (``gate``) and its command line (``main``)

Importing this package (or any of its modules) does not import torch.
"""

from __future__ import annotations

# The kernels under test (adapters.ADAPTERS has one class per name) and the deliberate faults
# ``--inject-fault`` wraps them with. Here so rocmbuild can check options without torch.
ADAPTER_NAMES: tuple[str, ...] = ("flash-attn", "sdpa", "hipattn")
FAULTS: tuple[str, ...] = ("scale", "no-causal", "nan", "zero-row", "softmax-shift",
                           "head-swap", "slow")
