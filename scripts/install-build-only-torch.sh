#!/usr/bin/env bash
# Make a build-only ROCm torch: a venv whose torch compiles extensions like a ROCm build of torch,
# against Debian's ROCm 7.2.4 SDK tree, on a machine where no ROCm torch can be installed.
#
#   scripts/install-build-only-torch.sh [--torch 2.13|2.14] [--venv DIR]
#
# What it is: the CPU torch wheel (2.13: torch==2.13.0, the fork line's; 2.14: torch==2.14.1, the
# main line's, PyPI's CUDA wheel, whose CUDA libraries are never loaded) in its own venv
# (default .venv-rocm-torch/, which also holds rocmbuild, editable), turned by
# scripts/build_only_torch.py into a torch that cpp_extension, flash-attn's setup.py and
# DeepSpeed's op builder take for a ROCm torch:
#   - the HIP headers (ATen/hip, c10/hip, ATen/native/**/hip), written by torch's own hipify from
#     the wheel's CUDA headers, plus the config headers a ROCm build generates;
#   - torch.version.hip / torch.version.rocm: the SDK's HIP 7.2.53211 / ROCm 7.2.4;
#   - libc10_hip.so and libtorch_hip.so in torch/lib: link stubs exporting exactly the functions
#     and variables the hipified headers declare with C10_CUDA_API / TORCH_CUDA_*_API (read from
#     clang's AST of every hipified header), so a link keeps them NEEDED and an undefined symbol
#     either resolves against them or is reported (rocmbuild's link check);
#   - cpp_extension's ROCM_HOME: <venv>/rocm-home, whose bin/hipcc runs clang++-22 against the
#     SDK (hipcc's own flags: -x hip for sources, --rocm-path, the device libraries, the SDK's
#     headers first) and whose include and lib are the SDK's.
#   - torch/_rocmbuild_build_only.json: the facts above. rocmbuild reads it: doctor shows the
#     torch as build-only, and every wheel built against it says so in its provenance and label
#     (+...buildonly...), and validate, publish, promote and the nightly refuse it.
# Nothing built against it can load: its libc10_hip/libtorch_hip are stubs, and the real HIP
# runtime needs an AMD GPU. It exists to prove that a recipe compiles and links.
# Needs: scripts/install-hip-toolchain.sh --with-gfx950 (clang-22) and scripts/install-rocm-sdk.sh
# (both run by scripts/setup.sh). Idempotent: a second run takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=2.13
VENV=.venv-rocm-torch
while [ $# -gt 0 ]; do
  case "$1" in
    --torch) TORCH=${2:-}; shift ;;
    --torch=*) TORCH=${1#--torch=} ;;
    --venv) VENV=${2:-}; shift ;;
    --venv=*) VENV=${1#--venv=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
               exit 0 ;;
    *) echo "install-build-only-torch.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$TORCH" in
  2.13) SPEC=torch==2.13.0 ;;
  2.14) SPEC=torch==2.14.1 ;;
  *) echo "install-build-only-torch.sh: --torch $TORCH: 2.13 or 2.14" >&2; exit 2 ;;
esac
say() { echo "[build-only-torch] $*"; }
t0=$SECONDS
SDK_DIR=${ROCMBUILD_ROCM_SDK_DIR:-$HOME/.cache/rocmbuild/rocm-7.2}
FACTS="$SDK_DIR/usr/share/rocmbuild/rocm-sdk.json"
if [ ! -f "$FACTS" ]; then
  echo "install-build-only-torch.sh: no ROCm SDK tree at $SDK_DIR (run scripts/install-rocm-sdk.sh)" >&2
  exit 1
fi
CLANG=$(command -v clang++-22 || true)
if [ -z "$CLANG" ]; then
  echo "install-build-only-torch.sh: needs clang++-22 (scripts/install-hip-toolchain.sh --with-gfx950)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  python3 -m venv "$VENV"
fi
VENV=$(cd "$VENV" && pwd)
stamp="$VENV/.rocmbuild-build-only"
want="$(cat scripts/install-build-only-torch.sh scripts/build_only_torch.py "$FACTS" \
        | sha256sum | cut -c1-16) $SPEC"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "present in $VENV ($SPEC, build-only)"
  exit 0
fi
rm -f "$stamp"
say "installing $SPEC, rocmbuild and the build tools into $VENV"
# an earlier run edited torch's files and wrote new ones: start again from the wheel's bytes
rm -rf "$VENV"/lib/python3*/site-packages/torch "$VENV"/lib/python3*/site-packages/torch-*.dist-info
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$SPEC" -e . \
  setuptools wheel packaging psutil ninja numpy 'cmake>=3.27' 2>&1 \
  | grep -v -E "^WARNING: Location .* is ignored" || true
"$VENV/bin/python" scripts/build_only_torch.py --sdk-facts "$FACTS" --clang "$CLANG" \
  --home "$VENV/rocm-home"
echo "$want" > "$stamp"
say "ready in $((SECONDS - t0))s: ROCM_PATH=$SDK_DIR/usr $VENV/bin/python -m rocmbuild doctor"
