#!/bin/sh
# readme-tables.sh - produces every performance table of README.md.
#
#   sh tests/perf/readme-tables.sh cpu [RUNS]   the CPU tables (this machine)
#   sh tests/perf/readme-tables.sh gpu [RUNS]   the GPU tables (the GPU machine,
#                                               after `. .device/env.sh`)
#   sh tests/perf/readme-tables.sh host [RUNS]  the many-core CPU table: BitLinear
#                                               on AVX-512 VNNI and on the default
#                                               level (AMX where the CPU has it),
#                                               the two alternating run by run
#
# Each configuration is measured RUNS times (default 3) with
# `bitnet-bench ... --format json`; each run is rendered back with
# `bitnet-bench --from RUN.json --format csv`, and the runs are joined into
# one Markdown table whose cells give the range (lowest-highest median) over
# the runs.  A header names the machine (CPU model, cores, the read and copy
# bandwidth bitnet-bench measured, GPU and driver when present), the date
# and the commit.  The JSON files stay in $OUTDIR (default perf-out/) for
# anyone who wants to re-render them.
#
# Environment: BENCH (the bitnet-bench to run; default .device/bin/bitnet-bench
# when it exists, else build/bin/bitnet-bench), OUTDIR, COMMIT (when the tree
# has no .git, e.g. a copy on another machine).
set -eu
mode=${1:-}
runs=${2:-3}
case $mode in cpu | gpu | host) ;; *) echo "usage: $0 cpu|gpu|host [RUNS]" >&2; exit 2 ;; esac
case $runs in '' | *[!0-9]* | 0) echo "$0: RUNS must be a positive integer" >&2; exit 2 ;; esac
if [ -z "${BENCH:-}" ]; then
    BENCH=build/bin/bitnet-bench
    [ -x .device/bin/bitnet-bench ] && BENCH=.device/bin/bitnet-bench
fi
[ -x "$BENCH" ] || { echo "$0: $BENCH not found (run make, or set BENCH)" >&2; exit 2; }
OUTDIR=${OUTDIR:-perf-out}
mkdir -p "$OUTDIR"

# ---- the header ---------------------------------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | sed 's/, / (driver /; s/$/)/')
fi

# ---- measuring --------------------------------------------------------------------
# measure NAME ARGS...: RUNS runs of bitnet-bench ARGS into $OUTDIR/NAME-R.json
# and their rows as CSV into $OUTDIR/NAME-R.csv
measure() {
    name=$1
    shift
    r=1
    while [ "$r" -le "$runs" ]; do
        measure_run "$name" "$r" "$@"
        r=$((r + 1))
    done
}

# measure_run NAME R ARGS...: run R of measure NAME
measure_run() {
    name=$1 run=$2
    shift 2
    "$BENCH" "$@" --format json -o "$OUTDIR/$name-$run.json" 2>>"$OUTDIR/$name.log"
    "$BENCH" --from "$OUTDIR/$name-$run.json" --format csv -o "$OUTDIR/$name-$run.csv"
}

# bandwidth DEVICE: "read R1-R2 GB/s, copy C1-C2 GB/s" over the runs of every measure so far
bandwidth() {
    cat "$OUTDIR"/*-[0-9]*.csv >/dev/null 2>&1 || return 0
    awk -F, -v dev="$1" '$1 == "copy" && $3 == dev {
            v = $16 + 0; k = $2
            if (!(k in lo) || v < lo[k]) lo[k] = v
            if (!(k in hi) || v > hi[k]) hi[k] = v
        }
        END {
            if ("read" in lo) printf "read %.1f-%.1f GB/s, copy %.1f-%.1f GB/s", lo["read"], hi["read"], lo["copy"], hi["copy"]
        }' "$OUTDIR"/*-[0-9]*.csv
}

# table NAME: the Markdown table of measure NAME, ranges over its runs.
# Columns: op, variant, device, shape, tokens, time, GB/s, % of roofline,
# GOP/s, energy per token (when measured), check.
table() {
    echo "| op | variant | device | shape | tokens | median time (ms) | GB/s | % roofline | GOP/s | W (above idle) | mJ/token (above idle) | check |"
    echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    awk -F, '
        function fmt(a, b, p) { if (a == "") return "-"; return (sprintf(p, a) == sprintf(p, b)) ? sprintf(p, a) : sprintf(p "-" p, a, b) }
        function add(key, col, v) {
            if (v == "") return
            v += 0
            if (!((key, col) in lo) || v < lo[key, col]) lo[key, col] = v
            if (!((key, col) in hi) || v > hi[key, col]) hi[key, col] = v
        }
        FNR == 1 { next }
        {
            key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $7
            if (!(key in seen)) { seen[key] = 1; order[n++] = key; label[key] = $1 " | " $2 " | " $3 " | " $4 " | " $7 }
            add(key, "t", $8); add(key, "g", $16); add(key, "p", $18); add(key, "o", $17)
            add(key, "w", $23); add(key, "wi", ($23 == "" || $24 == "") ? "" : $23 - $24)
            add(key, "j", $27 == "" ? "" : $27 * 1000); add(key, "ji", $28 == "" ? "" : $28 * 1000)
            if ($20 != "ok" && $20 != "-") bad[key] = $20; else if (!(key in bad)) bad[key] = $20
        }
        END {
            for (i = 0; i < n; i++) {
                k = order[i]
                w = ((k, "w") in lo) ? fmt(lo[k, "w"], hi[k, "w"], "%.0f") " (" fmt(lo[k, "wi"], hi[k, "wi"], "%.0f") ")" : "-"
                j = ((k, "j") in lo) ? fmt(lo[k, "j"], hi[k, "j"], "%.3g") " (" fmt(lo[k, "ji"], hi[k, "ji"], "%.3g") ")" : "-"
                printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label[k], fmt(lo[k, "t"], hi[k, "t"], "%.3g"),
                    fmt(lo[k, "g"], hi[k, "g"], "%.1f"), fmt(lo[k, "p"], hi[k, "p"], "%.0f"),
                    fmt(lo[k, "o"], hi[k, "o"], "%.1f"), w, j, bad[k]
            }
        }' "$OUTDIR/$1"-[0-9]*.csv
    # the rows' notes, each once
    awk -F, 'FNR > 1 && $21 != "" { n = $1 " " $4 ($7 == "" ? "" : " tokens " $7) " on " $3 ": " $21; if (!(n in s)) { s[n] = 1; print "\n- " n } }' \
        "$OUTDIR/$1"-[0-9]*.csv
}

section() { printf '\n#### %s\n\n    %s\n\n' "$1" "$2"; }

if [ "$mode" = cpu ]; then
    A="--device cpu --shape 4096x14336 --scale tensor"
    measure cpu-prep $A --op copy,quantize_weights,quantize_acts
    measure cpu-bitlinear $A --op copy,bitlinear,matmul_f32 --tokens 1,8 --baseline openblas
    measure cpu-cache $A --op bitlinear --tokens 1,8 --llc 1
    measure cpu-energy $A --op bitlinear --tokens 1,64 --energy
    bw=$(bandwidth cpu)
elif [ "$mode" = host ]; then
    # --llc 300: rotate through 1.3 GB, past an L3 of up to 300 MiB
    H="--device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,8,64 --scale tensor --llc 300"
    r=1
    while [ "$r" -le "$runs" ]; do
        BITNET_SIMD=avx512-vnni measure_run host-vnni "$r" $H
        measure_run host-default "$r" $H
        r=$((r + 1))
    done
    bw=$(bandwidth cpu)
else
    G="--device opencl --op copy,bitlinear --shape 4096x4096 --shape 4096x14336 --shape 16384x16384 --tokens 1,8,64 --scale row --keep-weights"
    measure gpu-bitlinear $G
    measure gpu-energy --device opencl --op bitlinear --shape 4096x14336 --tokens 1,64 --scale row --keep-weights --energy
    measure host-energy --device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,64 --scale tensor --energy
    bw="$(bandwidth opencl) (GPU); $(bandwidth cpu) (host CPU)"
fi

echo "### Measured on $(uname -n 2>/dev/null || echo ?): $cpu_model, $(nproc) cores${gpu:+, $gpu}"
echo
echo "$(date -u +%Y-%m-%d) at commit $commit, $runs runs of each command; ranges are the lowest and highest"
echo "median over the runs; bandwidth measured by bitnet-bench in the same runs: $bw."
if [ "$mode" = cpu ]; then
    section "BitLinear and the float baseline (weights rotated past the caches)" "bitnet-bench $A --op copy,bitlinear,matmul_f32 --tokens 1,8 --baseline openblas"
    table cpu-bitlinear
    section "Weights resident in the cache (one set)" "bitnet-bench $A --op bitlinear --tokens 1,8 --llc 1"
    table cpu-cache
    section "Quantization" "bitnet-bench $A --op copy,quantize_weights,quantize_acts"
    table cpu-prep
    section "Energy (empty where RAPL is not exposed)" "bitnet-bench $A --op bitlinear --tokens 1,64 --energy"
    table cpu-energy
elif [ "$mode" = host ]; then
    section "BitLinear on AVX-512 VNNI (BITNET_SIMD=avx512-vnni), weights rotated past the caches" "bitnet-bench $H"
    table host-vnni
    section "BitLinear on the default level (AMX from 8 tokens), alternating with the above" "bitnet-bench $H"
    table host-default
    echo
    echo "One token against the read kernel of the same run, and 64 tokens, run by run (default level):"
    echo
    for f in "$OUTDIR"/host-default-[0-9]*.csv; do
        awk -F, -v run="$(basename "$f" .csv)" '$1 == "copy" && $2 == "read" { rd = $16 }
            $1 == "bitlinear" && $7 == 1 { g = $16 } $1 == "bitlinear" && $7 == 64 { t = $8 }
            END { printf "- %s: one token %.1f GB/s, %.0f%% of read %.1f GB/s; 64 tokens %.3f ms\n", run, g, 100 * g / rd, rd, t }' "$f"
    done
else
    section "GPU, weights kept on the device" "bitnet-bench $G"
    table gpu-bitlinear
    section "GPU energy (NVML)" "bitnet-bench --device opencl --op bitlinear --shape 4096x14336 --tokens 1,64 --scale row --keep-weights --energy"
    table gpu-energy
    section "Host CPU energy (RAPL)" "bitnet-bench --device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,64 --scale tensor --energy"
    table host-energy
fi
