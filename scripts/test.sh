#!/usr/bin/env bash
# Run the test suite (sets up first; a second setup run takes seconds). Extra args go to pytest.
# Two pytest-xdist workers by default (ROCMBUILD_TEST_WORKERS=N for N, 0 for one process): tests
# that share something built once (a session fixture, a module's fixtures, the Slurm cluster) stay
# on one worker (tests/conftest.py, --dist loadgroup); a later -n/--dist in the args wins.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
workers=${ROCMBUILD_TEST_WORKERS:-2}
xdist=()
if [ "$workers" != 0 ]; then xdist=(-n "$workers" --dist loadgroup); fi
exec .venv/bin/python -m pytest "${xdist[@]}" "$@"
