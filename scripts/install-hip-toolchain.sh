#!/usr/bin/env bash
# Provision a CPU-only ROCm/HIP device-compile toolchain on Debian 12 (no GPU, no AMD repos).
#
#   scripts/install-hip-toolchain.sh [--with-gfx950] [--dir DIR]
#
# Default: clang-19 + Debian's ROCm 5.2 headers/device libs + two synthesized bitcode files
# (oclc_isa_version_941/942.bc, assembled by clang-19 -x ir) -> real gfx90a and gfx942 code objects.
# --with-gfx950 (or ROCMBUILD_WITH_GFX950=1): also clang-22 (bookworm-security) + ROCm 7.0.2
# device libs and HIP 6.4.3 headers from Debian forky, downloaded with a private apt config and
# unpacked with dpkg -x into DIR (the system's apt state is not touched) -> adds gfx950; and
# forky's hipify-perl (for [hipify] tool = "perl"; bookworm has none).
#
# Writes DIR/toolchain.json, which rocmbuild reads to find the compilers. Idempotent: a second
# run only checks what is there. DIR defaults to ${ROCMBUILD_TOOLCHAIN_DIR:-$HOME/.cache/rocmbuild/hiptc}.
# See shared/notes/toolchain.md for the facts behind every step.
set -euo pipefail
# (grep -q on a pipe would close it early: with pipefail, apt-cache's SIGPIPE fails the test)
has_candidate() { local p; p=$(apt-cache policy "$1" 2>/dev/null); grep -q 'Candidate: [0-9]' <<<"$p"; }

W=${ROCMBUILD_TOOLCHAIN_DIR:-$HOME/.cache/rocmbuild/hiptc}
WITH_950=${ROCMBUILD_WITH_GFX950:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --with-gfx950) WITH_950=1 ;;
    --dir) W=$2; shift ;;
    --dir=*) W=${1#--dir=} ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-hip-toolchain.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

t0=$SECONDS
mkdir -p "$W"
W=$(cd "$W" && pwd)
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

say() { echo "[hip-toolchain] $*"; }

missing_pkgs() {  # print the packages of "$@" that are not installed
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || echo "$p"
  done
}

APT_UPDATED=0
apt_install() {
  local need
  need=$(missing_pkgs "$@")
  if [ -z "$need" ]; then say "apt: already installed: $*"; return; fi
  if [ "$APT_UPDATED" = 0 ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
  say "apt: installed: $(echo $need)"
}

# --- 1. clang-19 set + Debian ROCm 5.2 headers and device libs (gfx90a, gfx942) ------------------
apt_install clang-19 lld-19 clang-tools-19 libclang-rt-19-dev libamdhip64-dev libhsa-runtime-dev \
  rocm-device-libs

BC=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
D19="$W/devlibs19"
if [ -f "$D19/oclc_isa_version_942.bc" ] && [ -f "$D19/oclc_isa_version_941.bc" ] \
   && [ -e "$D19/ocml.bc" ]; then
  say "devlibs19: present in $D19"
else
  mkdir -p "$D19"
  ln -sf "$BC"/*.bc "$D19/"
  DL=$(echo 'int x;' | clang-19 -x c --target=amdgcn-amd-amdhsa -nogpulib -S -emit-llvm - -o - \
       | grep '^target datalayout')
  for p in 941:9401 942:9402; do
    printf '%s\ntarget triple = "amdgcn-amd-amdhsa"\n@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %s, align 4\n' \
      "$DL" "${p#*:}" | clang-19 -x ir --target=amdgcn-amd-amdhsa -nogpulib -O0 -c -emit-llvm - \
        -o "$D19/oclc_isa_version_${p%%:*}.bc"
  done
  say "devlibs19: linked Debian bitcode + synthesized oclc_isa_version_941/942.bc into $D19"
fi

# --- 2. optional: clang-22 + forky ROCm 7.0.2 device libs + HIP 6.4.3 headers (adds gfx950) ------
F="$W/forky"
DL21="$F/usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode"
HIP64="$F/usr/include"
if [ "$WITH_950" = 1 ]; then
  if ! has_candidate clang-22; then
    if [ "$APT_UPDATED" = 0 ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
    if ! has_candidate clang-22; then
      echo "install-hip-toolchain.sh: clang-22 has no apt candidate; it comes from" \
        "bookworm-security (deb http://security.debian.org/debian-security bookworm-security main)" >&2
      exit 1
    fi
  fi
  apt_install clang-22 lld-22 clang-tools-22 libclang-rt-22-dev
  if [ -f "$DL21/ocml.bc" ] && [ -f "$HIP64/hip/hip_runtime.h" ]; then
    say "forky device libs + HIP headers: present in $F"
  else
    A="$W/apt-forky"
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
    : > "$A/status"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian forky main" \
      > "$A/sources.list"
    APTO=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Dir::State::status="$A/status"
          -o APT::Sandbox::User=root)
    apt-get "${APTO[@]}" update -qq
    rm -f "$A"/*.deb
    (cd "$A" && apt-get "${APTO[@]}" download -qq rocm-device-libs-21 libamdhip64-dev)
    rm -rf "$F"
    for d in "$A"/*.deb; do dpkg -x "$d" "$F"; done
    [ -f "$DL21/ocml.bc" ] || { echo "forky device libs not found at $DL21" >&2; exit 1; }
    say "forky: unpacked $(cd "$A" && ls -- *.deb | tr '\n' ' ')into $F"
  fi
  # hipify-perl (a perl script, arch all) for [hipify] tool = "perl": not in bookworm
  if [ -x "$F/usr/bin/hipify-perl" ]; then
    say "forky hipify-perl: present in $F/usr/bin"
  else
    A="$W/apt-forky"
    APTO=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Dir::State::status="$A/status"
          -o APT::Sandbox::User=root)
    compgen -G "$A/lists/*forky*" >/dev/null || apt-get "${APTO[@]}" update -qq
    mkdir -p "$A/perl"
    rm -f "$A"/perl/*.deb
    (cd "$A/perl" && apt-get "${APTO[@]}" download -qq hipify-perl)
    dpkg -x "$A"/perl/hipify-perl_*.deb "$F"
    [ -x "$F/usr/bin/hipify-perl" ] || { echo "hipify-perl not found in $F/usr/bin" >&2; exit 1; }
    say "forky: unpacked $(cd "$A/perl" && ls -- *.deb) into $F"
  fi
fi

# --- 3. toolchain.json ----------------------------------------------------------------------------
ver() { "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9.]*\).*/\1/p' | head -1; }
C19=$(command -v clang++-19)
C22=""
if [ "$WITH_950" = 1 ] || { command -v clang++-22 >/dev/null && [ -f "$DL21/ocml.bc" ]; }; then
  C22=$(command -v clang++-22 || true)
fi
PERL=""
if [ -x "$F/usr/bin/hipify-perl" ]; then PERL="$F/usr/bin/hipify-perl"; fi
python3 - "$W" "$C19" "$(ver "$C19")" "$D19" "$C22" "$( [ -n "$C22" ] && ver "$C22")" "$DL21" "$HIP64" "$PERL" <<'PY'
import json, sys
w, c19, v19, d19, c22, v22, dl21, hip64, perl = sys.argv[1:10]
compilers = [{
    "name": "clang-19", "kind": "clang", "path": c19, "version": v19, "rocm_path": "/usr",
    "device_lib_path": d19, "archs": ["gfx90a", "gfx942"],
    "flags": ["--rocm-path=/usr", f"--rocm-device-lib-path={d19}"],
}]
if c22:
    compilers.append({
        "name": "clang-22", "kind": "clang", "path": c22, "version": v22, "rocm_path": "/usr",
        "device_lib_path": dl21, "archs": ["gfx90a", "gfx942", "gfx950"],
        "flags": ["--rocm-path=/usr", f"--rocm-device-lib-path={dl21}", "-isystem", hip64,
                  "-D__AMDGCN_WAVEFRONT_SIZE=64"],
    })
with open(f"{w}/toolchain.json", "w") as f:
    tools = {"hipify-perl": perl} if perl else {}
    json.dump({"format": 1, "dir": w, "compilers": compilers, "tools": tools}, f, indent=2)
    f.write("\n")
for c in compilers:
    print(f"[hip-toolchain] {c['name']}: {c['path']} ({c['version']}) archs {','.join(c['archs'])}")
    print(f"[hip-toolchain]   flags: {' '.join(c['flags'])}")
PY
say "wrote $W/toolchain.json in $((SECONDS - t0))s"
