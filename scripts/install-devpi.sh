#!/bin/sh
# Install devpi-server into its own venv (kept apart from the project's venv: it brings pyramid,
# waitress, argon2 ... that rocmbuild does not need). The devpi test looks for it at
# $ROCMBUILD_DEVPI_VENV (default: .venv-devpi in the repository root) and skips without it.
# Takes ~20 s on 2 cores.
set -eu
VENV="${ROCMBUILD_DEVPI_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-devpi}"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "devpi-server>=6"
"$VENV/bin/devpi-server" --version
