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
#   sh tests/perf/readme-tables.sh peers [RUNS] the GPU against its peers (GPU
#                                               machine): BitLinear against cuBLAS
#                                               bf16 and torch._int_mm, the float
#                                               product's own kernels against
#                                               CLBlast and cuBLAS fp32, and
#                                               Cholesky/QR/SVD on the host's
#                                               LAPACK, OpenCL and torch, weight
#                                               quantization on the GPU, the host
#                                               and torch
#   sh tests/perf/readme-tables.sh e2e [RUNS]   the caller's view (GPU machine):
#                                               kernel against end-to-end time of
#                                               BitLinear through host pointers
#                                               (weights kept) and device resident,
#                                               and of the ffn block on the GPU
#                                               and on the host CPU
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
#
# peers and e2e take the bandwidth of their header from the rooflines that
# bitnet-bench measures at the start of each run (the "devices" of its JSON).
# peers runs the torch baselines (tests/device/cublas_bf16.py, torch_f32.py)
# once per run, their output kept in $OUTDIR/peers-*.txt; without torch and
# CUDA their columns show "-" and the rest is measured.  Ratios are taken run
# by run (both sides from the same run) and ranged over the runs.
# Their sizes, comma-separated (defaults as in README.md; small ones make a
# trial on PoCL): PEERS_SHAPES (16384x16384,4096x14336,14336x4096,4096x4096),
# PEERS_TOKENS (1,8,64) and PEERS_TOKENS_NOCHECK (512: run with --no-check,
# the reference being slow there; empty for none), MM_SHAPES
# (4096x4096,4096x14336,16384x16384), MM_TOKENS (1,8,16,64), LA_N (4096),
# PEERS_PARTS (which tables: "bitlinear matmul linalg quant"), QUANT_SHAPE
# (4096x4096), E2E_SHAPES (16384x16384,4096x14336), E2E_TOKENS (1,64),
# FFN_SHAPE (4096x14336), FFN_TOKENS (1,8,64); PYTHON (python3).
# A device call has a time limit, so peers and e2e can be measured in parts
# into one OUTDIR and rendered after: FIRST_RUN=N numbers the runs from N
# (RUNS is then the last run's number), RENDER=1 measures nothing and renders
# what OUTDIR holds (runs 1 to RUNS).  Each measuring call adds a line
# naming the machine and the date to OUTDIR/machine.txt, which the header
# quotes, and each table says how many runs it has.  CHECK=0 adds --no-check
# to their BitLinear, float-product and ffn commands (the reference checks
# of the big products at 64 tokens take much of a run: the unit tests check
# the same kernels exactly).
set -eu
mode=${1:-}
runs=${2:-3}
case $mode in cpu | gpu | host | peers | e2e) ;; *) echo "usage: $0 cpu|gpu|host|peers|e2e [RUNS]" >&2; exit 2 ;; esac
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
# virtual machines often name only the vendor ("AMD EPYC"): the family and
# model numbers tell the generation, and the SIMD level what ran
cpu_fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
cpu_mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
[ -n "$cpu_fam" ] && cpu_model="$cpu_model (family $cpu_fam, model $cpu_mod)"
cpu_simd=$("$BENCH" --list-devices 2>/dev/null | sed -n 's/^ *simd: \([^,]*\),.*/\1/p' | head -1)
[ -n "$cpu_simd" ] && cpu_model="$cpu_model, SIMD level $cpu_simd"
# the last-level cache, which bitnet-bench's rotation and roofline go past
cpu_l3=$(lscpu 2>/dev/null | sed -n 's/^L3 cache:[[:space:]]*//p' | head -1)
[ -n "$cpu_l3" ] && cpu_model="$cpu_model, L3 $cpu_l3"
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

# section TITLE COMMAND...: a table's heading and the commands that produced it
section() {
    printf '\n#### %s\n\n' "$1"
    shift
    for c in "$@"; do printf '    %s\n' "$c"; done
    echo
}

# ---- peers and e2e --------------------------------------------------------------
# nruns NAME: "N runs" of measure NAME in $OUTDIR (runs 1 to RUNS)
nruns() {
    n=0
    for f in "$OUTDIR/$1"-[0-9]*.csv; do
        [ -f "$f" ] || continue
        i=${f##*-}
        i=${i%.csv}
        case $i in *[!0-9]*) continue ;; esac
        [ "$i" -gt "$runs" ] || n=$((n + 1))
    done
    [ "$n" = 1 ] && echo "1 run" || echo "$n runs"
}
# roofline DEVICE FILE.json...: "read R1-R2 GB/s, copy C1-C2 GB/s" over the
# rooflines that bitnet-bench measured on DEVICE at the start of these runs
roofline() {
    dev=$1
    shift
    # shellcheck disable=SC2016 # an awk program
    awkf -v dev="$dev" '
        function add(k, v) { v += 0; if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v }
        $1 == "\"device\":" { d = $2; gsub(/[",]/, "", d) }
        $1 == "\"copy_gbs\":" && d == dev { add("copy", $2) }
        $1 == "\"read_gbs\":" && d == dev { add("read", $2) }
        END { if ("read" in lo) printf "read %.1f-%.1f GB/s, copy %.1f-%.1f GB/s", lo["read"], hi["read"], lo["copy"], hi["copy"] }' -- "$@"
}

# rooflines MODE: the header's bandwidth, GPU and host CPU, from the JSON runs of MODE
rooflines() {
    g=$(roofline opencl "$OUTDIR/$1"-*.json)
    c=$(roofline cpu "$OUTDIR/$1"-*.json)
    b="${g:+$g (GPU)}${g:+${c:+; }}${c:+$c (host CPU)}"
    echo "${b:-not measured}"
}

# torch_run NAME R COMMAND...: run R of a torch baseline, its output into
# $OUTDIR/NAME-R.txt; a failure is reported and leaves its cells "-"
torch_failed=""
torch_run() {
    name=$1 run=$2
    shift 2
    if ! "$@" >"$OUTDIR/$name-$run.txt" 2>>"$OUTDIR/$name.log"; then
        echo "$0: $* failed, see $OUTDIR/$name.log" >&2
        torch_failed="$torch_failed $name-$run"
    fi
}

# the awk functions of the peers and e2e tables (tests/perf/runs.awk)
LIB=$(cat "$(dirname "$0")/runs.awk")

# awkf ARG... -- FILE...: awk ARG... on those FILEs that exist (unmatched
# globs left out), on /dev/null when none does
awkf() {
    files=0 any=0
    for a in "$@"; do
        shift
        if [ "$a" = -- ]; then
            files=1
        elif [ $files = 0 ]; then
            set -- "$@" "$a"
        elif [ -f "$a" ]; then
            set -- "$@" "$a"
            any=1
        fi
    done
    [ $any = 1 ] || set -- "$@" /dev/null
    awk "$@"
}

# peers_bitlinear: BitLinear against cuBLAS bf16 and torch._int_mm
peers_bitlinear() {
    echo "| shape | tokens | ours (kernel µs) | cuBLAS bf16 µs | ours vs bf16 | int_mm µs | ours vs int_mm |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    # shellcheck disable=SC2016 # an awk program
    awkf -F, -v runs="$runs" -v shapes="$PS" -v tokens="$PT,$PTN" "$LIB"'
        FILENAME ~ /\.csv$/ && $1 == "bitlinear" { put("ours", $4 SUBSEP $7, run, $8 * 1000) }
        FILENAME ~ /\.txt$/ && W[1] == "cublas-bf16" { put("bf16", W[2] SUBSEP kv("tokens"), run, kv("median_us")) }
        FILENAME ~ /\.txt$/ && W[1] == "int_mm" { put("int", W[2] SUBSEP kv("tokens"), run, kv("median_us")) }
        END {
            ns = split(shapes, S, ","); nt = split(tokens, T, ",")
            for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) {
                if (T[j] == "") continue
                k = S[i] SUBSEP T[j]
                a = ratio("bf16", "ours", k); if (rnum(rlo) + 0 > 1) a = a " faster"
                b = ratio("int", "ours", k); if (rnum(rlo) + 0 > 1) b = b " faster"
                printf "| %s | %s | %s | %s | %s | %s | %s |\n", shp(S[i]), T[j], rng("ours", k), rng("bf16", k), a, rng("int", k), b
            }
        }' -- "$OUTDIR"/peers-bl-[0-9]*.csv "$OUTDIR"/peers-bl-nc-[0-9]*.csv "$OUTDIR"/peers-bf16-[0-9]*.txt
}

# peers_matmul: the float product, own kernels (the default choice) against CLBlast and cuBLAS fp32
peers_matmul() {
    echo "| shape | tokens | own µs | CLBlast µs | cuBLAS fp32 µs | own / cuBLAS |"
    echo "|---|---:|---:|---:|---:|---:|"
    # shellcheck disable=SC2016 # an awk program
    awkf -F, -v runs="$runs" -v shapes="$MS" -v tokens="$MT" "$LIB"'
        FILENAME ~ /\.csv$/ && $1 == "matmul_f32" { put(file == "peers-mm-clblast" ? "cl" : "own", $4 SUBSEP $7, run, $8 * 1000) }
        FILENAME ~ /\.txt$/ && W[1] == "cublas-fp32" { put("cu", W[2] SUBSEP kv("tokens"), run, kv("median_us")) }
        END {
            ns = split(shapes, S, ","); nt = split(tokens, T, ",")
            for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) {
                k = S[i] SUBSEP T[j]
                printf "| %s | %s | %s | %s | %s | %s |\n", shp(S[i]), T[j], rng("own", k), rng("cl", k), rng("cu", k), ratio("own", "cu", k)
            }
        }' -- "$OUTDIR"/peers-mm-[0-9]*.csv "$OUTDIR"/peers-mm-clblast-[0-9]*.csv "$OUTDIR"/peers-f32-[0-9]*.txt
}

# peers_linalg: Cholesky, QR, SVD on the host's LAPACK, OpenCL and torch
peers_linalg() {
    echo "| op | host LAPACK ms | OpenCL e2e (kernel) ms | torch ms |"
    echo "|---|---:|---:|---:|"
    # shellcheck disable=SC2016 # an awk program
    awkf -F, -v runs="$runs" "$LIB"'
        FILENAME ~ /\.csv$/ && ($1 == "cholesky" || $1 == "qr" || $1 == "svd") {
            k = ($1 == "svd") ? "svd " $2 : $1
            if (file == "peers-la-cpu") put("host", k, run, $8)
            else { put("e2e", k, run, $14); if ($13 == "kernel") put("kern", k, run, $8) }
        }
        FILENAME ~ /\.txt$/ && W[1] ~ /^torch-/ { k = substr(W[1], 7); sub(/-/, " ", k); put("torch", k, run, kv("median_ms")) }
        END {
            split("cholesky|qr|svd values|svd vectors", K, "|"); split("Cholesky|QR|SVD, values|SVD, vectors", L, "|")
            for (i = 1; i <= 4; i++) {
                o = rng("e2e", K[i]); kr = rng("kern", K[i])
                if (kr != "-") o = o " (" kr ")"
                printf "| %s | %s | %s | %s |\n", L[i], rng("host", K[i]), o, rng("torch", K[i])
            }
        }' -- "$OUTDIR"/peers-la-cpu-[0-9]*.csv "$OUTDIR"/peers-la-ocl-[0-9]*.csv "$OUTDIR"/peers-la-ocl-qr-[0-9]*.csv \
        "$OUTDIR"/peers-la-torch-[0-9]*.txt
}

# peers_quant: weight quantization on the GPU against the host CPU and torch
peers_quant() {
    echo "| shape | GPU kernels µs | host CPU µs | torch µs | GPU vs host CPU | GPU vs torch |"
    echo "|---|---:|---:|---:|---:|---:|"
    # shellcheck disable=SC2016 # an awk program
    awkf -F, -v runs="$runs" -v shape="$QS" "$LIB"'
        FILENAME ~ /\.csv$/ && $1 == "quantize_weights" { put($3 == "cpu" ? "cpu" : "gpu", "q", run, $8 * 1000) }
        FILENAME ~ /\.txt$/ && W[1] == "torch" && W[2] == "absmean" { for (i = 1; i < nw; i++) if (W[i] == "median") put("torch", "q", run, W[i + 1]) }
        END {
            a = ratio("cpu", "gpu", "q"); if (rnum(rlo) + 0 > 1) a = a " faster"
            b = ratio("torch", "gpu", "q"); if (rnum(rlo) + 0 > 1) b = b " faster"
            printf "| %s | %s | %s | %s | %s | %s |\n", shp(shape), rng("gpu", "q"), rng("cpu", "q"), rng("torch", "q"), a, b
        }' -- "$OUTDIR"/peers-q-[0-9]*.csv "$OUTDIR"/peers-q-torch-[0-9]*.txt
}

# e2e_table: kernel against end-to-end time, case by case, then the ffn block GPU against host
e2e_table() {
    echo "| case | shape | tokens | kernel µs | e2e µs | e2e / kernel |"
    echo "|---|---|---:|---:|---:|---:|"
    # shellcheck disable=SC2016 # an awk program
    awkf -F, -v runs="$runs" -v shapes="$ES" -v tokens="$ET" -v fshape="$FS" -v ftokens="$FT" "$LIB"'
        FILENAME ~ /\.csv$/ && ($1 == "bitlinear" || $1 == "ffn") {
            c = (file == "e2e-kept") ? "kept" : (file == "e2e-resident") ? "res" : ($3 == "cpu") ? "ffn-cpu" : "ffn-gpu"
            k = c SUBSEP $4 SUBSEP $7
            if ($13 == "kernel") put("kern", k, run, $8 * 1000)
            put("e2e", k, run, $14 * 1000)
        }
        function row(c, label, s, t,   k) {
            k = c SUBSEP s SUBSEP t
            printf "| %s | %s | %s | %s | %s | %s |\n", label, shp(s), t, rng("kern", k), rng("e2e", k), ratio("e2e", "kern", k)
        }
        END {
            ns = split(shapes, S, ","); nt = split(tokens, T, ","); nf = split(ftokens, F, ",")
            for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) row("kept", "BitLinear, host pointers, weights kept", S[i], T[j])
            for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) row("res", "BitLinear, device resident", S[i], T[j])
            for (j = 1; j <= nf; j++) row("ffn-gpu", "ffn block on the GPU", fshape, F[j])
            for (j = 1; j <= nf; j++) row("ffn-cpu", "ffn block on the host CPU", fshape, F[j])
            print ""
            for (j = 1; j <= nf; j++) {
                # the host CPU over the GPU, end to end, run by run
                for (r = 1; r <= runs; r++) {
                    if (("e2e", "ffn-cpu" SUBSEP fshape SUBSEP F[j], r) in val) val["hc", F[j], r] = val["e2e", "ffn-cpu" SUBSEP fshape SUBSEP F[j], r]
                    if (("e2e", "ffn-gpu" SUBSEP fshape SUBSEP F[j], r) in val) val["gp", F[j], r] = val["e2e", "ffn-gpu" SUBSEP fshape SUBSEP F[j], r]
                }
                printf "- ffn block %s, %s token%s: the host CPU takes %s the GPU block'"'"'s end-to-end time\n", shp(fshape), F[j], (F[j] == 1) ? "" : "s", ratio("hc", "gp", F[j])
            }
        }' -- "$OUTDIR"/e2e-kept-[0-9]*.csv "$OUTDIR"/e2e-resident-[0-9]*.csv "$OUTDIR"/e2e-ffn-[0-9]*.csv
}

if [ "$mode" = cpu ]; then
    A="--device cpu --shape 4096x14336 --scale tensor"
    measure cpu-prep $A --op copy,quantize_weights,quantize_acts
    measure cpu-bitlinear $A --op copy,bitlinear,matmul_f32 --tokens 1,8 --baseline openblas
    measure cpu-cache $A --op bitlinear --tokens 1,8 --llc 1
    measure cpu-energy $A --op bitlinear --tokens 1,64 --energy
    bw=$(bandwidth cpu)
elif [ "$mode" = host ]; then
    # the rotation and the roofline go past the L3 that bitnet-bench reads
    # from sysfs (300 MiB on the H100 machines' hosts: 1.2 GB of weights)
    H="--device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,8,64,256 --scale tensor"
    r=1
    while [ "$r" -le "$runs" ]; do
        BITNET_SIMD=avx512-vnni measure_run host-vnni "$r" $H
        measure_run host-default "$r" $H
        r=$((r + 1))
    done
    bw=$(bandwidth cpu)
elif [ "$mode" = peers ] || [ "$mode" = e2e ]; then
    nc=""
    [ "${CHECK:-1}" = 0 ] && nc=" --no-check"
    first=${FIRST_RUN:-1}
    [ "${RENDER:-0}" = 1 ] && first=$((runs + 1))
    if [ "$first" -le "$runs" ]; then
        echo "$(date -u +%Y-%m-%d): $(uname -n 2>/dev/null || echo ?), $cpu_model, $(nproc) cores${gpu:+, $gpu}" >>"$OUTDIR/machine.txt"
    fi
fi
if [ "$mode" = peers ]; then
    PYTHON=${PYTHON:-python3}
    parts=${PEERS_PARTS:-bitlinear matmul linalg quant}
    QS=${QUANT_SHAPE:-4096x4096}
    PS=${PEERS_SHAPES:-16384x16384,4096x14336,14336x4096,4096x4096}
    PT=${PEERS_TOKENS:-1,8,64}
    PTN=${PEERS_TOKENS_NOCHECK-512}
    MS=${MM_SHAPES:-4096x4096,4096x14336,16384x16384}
    MT=${MM_TOKENS:-1,8,16,64}
    LN=${LA_N:-4096}
    nt=$(nproc)
    if [ "$first" -gt "$runs" ]; then # rendering: the measuring machine's cores
        nt=$(sed -n 's/.*, \([0-9][0-9]*\) cores.*/\1/p' "$OUTDIR/machine.txt" | head -1)
    fi
    PB="--device opencl --op bitlinear --scale row --keep-weights --shape $PS --min-time 0.1$nc"
    PBN="$PB"                          # the PEERS_TOKENS_NOCHECK runs: --no-check once
    [ -n "$nc" ] || PBN="$PB --no-check" # (a flag given twice is a usage error)
    MB="--device opencl --op matmul_f32 --keep-weights --shape $MS --tokens $MT --min-time 0.1$nc"
    LC="--device cpu --threads $nt --op cholesky,qr,svd --shape ${LN}x$LN --min-reps 3 --min-time 0.2 --warmup 1"
    LO="--device opencl --threads $nt --op cholesky --shape ${LN}x$LN --min-reps 3 --min-time 0.2 --warmup 1"
    LQ="--device opencl --threads $nt --op qr,svd --shape ${LN}x$LN --min-reps 1 --min-time 0.1 --warmup 1"
    QB="--device cpu,opencl --threads $nt --op quantize_weights --shape $QS --scale tensor --min-time 0.2"
    BT=$PT${PTN:+,$PTN}
    have_torch=0
    if [ "$first" -le "$runs" ]; then
        "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' >/dev/null 2>&1 && have_torch=1
    else # rendering: torch ran where its output is
        for f in "$OUTDIR"/peers-bf16-1.txt "$OUTDIR"/peers-f32-1.txt "$OUTDIR"/peers-la-torch-1.txt \
            "$OUTDIR"/peers-q-torch-1.txt; do
            [ -s "$f" ] && have_torch=1
        done
    fi
    r=$first
    while [ "$r" -le "$runs" ]; do
        case " $parts " in *" bitlinear "*)
            # one block per call: the whole product's kernels, as cuBLAS does it
            BITNET_OCL_BLOCK_TOKENS=0 measure_run peers-bl "$r" $PB --tokens "$PT"
            [ -z "$PTN" ] || BITNET_OCL_BLOCK_TOKENS=0 measure_run peers-bl-nc "$r" $PBN --tokens "$PTN"
            # shellcheck disable=SC2046 # the shapes, one argument each
            [ $have_torch = 0 ] || torch_run peers-bf16 "$r" env TOKENS="$BT" "$PYTHON" tests/device/cublas_bf16.py $(echo "$PS" | tr , ' ')
            ;;
        esac
        case " $parts " in *" matmul "*)
            measure_run peers-mm "$r" $MB
            BITNET_OCL_MATMUL=clblast measure_run peers-mm-clblast "$r" $MB
            # shellcheck disable=SC2046 # the shapes, one argument each
            [ $have_torch = 0 ] || torch_run peers-f32 "$r" env TOKENS="$MT" "$PYTHON" tests/device/torch_f32.py matmul $(echo "$MS" | tr , ' ')
            ;;
        esac
        case " $parts " in *" linalg "*)
            measure_run peers-la-cpu "$r" $LC
            measure_run peers-la-ocl "$r" $LO
            measure_run peers-la-ocl-qr "$r" $LQ
            [ $have_torch = 0 ] || torch_run peers-la-torch "$r" "$PYTHON" tests/device/torch_f32.py linalg "$LN"
            ;;
        esac
        case " $parts " in *" quant "*)
            measure_run peers-q "$r" $QB
            [ $have_torch = 0 ] || torch_run peers-q-torch "$r" "$PYTHON" tests/device/torch_absmean.py "$QS"
            ;;
        esac
        r=$((r + 1))
    done
    bw=$(rooflines peers)
elif [ "$mode" = e2e ]; then
    ES=${E2E_SHAPES:-16384x16384,4096x14336}
    ET=${E2E_TOKENS:-1,64}
    FS=${FFN_SHAPE:-4096x14336}
    FT=${FFN_TOKENS:-1,8,64}
    EK="--device opencl --op bitlinear --shape $ES --tokens $ET --keep-weights --scale row --min-time 0.2$nc"
    ER="--device opencl --op bitlinear --shape $ES --tokens $ET --resident --scale row --min-time 0.2$nc"
    EF="--device cpu,opencl --op ffn --shape $FS --tokens $FT --scale row --min-time 0.2$nc"
    r=$first
    while [ "$r" -le "$runs" ]; do
        measure_run e2e-kept "$r" $EK
        measure_run e2e-resident "$r" $ER
        measure_run e2e-ffn "$r" $EF
        r=$((r + 1))
    done
    bw=$(rooflines e2e)
elif [ "$mode" = gpu ]; then
    G="--device opencl --op copy,bitlinear --shape 4096x4096 --shape 4096x14336 --shape 16384x16384 --tokens 1,8,64 --scale row --keep-weights"
    measure gpu-bitlinear $G
    measure gpu-energy --device opencl --op bitlinear --shape 4096x14336 --tokens 1,64 --scale row --keep-weights --energy
    measure host-energy --device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,64 --scale tensor --energy
    bw="$(bandwidth opencl) (GPU); $(bandwidth cpu) (host CPU)"
fi

if [ "$mode" = peers ] || [ "$mode" = e2e ]; then
    [ -s "$OUTDIR/machine.txt" ] || { echo "$0: no runs in $OUTDIR (machine.txt missing)" >&2; exit 2; }
    echo "### Measured on $(sed 's/^[^:]*: //' "$OUTDIR/machine.txt" | sort -u | paste -sd ';' - | sed 's/;/; and on /g')"
    echo
    echo "At commit $commit, measured on $(cut -d: -f1 "$OUTDIR/machine.txt" | sort -u | paste -sd ',' - | sed 's/,/, /g');"
    echo "ranges are the lowest and highest median over the runs (each table says how many); bandwidth measured by"
    echo "bitnet-bench in the same runs: $bw."
else
    echo "### Measured on $(uname -n 2>/dev/null || echo ?): $cpu_model, $(nproc) cores${gpu:+, $gpu}"
    echo
    echo "$(date -u +%Y-%m-%d) at commit $commit, $runs runs of each command; ranges are the lowest and highest"
    echo "median over the runs; bandwidth measured by bitnet-bench in the same runs: $bw."
fi
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
elif [ "$mode" = peers ]; then
    echo
    if [ $have_torch = 1 ]; then
        tv=""
        for f in "$OUTDIR"/peers-*-1.txt; do
            if [ -s "$f" ]; then tv=$(head -1 "$f"); break; fi
        done
        echo "torch baselines on: ${tv:-?}."
    else
        echo "torch with CUDA was not available here: the torch columns (cuBLAS, int_mm, torch) show -."
    fi
    [ -z "$torch_failed" ] || echo "These torch runs failed (their cells show -):$torch_failed."
    case " $parts " in *" bitlinear "*)
        set -- "BITNET_OCL_BLOCK_TOKENS=0 bitnet-bench $PB --tokens $PT"
        [ -z "$PTN" ] || set -- "$@" "BITNET_OCL_BLOCK_TOKENS=0 bitnet-bench $PBN --tokens $PTN"
        [ $have_torch = 0 ] || set -- "$@" "TOKENS=$BT $PYTHON tests/device/cublas_bf16.py $(echo "$PS" | tr , ' ')"
        section "BitLinear against cuBLAS bf16 and torch._int_mm (kernel medians, weights kept, row scales; $(nruns peers-bl))" "$@"
        peers_bitlinear
        echo
        echo "\"ours vs\" is the other's time over ours, run by run; int_mm (int8, cuBLASLt) is timed above 16 tokens only."
        ;;
    esac
    case " $parts " in *" matmul "*)
        set -- "bitnet-bench $MB" "BITNET_OCL_MATMUL=clblast bitnet-bench $MB"
        [ $have_torch = 0 ] || set -- "$@" "TOKENS=$MT $PYTHON tests/device/torch_f32.py matmul $(echo "$MS" | tr , ' ')"
        section "Float products: own kernels against CLBlast and cuBLAS fp32 (kernel medians, weights kept; $(nruns peers-mm))" "$@"
        peers_matmul
        echo
        echo "\"own\" is the default choice (BITNET_OCL_MATMUL unset): the project's kernels on NVIDIA GPUs, CLBlast elsewhere;"
        echo "cuBLAS fp32 is torch's x @ W.T with TF32 off; own / cuBLAS is taken run by run."
        ;;
    esac
    case " $parts " in *" linalg "*)
        set -- "bitnet-bench $LC" "bitnet-bench $LO" "bitnet-bench $LQ"
        [ $have_torch = 0 ] || set -- "$@" "$PYTHON tests/device/torch_f32.py linalg $LN"
        section "Linear algebra, ${LN}x$LN f32: the host's LAPACK, OpenCL and torch (cuSOLVER; $(nruns peers-la-cpu))" "$@"
        peers_linalg
        echo
        echo "Host and torch: medians of the whole call; OpenCL: the end-to-end median, in parentheses the sum of its kernel times."
        ;;
    esac
    case " $parts " in *" quant "*)
        set -- "bitnet-bench $QB"
        [ $have_torch = 0 ] || set -- "$@" "$PYTHON tests/device/torch_absmean.py $QS"
        section "Weight quantization (absmean, per tensor): the GPU against the host CPU and torch ($(nruns peers-q))" "$@"
        peers_quant
        echo
        echo "GPU: the sum of the call's kernel times (the upload of the float weights not counted); host CPU: the call's time;"
        echo "torch: the unfused expression of tests/device/torch_absmean.py on the same GPU, CUDA events; ratios run by run."
        ;;
    esac
elif [ "$mode" = e2e ]; then
    section "The caller's view: kernel against end-to-end time ($(nruns e2e-kept))" "bitnet-bench $EK" "bitnet-bench $ER" "bitnet-bench $EF"
    e2e_table
    echo
    echo "\"kernel\" is the sum of the call's kernel times (profiling on), \"e2e\" the median wall time of the library call with"
    echo "profiling off, as a program runs it (on the host CPU the call's own time); e2e / kernel is taken run by run."
else
    section "GPU, weights kept on the device" "bitnet-bench $G"
    table gpu-bitlinear
    section "GPU energy (NVML)" "bitnet-bench --device opencl --op bitlinear --shape 4096x14336 --tokens 1,64 --scale row --keep-weights --energy"
    table gpu-energy
    section "Host CPU energy (RAPL)" "bitnet-bench --device cpu --op copy,bitlinear --shape 4096x14336 --tokens 1,64 --scale tensor --energy"
    table host-energy
fi
