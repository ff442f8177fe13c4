"""Write Composable Kernel's fmha units for the ck-fmha-probe and print the ones selected.

Run by CMakeLists.txt at configure time (stdlib only; it imports nothing of rocmbuild):

    python -B select_units.py GENERATE_PY OUT_DIR DIRECTIONS OPT_DIM PATTERN

runs ``GENERATE_PY -d <direction> --receipt 2 --optdim OPT_DIM -o OUT_DIR`` for each of the
comma-separated DIRECTIONS (as flash-attn's setup.py does), then prints the ``;``-joined paths of
the generated ``.cpp`` files whose name without ``.cpp`` matches the shell PATTERN (``*``: all,
the dispatch ``*_api.cpp`` files included), sorted. No match is an error (exit 2).
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path


def select(names: list[str], pattern: str) -> list[str]:
    """The names whose stem matches ``pattern`` (case-sensitive), sorted."""
    return sorted(n for n in names if fnmatch.fnmatchcase(n.removesuffix(".cpp"), pattern or "*"))


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    generate, out, directions, opt_dim, pattern = argv
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.cpp"):  # a reconfigure with other options starts clean
        old.unlink()
    for d in directions.split(","):
        subprocess.run([sys.executable, "-B", generate, "-d", d, "--receipt", "2", "--optdim",
                        opt_dim, "-o", str(out_dir)], check=True, cwd=Path(generate).parent,
                       stdout=subprocess.DEVNULL)
    chosen = select([p.name for p in out_dir.glob("*.cpp")], pattern)
    if not chosen:
        print(f"select_units: no generated unit matches CK_FMHA_UNITS={pattern!r} "
              f"(directions {directions}, OPT_DIM {opt_dim})", file=sys.stderr)
        return 2
    (out_dir / "units.txt").write_text("".join(f"{n}\n" for n in chosen))
    print(";".join(str(out_dir / n) for n in chosen), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
