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
# The runtime packages (real libamdhip64.so.7 ...) go to DIR/runtime, off the link path (they
# need glibc 2.38); --with-kernels (or ROCMBUILD_ROCM_SDK_KERNELS=1) adds the large ones (rocBLAS,
# hipBLASLt, rocRAND kernels: about 630 MB to download). Made here: link stubs with the
# real sonames and symbols for the versioned libraries the -dev symlinks and CMake configs name,
# DIR/usr/bin/hipconfig (a shim printing the version) and DIR/usr/share/rocmbuild/rocm-sdk.json
# (the facts rocmbuild reads). Idempotent.
# DIR: ${ROCMBUILD_ROCM_SDK_DIR:-$HOME/.cache/rocmbuild/rocm-7.2}.
set -euo pipefail

W=${ROCMBUILD_ROCM_SDK_DIR:-$HOME/.cache/rocmbuild/rocm-7.2}
KERNELS=${ROCMBUILD_ROCM_SDK_KERNELS:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --with-kernels) KERNELS=1 ;;
    --dir) W=$2; shift ;;
    --dir=*) W=${1#--dir=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
               exit 0 ;;
    *) echo "install-rocm-sdk.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

VERSION=7.2.4
# the -dev packages a HIP library build needs (+ their -dev dependencies)
DEV=(libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev rocm-device-libs-22 libhipblas-dev
     libhipblas-common-dev libhipblaslt-dev libhiprand-dev librocrand-dev librocblas-dev
     libhipcub-dev librocprim-dev librocm-core-dev
     # torch's own HIP headers (ATen/hip, c10/hip: scripts/install-build-only-torch.sh) include
     # thrust/complex.h and the hipSPARSE / hipSOLVER headers
     librocthrust-dev libhipsparse-dev libhipsolver-dev librocsparse-dev librocsolver-dev
     # and torch's CMake config (LoadHIP.cmake: CMake projects against a ROCm torch, e.g. vLLM)
     # finds these too
     libmiopen-dev libhipfft-dev librocm-smi-dev librccl-dev)
# runtime libraries small enough to take always (real files for NEEDED and bundling)
RUNTIME=(libamdhip64-7 libhiprtc7 libhiprtc-builtins7 libamd-comgr3 libhsa-runtime64-1
         libhipblas3 libhiprand1 libroctx64-4 librocm-core1)
# the kernel-carrying runtime libraries (hundreds of MB each)
LARGE=(librocblas5 libhipblaslt1 librocrand1 librocsolver0)
PKGS=("${DEV[@]}" "${RUNTIME[@]}")
if [ "$KERNELS" = 1 ]; then PKGS+=("${LARGE[@]}"); fi

say() { echo "[rocm-sdk] $*"; }
for tool in clang-22 readelf python3 dpkg apt-get; do
  command -v "$tool" >/dev/null || {
    echo "install-rocm-sdk.sh: needs $tool (clang-22: scripts/install-hip-toolchain.sh --with-gfx950)" >&2
    exit 1; }
done
t0=$SECONDS
mkdir -p "$W"
W=$(cd "$W" && pwd)
P="$W/usr"
FACTS="$P/share/rocmbuild/rocm-sdk.json"
STAMP="$W/.unpacked"
want="$VERSION ${PKGS[*]}"
if [ -f "$FACTS" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
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
RT="$W/runtime"
rm -rf "$P" "$RT"
for p in "${PKGS[@]}"; do
  f=$(ls "$A/debs/${p}_"*.deb | head -1)
  got=$(sha256sum "$f" | cut -d' ' -f1)
  if [ "$got" != "${SHA[$p]}" ]; then
    echo "install-rocm-sdk.sh: $f: sha256 $got, the Packages index says ${SHA[$p]}" >&2
    rm -f "$f"; exit 1
  fi
  bytes=$((bytes + $(stat -c %s "$f")))
  case " ${DEV[*]} " in *" $p "*) dpkg -x "$f" "$W" ;; *) dpkg -x "$f" "$RT" ;; esac
done
say "unpacked ${#PKGS[@]} packages ($((bytes / 1048576)) MiB of .debs, sha256-checked) into $W"

# Link stubs. The runtime libraries (in $RT: real files, for readelf and bundling) need glibc 2.38
# and each other: on Debian 12 a link that pulls them in (CMake's compiler check links an
# executable) fails on __isoc23_strtol@GLIBC_2.38. So the link dir gets, for each versioned
# library the -dev symlinks and CMake configs name (libamdhip64.so.7.2.53211 ...), a stub: a
# shared library with the real soname and the real dynamic symbols and versions (read from
# $RT's file), or, where that runtime package is not unpacked (rocBLAS, hipBLASLt, rocRAND
# without --with-kernels), the C functions its headers declare. The symbols matter: Debian's
# gcc links with --as-needed, which drops a NEEDED entry for a library that defines nothing used.
LIB="$P/lib/x86_64-linux-gnu"
RTLIB="$RT/usr/lib/x86_64-linux-gnu"
stubs=()
names=$( { grep -rhoE 'lib[A-Za-z0-9_+-]+\.so\.[0-9][0-9.]*[0-9]' "$LIB/cmake" 2>/dev/null
           for l in "$LIB"/lib*.so; do [ -L "$l" ] && basename "$(readlink "$l")"; done
           for l in "$RTLIB"/lib*.so.*; do [ -f "$l" ] && [ ! -L "$l" ] && basename "$l"; done
         } | sort -u | awk '{ print length($0), $0 }' | sort -k1,1nr -k2 | cut -d' ' -f2)
# (longest first: libamdhip64.so.7.2.53211 becomes the file, libamdhip64.so.7 its link)
SD="$W/stub-src"
rm -rf "$SD"; mkdir -p "$SD"
for name in $names; do
  [ -e "$LIB/$name" ] && continue
  stem=${name%%.so*}; stem=${stem#lib}
  if [ -f "$RTLIB/$name" ]; then
    soname=$(readelf -d "$RTLIB/$name" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    readelf --dyn-syms -W "$RTLIB/$name" > "$SD/$name.syms"
    from=real
  else
    soname=$(sed -E 's/^(lib[^.]+\.so\.[0-9]+).*/\1/' <<<"$name")
    : > "$SD/$name.syms"
    from=headers
  fi
  python3 - "$SD/$name" "$stem" "$P/include" <<'PY'
import os, re, sys
out, stem, include = sys.argv[1:]
syms = {}  # name -> version ("" unversioned)
for line in open(out + ".syms"):
    f = line.split()
    if len(f) < 8 or f[6] == "UND" or f[3] not in ("FUNC", "OBJECT", "IFUNC") \
            or f[4] not in ("GLOBAL", "WEAK"):
        continue
    name, sep, ver = f[7].partition("@@")
    if not sep:
        if "@" in name:
            continue  # a non-default version: nothing new links against it
        ver = ""
    syms[name] = ver
if not syms:  # no runtime file: the C functions the library's own headers declare
    pat = re.compile(rf"\b({re.escape(stem)}[A-Za-z0-9_]*)\s*\(", re.I)
    for d in {os.path.join(include, stem), os.path.join(include, stem.replace("lt", ""))}:
        for base, _, files in os.walk(d):
            for fn in files:
                if fn.endswith((".h", ".hpp")):
                    for m in pat.finditer(open(os.path.join(base, fn), errors="replace").read()):
                        syms.setdefault(m.group(1), "")
with open(out + ".c", "w") as c:
    for i, name in enumerate(sorted(syms)):
        c.write(f'void rocmbuild_stub_{i}(void) __asm__("{name}");\n'
                f'void rocmbuild_stub_{i}(void) {{}}\n')
versions = sorted({v for v in syms.values() if v})
with open(out + ".map", "w") as m:
    for v in versions:
        m.write(f"{v} {{ global: " + " ".join(f'"{n}";' for n, w in sorted(syms.items())
                                                  if w == v) + " };\n")
PY
  vs=()
  [ -s "$SD/$name.map" ] && vs=(-Wl,--version-script="$SD/$name.map")
  clang-22 -shared -nostdlib -fuse-ld=lld -Wl,-soname,"$soname" "${vs[@]}" \
    -o "$LIB/$name" "$SD/$name.c"
  [ "$soname" = "$name" ] || [ -e "$LIB/$soname" ] || ln -s "$name" "$LIB/$soname"
  base=${name%%.so*}.so
  [ -e "$LIB/$base" ] || ln -s "$soname" "$LIB/$base"
  stubs+=("$name")
  say "stub $name (soname $soname, $(grep -c '__asm__' "$SD/$name.c") symbols from the $from)"
done

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
mkdir -p "$(dirname "$FACTS")"
python3 - "$FACTS" "$VERSION" "$HV" "$P" "$LIB" "$BC" "$KERNELS" "$RTLIB" "${stubs[@]}" <<'PY'
import json, sys
out, version, hip, root, lib, bc, kernels, rtlib, *stubs = sys.argv[1:]
facts = {
    "format": 1, "version": version, "hip_version": hip, "layout": "debian",
    "origin": "Debian experimental ROCm 7.2.4 packages, unpacked with dpkg -x",
    "root": root, "include": f"{root}/include", "lib": lib, "cmake": f"{lib}/cmake",
    "device_lib_path": bc, "hipconfig": f"{root}/bin/hipconfig",
    "runtime_lib": rtlib, "kernels": kernels == "1", "stubs": sorted(stubs),
}
with open(out, "w") as f:
    json.dump(facts, f, indent=2)
    f.write("\n")
PY
echo "$want" > "$STAMP"
say "ROCm $VERSION (HIP $HV, layout debian): --rocm-path $P; facts in $FACTS" \
    "($((SECONDS - t0))s)"
