#!/bin/bash
# gemv-sweep.sh - runs on the GPU machine (after `. .device/env.sh`): times
# the NVIDIA BitLinear GEMV variants (BITNET_GEMV_NV=1, 3 or 4, tunables in
# BITNET_GEMV_OPTS; see lib/opencl/bitlinear.c) against the library's default
# choice with bitnet-bench and prints one summary table to stdout: variant
# ("default": neither variable set), options, shape, tokens, kernel median
# (profiling events), GB/s of T2 weights, bench's GB/s and % of the copy
# roofline, and the bit-exact check against bitnet_bitlinear_ref.
#
# Phase 1 times every combination one after the other with --no-check (the
# CPU reference of a big shape takes seconds).  Phase 2 checks every
# combination in parallel processes (one timed call each: their timings are
# not used) on the same shapes, except 16384x16384 at 64 tokens (17 G MACs
# of scalar reference), plus awkward shapes; the check column joins them in.
# A wrong variant shows FAIL (or error); the exit status is then 1.
#
# usage: bash tests/device/gemv-sweep.sh     (about 60-110 s)
# env:   SHAPES, TOKENS (timed grid), MIN_REPS, MIN_TIME, BUDGET (seconds
#        after which phase 1 starts no more combinations, default 85),
#        BENCH (the bench binary), COMBOS_ONLY="1 3" (1-based indices).
set -u
[ -d .device/bin ] && export PATH="$PWD/.device/bin:$PATH"
B=${BENCH:-bitnet-bench}
SHAPES=${SHAPES:-16384x16384,4096x4096,4096x14336}
TOKENS=${TOKENS:-1,8,64}
# checked groups "shapes tokens": the timed grid less 16384x16384 x 64, and awkward shapes
CHECKS=${CHECKS:-"16384x16384 1,8
4096x4096,4096x14336 1,8,64
1000x4097,5x255,33x16385 1,7,64"}
MIN_REPS=${MIN_REPS:-10}
MIN_TIME=${MIN_TIME:-0.05}
BUDGET=${BUDGET:-85}

# variant|options, most promising first (phase 1 may run out of BUDGET):
# "default" is what the library picks by token count (the baseline); 1 global
# activations, several rows per warp, unrolled loads; 3 activations staged in
# local memory, one-AND decoding; 4 512-byte warp loads, rows per warp (NV_R
# of them computed together), swizzled staging (see lib/opencl/bitlinear.c)
COMBOS=(
    "default|"
    "4|-DNV_WARPS=8 -DNV_U=2 -DNV_R=2"
    "4|-DNV_WARPS=8 -DNV_U=1 -DNV_R=4"
    "4|-DNV_WARPS=8 -DNV_U=4 -DNV_R=2"
    "4|-DNV_WARPS=8 -DNV_U=4"
    "4|-DNV_WARPS=8 -DNV_U=8"
    "4|-DNV_WARPS=8 -DNV_U=8 -DNV_RW=1"
    "4|-DNV_WARPS=4 -DNV_U=4 -DNV_RW=4"
    "4|-DNV_WARPS=8 -DNV_U=2 -DNV_RW=2"
    "4|-DNV_WARPS=8 -DNV_U=4 -DNV_TT=8"
    "4|-DNV_WARPS=4 -DNV_U=8"
    "4|-DNV_WARPS=8 -DNV_U=16"
    "4|-DNV_WARPS=4 -DNV_U=8 -DNV_RW=2"
    "4|-DNV_WARPS=4 -DNV_U=4 -DNV_RW=8"
    "4|-DNV_WARPS=4 -DNV_U=8 -DNV_RW=8"
    "4|-DNV_WARPS=2 -DNV_U=8 -DNV_RW=8"
    "4|-DNV_WARPS=8 -DNV_U=4 -DNV_RW=4"
    "4|-DNV_WARPS=4 -DNV_U=4 -DNV_RW=16"
    "4|-DNV_WARPS=2 -DNV_U=4 -DNV_RW=4"
    "3|-DNV_WARPS=4 -DNV_ROWS=2 -DNV_UNROLL=2"
    "3|-DNV_WARPS=8 -DNV_ROWS=1 -DNV_UNROLL=4"
    "3|-DNV_WARPS=4 -DNV_ROWS=4 -DNV_UNROLL=2"
    "3|-DNV_WARPS=8 -DNV_ROWS=4 -DNV_UNROLL=1"
    "3|-DNV_WARPS=8 -DNV_ROWS=2 -DNV_UNROLL=2 -DNV_TT=8"
    "3|-DNV_WARPS=4 -DNV_ROWS=2 -DNV_UNROLL=1 -DNV_TT=16"
    "1|-DNV_WARPS=4 -DNV_ROWS=1 -DNV_UNROLL=4"
    "1|-DNV_WARPS=4 -DNV_ROWS=2 -DNV_UNROLL=2"
    "1|-DNV_WARPS=8 -DNV_ROWS=4 -DNV_UNROLL=1"
)
sel=${COMBOS_ONLY:-$(seq 1 ${#COMBOS[@]})}

# runs the rest of the line with combination $1's variables; a numbered
# variant with the tensor cores off, so that it runs at every token count
# (the default takes the tensor cores from 2 tokens on for these row scales)
with_combo() {
    local v=${1%%|*} o=${1#*|}
    shift
    if [ "$v" = default ]; then
        env -u BITNET_GEMV_NV -u BITNET_GEMV_OPTS "$@"
    else
        env BITNET_GEMV_NV="$v" BITNET_GEMV_OPTS="$o" BITNET_MMA_MIN_TOKENS=1000000000 "$@"
    fi
}

command -v "$B" > /dev/null || { echo "gemv-sweep: $B not found" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gemv-sweep.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
common=(--op bitlinear --scale row --device opencl --baseline none --format csv)
# weights kept on the device when the bench can (no upload between calls, so
# the GPU runs back to back as in the copy roofline and the cuBLAS baseline)
"$B" --help 2>&1 | grep -q -- --keep-weights && [ "${KEEP:-1}" = 1 ] && common+=(--keep-weights)
start=$SECONDS

echo "== phase 1: timing (${#COMBOS[@]} combinations, shapes $SHAPES, tokens $TOKENS)" >&2
for i in $sel; do
    if [ $((SECONDS - start)) -ge "$BUDGET" ]; then
        echo "gemv-sweep: budget of ${BUDGET}s spent, combination $i and later not timed" >&2
        break
    fi
    c=${COMBOS[$((i - 1))]}
    v=${c%%|*} o=${c#*|}
    with_combo "$c" timeout 40 "$B" "${common[@]}" --shape "$SHAPES" --tokens "$TOKENS" \
        --no-check --roofline-size 1024 --min-reps "$MIN_REPS" --min-time "$MIN_TIME" --warmup 1 \
        > "$tmp/t$i.csv" 2> "$tmp/t$i.err"
    echo "   $i: variant $v \"$o\": exit $? ($((SECONDS - start)) s)" >&2
done

echo "== phase 2: checks in parallel ($((SECONDS - start)) s)" >&2
pids=()
for i in $sel; do
    c=${COMBOS[$((i - 1))]}
    v=${c%%|*} o=${c#*|}
    g=0
    while read -r shp tok; do
        [ -n "$shp" ] || continue
        g=$((g + 1))
        with_combo "$c" timeout 60 "$B" "${common[@]}" --shape "$shp" --tokens "$tok" \
            --roofline-size 64 --llc 1 --min-reps 1 --max-reps 1 --min-time 0 --warmup 0 \
            > "$tmp/c$i.$g.csv" 2> "$tmp/c$i.$g.err" &
        pids+=($!)
    done <<< "$CHECKS"
done
for p in "${pids[@]}"; do wait "$p"; done
echo "== done ($((SECONDS - start)) s)" >&2

# rows: "C i shape tokens check" (phase 2), "T i shape m k tokens ms gbs pct" (phase 1), "E i file: why"
{
    for i in $sel; do
        c=${COMBOS[$((i - 1))]}
        for f in "$tmp"/c"$i".*.csv; do
            [ -f "$f" ] && awk -F, -v i="$i" 'NR > 1 && $1 == "bitlinear" { print "C", i, $4, $7, $20 }' "$f"
        done
        [ -f "$tmp/t$i.csv" ] && awk -F, -v i="$i" 'NR > 1 && $1 == "bitlinear" { print "T", i, $4, $5, $6, $7, $8, $16, $18 }' "$tmp/t$i.csv"
        for f in "$tmp"/t"$i".csv "$tmp"/c"$i".*.csv; do
            [ -f "$f" ] && ! grep -q '^bitlinear,' "$f" && echo "E $i $(basename "$f" .csv): no result rows"
        done
        # a run that printed no rows: say why
        for f in "$tmp"/t"$i".err "$tmp"/c"$i".*.err; do
            [ -s "$f" ] && grep -qiE "error|fail|abort|cannot" "$f" && echo "E $i $(basename "$f" .err): $(grep -iE 'error|fail|abort|cannot' "$f" | head -1)"
        done
    done
} > "$tmp/all.txt"

combo_of() { echo "${COMBOS[$(($1 - 1))]}"; }
{
    for i in $sel; do c=$(combo_of "$i"); echo "O $i ${c%%|*} ${c#*|}"; done
    cat "$tmp/all.txt"
} | awk '
$1 == "O" { v[$2] = $3; o = ""; for (j = 4; j <= NF; j++) o = o (o == "" ? "" : " ") $j; sub(/^-D/, "", o); gsub(/ -D/, " ", o); opt[$2] = o == "" ? "(defaults)" : o; next }
$1 == "C" { key = $2 SUBSEP $3 SUBSEP $4; chk[key] = ($5 == "" ? "?" : $5); seen[key] = 1; if ($5 != "ok") bad++; next }
$1 == "T" { key = $2 SUBSEP $3 SUBSEP $6; n++; K[n] = key; I[n] = $2; S[n] = $3; TK[n] = $6;
            ms[n] = $7; wb = $4 * int(($5 + 127) / 128) * 32;
            wgbs[n] = $7 > 0 ? wb / ($7 * 1e-3) / 1e9 : 0; bgbs[n] = $8; pct[n] = $9; next }
$1 == "E" { err[++ne] = $0; if ($0 ~ /no result rows/) bad++; next }
END {
    fmt = "%-7s %-44s %-12s %4s %10s %8s %8s %6s %5s\n"
    printf fmt, "v", "opts", "shape", "tok", "kernel_us", "W GB/s", "GB/s", "%peak", "check"
    for (r = 1; r <= n; r++) {
        c = (K[r] in chk) ? chk[K[r]] : "-"
        printf fmt, v[I[r]], opt[I[r]], S[r], TK[r], sprintf("%.2f", ms[r] * 1000), sprintf("%.0f", wgbs[r]),
               sprintf("%.0f", bgbs[r]), sprintf("%.0f%%", pct[r]), c
        g = S[r] SUBSEP TK[r]
        if (!(g in best) || ms[r] < ms[best[g]]) best[g] = r
        if (I[r] in v && v[I[r]] == "default" && !(g in base)) base[g] = r
    }
    printf "\nchecked only (awkward shapes and big ones not timed):\n"
    for (key in seen) {
        split(key, p, SUBSEP); found = 0
        for (r = 1; r <= n; r++) if (K[r] == key) found = 1
        if (!found) line[++nl] = sprintf("  %s %s %s x%s: %s", v[p[1]], opt[p[1]], p[2], p[3], chk[key])
    }
    okc = 0
    for (j = 1; j <= nl; j++) if (line[j] ~ /: ok$/) okc++; else print line[j]
    printf "  %d of %d ok\n", okc, nl
    printf "\nbest per shape and token count (vs the default):\n"
    printf "%-12s %4s %10s %8s %9s  %s\n", "shape", "tok", "kernel_us", "W GB/s", "dflt_us", "variant opts"
    for (g in best) {
        r = best[g]; b0 = (g in base) ? sprintf("%.2f", ms[base[g]] * 1000) : "-"
        out[++no] = sprintf("%-12s %4s %10.2f %8.0f %9s  %s %s", S[r], TK[r], ms[r] * 1000, wgbs[r], b0, v[I[r]], opt[I[r]])
    }
    # sort by shape then tokens (small n: insertion sort)
    for (a = 2; a <= no; a++) { t = out[a]; for (b = a - 1; b >= 1 && out[b] > t; b--) out[b + 1] = out[b]; out[b + 1] = t }
    for (a = 1; a <= no; a++) print out[a]
    for (j = 1; j <= ne; j++) print "error: " err[j]
    printf "\nchecks: %d not ok\n", bad
    exit bad > 0
}'
