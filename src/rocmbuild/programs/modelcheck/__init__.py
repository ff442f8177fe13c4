"""The model check and the stack step: a small LLaMA-style decoder, built in code, run through
transformers.

Self-contained like ``kernelgate``: it imports only the standard library at module level, and
torch, transformers and the wheels under test inside functions; never rocmbuild. rocmbuild
copies the directory into the validation venv and runs ``python -m <package> model|stack --json
OUT`` there; the JSON it writes is read back by ``rocmbuild.validate.modelrun``.

- decoder.py    the sizes, the decoder (config built in code, random weights from a seed), one
                forward and backward with a named attention implementation, the injected fault
- compare.py    deviations between runs and the verdict against the references' own spread
- check.py      the model check: every case, the wheel's attention against torch SDPA and eager
- stackstep.py  the stack step: one training step with flash-attn, peft, bitsandbytes, DeepSpeed
- harness.py    the command line (``main``); the JSON is always written

Importing this package (or any of its modules) does not import torch.
"""

from __future__ import annotations

# The deliberate faults ``--inject-fault`` wraps the wheel's attention with in the model check:
# ``last-tile``: in the last partial query tile of each call (rows TILE * (S // TILE) .. S - 1)
# every row gets the output of the row before it (an off-by-one store of that tile).
FAULTS: tuple[str, ...] = ("last-tile",)
TILE = 64
"""Query rows per tile of the injected fault (BLOCK_M of the flash-attn kernels is 64 or 128)."""

MULTIPLE = 8.0
"""The model check passes a case when, for the logits and for every parameter's gradient, the
wheel's deviation from each reference (torch SDPA, eager) is at most MULTIPLE times the
references' deviation from each other. Chosen from 80 cases (5 seeds x 4 sizes x 2 dtypes x with
and without padding) on an NVIDIA H200: the good wheel's worst ratio was 5.8 (fp16 GQA key
gradients) where it supports the case; the ``last-tile`` fault's was 14.9-672 in all 16 cases on
an H100 (docs/dev/validate-runs.md, "Model check")."""

PARTS: tuple[str, ...] = ("flash-attn", "peft", "bitsandbytes", "deepspeed")
"""The stack step's parts, in the order they run."""

NO_TRANSFORMERS = "transformers is not installed in the validation venv"
"""How a check SKIPPED for want of transformers begins its reason."""
