#!/bin/sh
# ggml-tq2.sh - the README's comparison with ggml's TQ2_0 on the CPU:
# BitLinear 4096x14336 at 1 and 8 tokens with its weights in the cache
# (bitnet-bench --llc 1, one set), with a tensor scale and with a scale per
# group of 256 weights (group:256, the layout of TQ2_0 itself, which carries
# an f16 scale per block of 256: like for like), against ggml's MUL_MAT of
# type_a=tq2_0 at m=4096, n=1 and 8, k=14336 (test-backend-ops perf, whose
# default perf cases include them), the two alternating RUNS times on this
# machine, on the same number of threads: test-backend-ops gives ggml's CPU
# backend half the hardware threads (hardware_concurrency / 2) and has no
# option to change it, so bitnet-bench runs with --threads THREADS, by
# default max(1, nproc / 2).  ggml is not a dependency: build it from its
# public source (CPU backend) and give its test-backend-ops.  Prints one
# Markdown row per token count with the ranges of the medians over the runs
# and the ratios ggml / bitnet taken run by run; beside the one-token row,
# the time of bitnet-bench's read kernel over the same 14.68 MB in cache,
# just before: the floor of a kernel that reads its codes once.
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
    "$BENCH" --device cpu --threads "$threads" --op copy --shape 3670016 --llc 1 --format csv -o "$OUTDIR/read-$r.csv"
    "$BENCH" --device cpu --threads "$threads" --op bitlinear --shape 4096x14336 --tokens 1,8 --scale tensor,group:256 --llc 1 \
        --format csv -o "$OUTDIR/bitnet-$r.csv"
    "$tbo" perf -o MUL_MAT -b CPU -p 'type_a=tq2_0,type_b=f32,m=4096,n=(1|8),k=14336,' >"$OUTDIR/ggml-$r.txt" 2>&1
    r=$((r + 1))
done
echo "| machine | tokens | bitnet, tensor scale | bitnet, group:256 | ggml TQ2_0 | ratio, tensor | ratio, group:256 | read of the codes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
# bitnet-bench's csv: op,variant,device,shape,m,k,tokens,time_ms,...; ggml's
# lines: "  MUL_MAT(type_a=tq2_0,type_b=f32,m=4096,n=1,k=14336,...): N runs - T us/run - ..."
# (ranges and ratios by tests/perf/runs.awk, as readme-tables.sh makes them)
# shellcheck disable=SC2016 # an awk program
awk -F, -v runs="$runs" -v label="$label" "$(cat "$(dirname "$0")/runs.awk")"'
    file == "read" && $1 == "copy" && $2 == "read" { put("r", 1, run, $8 * 1000) }
    file == "bitnet" && $1 == "bitlinear" && $2 == "tensor" { put("b", $7, run, $8 * 1000) }
    file == "bitnet" && $1 == "bitlinear" && $2 == "group:256" { put("q", $7, run, $8 * 1000) }
    file == "ggml" && /MUL_MAT\(type_a=tq2_0,/ && /,m=4096,/ && /,k=14336,/ && / us\/run/ && match($0, /,n=[0-9]+,/) {
        n = substr($0, RSTART + 3, RLENGTH - 4)
        t = $0; sub(/ us\/run.*/, "", t); sub(/.* /, "", t)
        put("g", n, run, t)
    }
    END {
        for (n = 1; n <= 8; n += 7)
            printf "| %s | %s | %s µs | %s µs | %s µs | %s | %s | %s |\n", label, n, rng("b", n), rng("q", n), rng("g", n),
                ratio("g", "b", n), ratio("g", "q", n), n == 1 ? rng("r", 1) " µs" : ""
    }' "$OUTDIR"/read-[0-9]*.csv "$OUTDIR"/bitnet-[0-9]*.csv "$OUTDIR"/ggml-[0-9]*.txt
