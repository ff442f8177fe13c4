#!/usr/bin/env bash
# Run the test suite (sets up first; a second setup run takes seconds). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
