#!/usr/bin/env bash
# Unpack a ROCm 7.2 SDK tree (headers, CMake configs, device libraries) from Debian experimental.
#
#   scripts/install-rocm-sdk.sh [--dir DIR] [--with-kernels]
#
# What the tree is: Debian's packaging of ROCm 7.2.4 (the -dev packages of HIP, hipBLAS,
# hipBLASLt, hipRAND/rocRAND, rocBLAS, hipCUB/rocPRIM, the device libraries for clang-22, and the
# runtime libraries where they are small), NOT AMD's /opt/rocm layout: libraries live in
# DIR/usr/lib/x86_64-linux-gnu (multiarch), there is no .info/version, and the binaries need
# glibc 2.38 (Debian 12 has 2.36), so nothing in it runs here. It is for compiling and linking
# with clang-22 (scripts/install-hip-toolchain.sh --with-gfx950): rocmbuild --rocm-path DIR/usr.
# The .debs come from a private apt config (the system's apt state is not touched), each checked
# against the SHA256 of the signed Packages index, and are unpacked with dpkg -x: no root needed.
# --with-kernels (or ROCMBUILD_ROCM_SDK_KERNELS=1): also the large runtime libraries (rocBLAS,
# hipBLASLt, rocRAND kernels: about 630 MB to download); without it their sonames are stubs.
# Made here: stubs for the versioned libraries the CMake configs name where only the unversioned
# symlink exists, DIR/usr/bin/hipconfig (a shim printing the version) and DIR/rocm-sdk.json (the
# facts rocmbuild reads). Idempotent. DIR: ${ROCMBUILD_ROCM_SDK_DIR:-$HOME/.cache/rocmbuild/rocm-7.2}.
set -euo pipefail

W=${ROCMBUILD_ROCM_SDK_DIR:-$HOME/.cache/rocmbuild/rocm-7.2}
KERNELS=${ROCMBUILD_ROCM_SDK_KERNELS:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --with-kernels) KERNELS=1 ;;
    --dir) W=$2; shift ;;
    --dir=*) W=${1#--dir=} ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-rocm-sdk.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

VERSION=7.2.4
# the -dev packages a HIP library build needs (+ their -dev dependencies)
DEV=(libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev rocm-device-libs-22 libhipblas-dev
     libhipblas-common-dev libhipblaslt-dev libhiprand-dev librocrand-dev librocblas-dev
     libhipcub-dev librocprim-dev librocm-core-dev)
# runtime libraries small enough to take always (real files for NEEDED and bundling)
RUNTIME=(libamdhip64-7 libhiprtc7 libhiprtc-builtins7 libamd-comgr3 libhsa-runtime64-1
         libhipblas3 libhiprand1 libroctx64-4 librocm-core1)
# the kernel-carrying runtime libraries (hundreds of MB each)
LARGE=(librocblas5 libhipblaslt1 librocrand1 librocsolver0)
PKGS=("${DEV[@]}" "${RUNTIME[@]}")
if [ "$KERNELS" = 1 ]; then PKGS+=("${LARGE[@]}"); fi

say() { echo "[rocm-sdk] $*"; }
t0=$SECONDS
mkdir -p "$W"
W=$(cd "$W" && pwd)
P="$W/usr"
STAMP="$W/.unpacked"
want="$VERSION ${PKGS[*]}"
if [ -f "$W/rocm-sdk.json" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  say "present in $W (ROCm $VERSION, $(wc -w <<<"${PKGS[*]}") packages)"
  exit 0
fi

A="$W/apt"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
: > "$A/status"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian experimental main" \
  > "$A/sources.list"
APTO=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Dir::State::status="$A/status"
      -o APT::Sandbox::User="$(id -un)")
apt-get "${APTO[@]}" update -qq
# each .deb: the version and SHA256 the (InRelease-signed) Packages index gives, checked below
declare -A SHA
for p in "${PKGS[@]}"; do
  rec=$(apt-cache "${APTO[@]}" show "$p" 2>/dev/null | awk '/^$/{exit} {print}') || true
  v=$(sed -n 's/^Version: //p' <<<"$rec")
  s=$(sed -n 's/^SHA256: //p' <<<"$rec")
  if [ -z "$v" ] || [ -z "$s" ]; then
    echo "install-rocm-sdk.sh: $p: not in Debian experimental's index (see $A/sources.list)" >&2
    exit 1
  fi
  case "$v" in "$VERSION"*) ;; *)
    echo "install-rocm-sdk.sh: $p is $v in experimental, expected ROCm $VERSION" >&2; exit 1 ;;
  esac
  SHA[$p]="$s"
  f=$(ls "$A/debs/${p}_"*.deb 2>/dev/null | head -1 || true)
  if [ -z "$f" ] || [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$s" ]; then
    rm -f "$A/debs/${p}_"*.deb
    (cd "$A/debs" && apt-get "${APTO[@]}" download -qq "$p=$v")
  fi
done
bytes=0
rm -rf "$P" "$W/rocm-sdk.json"
for p in "${PKGS[@]}"; do
  f=$(ls "$A/debs/${p}_"*.deb | head -1)
  got=$(sha256sum "$f" | cut -d' ' -f1)
  if [ "$got" != "${SHA[$p]}" ]; then
    echo "install-rocm-sdk.sh: $f: sha256 $got, the Packages index says ${SHA[$p]}" >&2
    rm -f "$f"; exit 1
  fi
  bytes=$((bytes + $(stat -c %s "$f")))
  dpkg -x "$f" "$W"
done
say "unpacked ${#PKGS[@]} packages ($((bytes / 1048576)) MiB of .debs, sha256-checked) into $W"

# Stubs: the CMake configs' imported targets name versioned files (libamdhip64.so.7.2.x,
# librocblas.so.5.x ...) that only the runtime packages carry; for those not unpacked, an empty
# shared library with the right soname lets CMake and the linker work (never loaded: nothing
# runs here). Made only where the real file is absent.
LIB="$P/lib/x86_64-linux-gnu"
stubs=()
while IFS= read -r name; do
  [ -e "$LIB/$name" ] && continue
  base=${name%%.so*}.so
  soname=$(sed -E 's/^(lib[^.]+\.so\.[0-9]+).*/\1/' <<<"$name")
  [ -n "$soname" ] || continue
  clang-22 -shared -nostdlib -fuse-ld=lld -Wl,-soname,"$soname" -o "$LIB/$name" -x c /dev/null
  [ -e "$LIB/$soname" ] || ln -s "$name" "$LIB/$soname"
  [ -e "$LIB/$base" ] || ln -s "$name" "$LIB/$base"
  stubs+=("$name")
done < <(grep -rhoE 'lib[A-Za-z0-9_+-]+\.so\.[0-9][0-9.]*[0-9]' "$LIB/cmake" 2>/dev/null | sort -u)
if [ ${#stubs[@]} -gt 0 ]; then say "stubs (no runtime package unpacked): ${stubs[*]}"; fi

# hipconfig: Debian's is a C++ binary needing glibc 2.38; CMake projects (bitsandbytes) only ask
# it for the version. HIP's version is the patch-encoded one of the HIP headers.
HV=$(sed -n 's/^#define HIP_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
     "$P/include/hip/hip_version.h" | paste -sd.)
mkdir -p "$P/bin"
rm -f "$P/bin/hipconfig"
cat > "$P/bin/hipconfig" <<EOF
#!/bin/sh
# rocmbuild's shim for Debian's hipconfig (a glibc 2.38 binary): the HIP version only.
case "\${1:---version}" in
  --version|-v) printf '%s\n' "$HV" ;;
  --path|-p) printf '%s\n' "$P" ;;
  --rocmpath|-R) printf '%s\n' "$P" ;;
  --platform|-P) printf 'amd\n' ;;
  --compiler|-c) printf 'clang\n' ;;
  *) echo "hipconfig (rocmbuild shim): only --version, --path, --rocmpath, --platform" >&2; exit 2 ;;
esac
EOF
chmod +x "$P/bin/hipconfig"

BC=$(dirname "$(find "$P/lib" -name ocml.bc -path '*amdgcn*' | head -1)")
python3 - "$W" "$VERSION" "$HV" "$P" "$LIB" "$BC" "$KERNELS" "${stubs[@]}" <<'PY'
import json, sys
w, version, hip, root, lib, bc, kernels, *stubs = sys.argv[1:]
facts = {
    "format": 1, "version": version, "hip_version": hip, "layout": "debian",
    "origin": "Debian experimental ROCm 7.2.4 packages, unpacked with dpkg -x",
    "root": root, "include": f"{root}/include", "lib": lib, "cmake": f"{lib}/cmake",
    "device_lib_path": bc, "hipconfig": f"{root}/bin/hipconfig",
    "kernels": kernels == "1", "stubs": sorted(stubs),
}
with open(f"{w}/rocm-sdk.json", "w") as f:
    json.dump(facts, f, indent=2)
    f.write("\n")
PY
echo "$want" > "$STAMP"
say "ROCm $VERSION (HIP $HV, layout debian): --rocm-path $P; facts in $W/rocm-sdk.json" \
    "($((SECONDS - t0))s)"
