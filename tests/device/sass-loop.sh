#!/bin/sh
# sass-loop.sh - what NVIDIA's assembler makes of a kernel's loops, without a
# GPU: kernels/common.cl and a family's source compiled by clang for nvptx
# (OpenCL builtins from libclc), the PTX assembled by ptxas for ARCH, the
# machine code read back by cuobjdump.  Prints the kernel's registers and, for
# each loop (a backward branch and what lies between), its instructions, how
# many are tensor-core (IMMA/HMMA) or dp4a (IDP) ones, and the most frequent
# opcodes.
#
#   sh tests/device/sass-loop.sh FAMILY KERNEL ["-DNAME=value ..."] [ARCH]
#   e.g. sh tests/device/sass-loop.sh bitlinear bl_gemm_mma "-DMMA_NT=32" sm_90
#
# KEEP=FILE keeps the whole disassembly there (to read a loop's schedule).
# PTXAS_OPTS adds options to ptxas (e.g. -maxrregcount=128).
# PTX=FILE assembles that PTX instead of compiling the source with clang:
# the PTX NVIDIA's OpenCL compiler made, as the binary cache keeps it (a
# <key>.bin file of the cache directory, read past its 32-byte header), so
# that the loop read is the driver's front end's.  FAMILY is then unused.
#
# Needs clang, libclc's nvptx64--nvidiacl.bc (Debian: libclc-14), ptxas (the
# CUDA toolkit) and cuobjdump (the CUDA toolkit, or the nvidia-cuda-cuobjdump
# Python package, with nvdisasm from nvidia-cuda-nvdisasm on the PATH);
# PTXAS, CUOBJDUMP and CLC name them where they are not on
# the PATH.  This is clang's front end and optimizer, not NVIDIA's OpenCL
# compiler: read it to compare two versions of a kernel instruction by
# instruction, then time both on the device (registers and schedules there
# differ).  __NV_CL_C_VERSION is defined as NVIDIA's compiler does, so the
# NVIDIA paths are built.
set -eu
family=${1:-}
kernel=${2:-}
opts=${3:-}
arch=${4:-sm_90}
if [ -z "$family" ] || [ -z "$kernel" ]; then
    echo "usage: $0 FAMILY KERNEL [\"-DNAME=value ...\"] [ARCH]" >&2
    exit 2
fi
src=kernels/$family.cl
CLC=${CLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
PTXAS=${PTXAS:-ptxas}
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
tools="$PTXAS $CUOBJDUMP"
if [ -n "${PTX:-}" ]; then
    [ -r "$PTX" ] || { echo "$0: $PTX not found" >&2; exit 2; }
else
    [ -r "$src" ] || { echo "$0: $src not found (run from the repository root)" >&2; exit 2; }
    [ -r "$CLC" ] || { echo "$0: libclc bitcode $CLC not found (install libclc, or set CLC)" >&2; exit 2; }
    tools="clang $tools"
fi
for t in $tools; do
    command -v "$t" >/dev/null 2>&1 || { echo "$0: $t not found" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp "$tmp/k.sass" "$KEEP"; rm -rf "$tmp"' EXIT
if [ -n "${PTX:-}" ]; then
    case $(head -c 8 "$PTX") in
    BNCLBIN1) tail -c +33 "$PTX" | tr -d '\000' > "$tmp/k.ptx" ;;
    *) cp "$PTX" "$tmp/k.ptx" ;;
    esac
else
# OpenCL C 1.2's plain `inline` makes no definition of its own under clang
# (C99 rules); NVIDIA's compiler makes one.  `asm` is a GNU keyword there.
cat kernels/common.cl "$src" | sed 's/^inline /static inline /' > "$tmp/k.cl"
# shellcheck disable=SC2086 # the options are words
clang -cl-std=CL1.2 -target nvptx64--nvidiacl -Xclang -target-cpu -Xclang sm_80 \
    -Xclang -target-feature -Xclang +ptx75 -O3 -S -Xclang -finclude-default-header \
    -Xclang -mlink-bitcode-file -Xclang "$CLC" -D__NV_CL_C_VERSION=120 -Dasm=__asm__ $opts \
    -Wno-everything -o "$tmp/k.ptx" "$tmp/k.cl"
fi
# shellcheck disable=SC2086 # PTXAS_OPTS: words, e.g. -maxrregcount=128
"$PTXAS" -arch="$arch" -v -O3 ${PTXAS_OPTS:-} -o "$tmp/k.cubin" "$tmp/k.ptx" 2> "$tmp/ptxas.txt"
grep -A3 "'$kernel'" "$tmp/ptxas.txt" | grep -o 'Used [0-9]* registers.*' || {
    echo "$0: no kernel $kernel in $src with these options" >&2
    exit 1
}
"$CUOBJDUMP" -sass -fun "$kernel" "$tmp/k.cubin" > "$tmp/k.sass"
# each instruction: "/*ADDR*/ [@P] OPCODE ..."; a loop: a branch to a lower address
awk '
    function hex(h,   v, i) { # mawk has no strtonum
        v = 0
        for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
        return v
    }
    match($0, /\/\*[0-9a-f]+\*\//) {
        a = hex(substr($0, RSTART + 2, RLENGTH - 4))
        rest = substr($0, RSTART + RLENGTH)
        sub(/^[ \t]+/, "", rest)
        if (rest == "" || rest ~ /^\/\*/) next
        n++; addr[n] = a; text[n] = rest
    }
    END {
        for (i = 1; i <= n; i++) {
            if (!match(text[i], /BRA 0x[0-9a-f]+/)) continue
            to = hex(substr(text[i], RSTART + 6, RLENGTH - 6))
            if (to >= addr[i]) continue
            split("", ops); tot = 0; mma = 0; dp = 0
            for (j = 1; j <= n; j++) {
                if (addr[j] < to || addr[j] > addr[i]) continue
                op = text[j]; sub(/^@!?U?P[A-Z0-9]+[ \t]+/, "", op); sub(/[ .;].*/, "", op)
                ops[op]++; tot++
                if (op == "IMMA" || op == "HMMA") mma++
                if (op == "IDP") dp++
            }
            line = ""
            for (k = 0; k < 10; k++) {
                best = ""; bv = 0
                for (o in ops) if (ops[o] > bv) { bv = ops[o]; best = o }
                if (best == "") break
                line = line sprintf(" %s %d,", best, bv); delete ops[best]
            }
            sub(/,$/, "", line)
            printf "loop %04x-%04x: %d instructions, %d mma, %d dp4a;%s\n", to, addr[i], tot, mma, dp, line
        }
    }' "$tmp/k.sass"
