"""``python -m <modelcheck> model|stack --json OUT``: the entry point the validation venv runs."""

from __future__ import annotations

import sys

from .harness import main

if __name__ == "__main__":
    sys.exit(main())
