#!/bin/sh
# ggml-tq2.sh - the README's comparison with ggml's TQ2_0 on the CPU:
# BitLinear 4096x14336 (tensor scale) at 1 and 8 tokens with its weights in
# the cache (bitnet-bench --llc 1, one set), against ggml's MUL_MAT of
# type_a=tq2_0 at m=4096, n=1 and 8, k=14336 (test-backend-ops perf, whose
# default perf cases include them), the two alternating RUNS times on this
# machine, on the same number of threads: test-backend-ops gives ggml's CPU
# backend half the hardware threads (hardware_concurrency / 2) and has no
# option to change it, so bitnet-bench runs with --threads THREADS, by
# default max(1, nproc / 2).  ggml is not a dependency: build it from its
# public source (CPU backend) and give its test-backend-ops.  Prints one
# Markdown row per token count with the ranges of the medians over the runs.
#
#   sh tests/perf/ggml-tq2.sh PATH/TO/test-backend-ops [RUNS] [LABEL]
#
# Environment: BENCH (default build/bin/bitnet-bench), OUTDIR (default
# perf-out/ggml: the raw outputs of every run), THREADS.
set -eu
tbo=${1:-}
runs=${2:-3}
threads=${THREADS:-$(($(nproc) / 2))}
[ "$threads" -ge 1 ] || threads=1
label=${3:-$(uname -n 2>/dev/null || echo ?), $threads of $(nproc) threads}
if [ -z "$tbo" ] || [ ! -x "$tbo" ]; then
    echo "usage: $0 PATH/TO/test-backend-ops [RUNS] [LABEL]" >&2
    exit 2
fi
case $runs in '' | *[!0-9]* | 0) echo "$0: RUNS must be a positive integer" >&2; exit 2 ;; esac
BENCH=${BENCH:-build/bin/bitnet-bench}
[ -x "$BENCH" ] || { echo "$0: $BENCH not found (run make, or set BENCH)" >&2; exit 2; }
OUTDIR=${OUTDIR:-perf-out/ggml}
mkdir -p "$OUTDIR"
r=1
while [ "$r" -le "$runs" ]; do
    "$BENCH" --device cpu --threads "$threads" --op bitlinear --shape 4096x14336 --tokens 1,8 --scale tensor --llc 1 \
        --format csv -o "$OUTDIR/bitnet-$r.csv"
    "$tbo" perf -o MUL_MAT -b CPU -p 'type_a=tq2_0,type_b=f32,m=4096,n=(1|8),k=14336,' >"$OUTDIR/ggml-$r.txt" 2>&1
    r=$((r + 1))
done
echo "| machine | tokens | bitnet | ggml TQ2_0 | ratio |"
echo "|---|---:|---:|---:|---:|"
# bitnet-bench's csv: op,variant,device,shape,m,k,tokens,time_ms,...; ggml's
# lines: "  MUL_MAT(type_a=tq2_0,type_b=f32,m=4096,n=1,k=14336,...): N runs - T us/run - ..."
awk -v runs="$runs" -v label="$label" '
    function num(x) { return (x >= 999.5) ? sprintf("%.0f", x) : sprintf("%.3g", x) }
    function rng(lo, hi) { return (num(lo) == num(hi)) ? num(lo) : num(lo) "-" num(hi) }
    function add(k, v) { if (!((k) in lo) || v < lo[k]) lo[k] = v; if (!((k) in hi) || v > hi[k]) hi[k] = v }
    FNR == 1 { f = FILENAME; sub(/.*\//, "", f); run = f; sub(/^[a-z]*-/, "", run); sub(/\..*$/, "", run) }
    run + 0 > runs + 0 { next } # runs of an older call in OUTDIR
    f ~ /^bitnet-/ && $0 ~ /^bitlinear,/ { split($0, c, ","); us[run, c[7]] = c[8] * 1000; add("b" c[7], c[8] * 1000) }
    f ~ /^ggml-/ && /MUL_MAT\(type_a=tq2_0,/ && /,m=4096,/ && /,k=14336,/ && / us\/run/ {
        if (!match($0, /,n=[0-9]+,/)) next
        n = substr($0, RSTART + 3, RLENGTH - 4)
        t = $0; sub(/ us\/run.*/, "", t); sub(/.* /, "", t)
        g[run, n] = t + 0; add("g" n, t + 0)
    }
    END {
        split("1 8", T, " ")
        for (i = 1; i <= 2; i++) {
            n = T[i]; rl = ""; rh = ""
            for (r = 1; r <= runs; r++)
                if (((r, n) in us) && ((r, n) in g) && us[r, n] > 0) {
                    q = g[r, n] / us[r, n]; if (rl == "" || q < rl) rl = q; if (rh == "" || q > rh) rh = q
                }
            if (!(("b" n) in lo) || !(("g" n) in lo)) { printf "| %s | %s | - | - | - |\n", label, n; continue }
            printf "| %s | %s | %s µs | %s µs | %s× |\n", label, n, rng(lo["b" n], hi["b" n]), rng(lo["g" n], hi["g" n]),
                (rl == "") ? "-" : (sprintf("%.1f", rl) == sprintf("%.1f", rh)) ? sprintf("%.1f", rl) : sprintf("%.1f-%.1f", rl, rh)
        }
    }' "$OUTDIR"/bitnet-[0-9]*.csv "$OUTDIR"/ggml-[0-9]*.txt
