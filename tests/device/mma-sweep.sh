#!/bin/bash
# mma-sweep.sh - runs on the GPU machine (bitnet-bench on PATH, or in
# .device/bin): times BitLinear on NVIDIA tensor cores (bl_mma_skinny up to 8
# tokens, bl_gemm_mma beyond; tunables in BITNET_MMA_OPTS, see
# lib/opencl/bitlinear.c and bitlinear_mma.c) for a
# few option settings, and the dp4a path (BITNET_MMA_MIN_TOKENS past the
# token counts) for comparison.  Prints one short line per setting, shape
# and token count: the kernel median (profiling events) and, unless CHECK=0,
# the bit-exact check against bitnet_bitlinear_ref on awkward shapes.
#
# usage: bash tests/device/mma-sweep.sh        (about 1-3 minutes)
# env:   SHAPES (timed, default 16384x16384,4096x14336), TOKENS (8,16,64),
#        CHECK=0 (no checks), CHECK_SHAPES, CHECK_TOKENS, BENCH (the bench binary), ONLY="1 3" (1-based
#        indices of the settings below), SETTINGS="a|b" (these settings instead
#        of the list below, separated by "|"; an empty one is the host's choice).
set -u
[ -d .device/bin ] && export PATH="$PWD/.device/bin:$PATH"
B=${BENCH:-bitnet-bench}
SHAPES=${SHAPES:-16384x16384,4096x14336}
TOKENS=${TOKENS:-8,16,64}
CHECK=${CHECK:-1}
CHECK_SHAPES=${CHECK_SHAPES:-1000x4097,33x16385,4096x4096}
CHECK_TOKENS=${CHECK_TOKENS:-8,9,17,64}

# BITNET_MMA_OPTS settings ("dp4a" = the NV GEMV path, mma off); names left
# out are chosen by the host from the shape (bitlinear_mma.c)
SETS=(
    "dp4a"
    ""
    "-DMMA_KP=1"
    "-DMMA_ST=2"
    "-DMMA_NT=64"
    "-DMMA_NT=16 -DMMA_ST=4"
    "-DMMA_MT=1"
    "-DMMA_WM=2"
    "-DMMA_WM=8 -DMMA_MT=1"
    "-DMMA_WM=2 -DMMA_KB=4"
    "-DMMA_MT=4 -DMMA_WM=2"
    "-DMMA_SIGNED=1"
    "-DMMA_KP=6"
    "-DMMA_KP=12"
)
# SETTINGS set but empty: the host's choice alone (not the list above)
if [ "${SETTINGS+set}" = set ]; then
    if [ -z "$SETTINGS" ]; then SETS=(""); else IFS='|' read -r -a SETS <<< "$SETTINGS"; fi
fi
sel=${ONLY:-$(seq 1 ${#SETS[@]})}

command -v "$B" > /dev/null || { echo "mma-sweep: $B not found" >&2; exit 2; }
common=(--device opencl --op bitlinear --scale row --baseline none --format md)
# weights kept on the device when the bench can (no upload between calls)
"$B" --help 2>&1 | grep -q -- --keep-weights && [ "${KEEP:-1}" = 1 ] && common+=(--keep-weights)
bad=0

# md rows -> "shape tokens median check" (columns: op variant device shape tokens time ... check)
rows() { awk -F'|' '$2 ~ /bitlinear/ { gsub(/ /, "", $5); gsub(/ /, "", $6); gsub(/ /, "", $7); gsub(/ /, "", $18); print $5, $6, $7, $18 }'; }

run_set() { # setting, bench arguments...
    local s=$1
    shift
    if [ "$s" = dp4a ]; then
        BITNET_MMA_MIN_TOKENS=1000000000 "$B" "$@"
    else
        BITNET_MMA_OPTS=$s "$B" "$@"
    fi
}

printf '%-46s %-12s %4s %12s %s\n' "BITNET_MMA_OPTS" "shape" "tok" "median" "check"
for i in $sel; do
    s=${SETS[$((i - 1))]}
    label=${s:-"(host's choice)"}
    for tk in ${TOKENS//,/ }; do # one run per token count: a setting may not fit one of them
        out=$(run_set "$s" "${common[@]}" --shape "$SHAPES" --tokens "$tk" --no-check --roofline-size 1024 \
            --min-reps 10 --min-time 0.05 --warmup 1 2>&1)
        echo "$out" | rows | while read -r shp tok med _; do
            printf '%-46s %-12s %4s %12s %s\n' "$label" "$shp" "$tok" "$med" "-"
        done
        echo "$out" | grep -q '^| bitlinear' || { echo "$label x$tk: $(echo "$out" | grep -v '^|' | head -2)"; bad=1; }
    done
    if [ "$CHECK" != 0 ]; then
        chk=$(for tk in ${CHECK_TOKENS//,/ }; do
            run_set "$s" "${common[@]}" --shape "$CHECK_SHAPES" --tokens "$tk" --roofline-size 64 \
                --min-reps 1 --max-reps 1 --min-time 0 --warmup 0 2>&1
        done)
        n_ok=$(echo "$chk" | rows | awk '$4 == "ok"' | wc -l)
        n_all=$(echo "$chk" | rows | wc -l)
        printf '%-46s %-12s %4s %12s %s\n' "$label" "checks" "" "" "$n_ok of $n_all ok"
        [ "$n_all" -gt 0 ] && [ "$n_ok" -eq "$n_all" ] || bad=1
        [ "$n_ok" -eq "$n_all" ] || echo "$chk" | rows | awk '$4 != "ok"' | sed 's/^/    FAIL /'
    fi
done
exit $bad
