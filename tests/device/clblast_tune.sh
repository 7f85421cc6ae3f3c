#!/bin/bash
# clblast_tune.sh - runs on the GPU machine (after `. .device/env.sh`, with
# clblast-utils among .device/debs): CLBlast's own tuner for its main GEMM
# kernel (Xgemm, single precision), whose parameters every CLBlast product,
# SYRK and TRSM we call runs on.  The tuner writes one JSON file per phase
# (clblast_xgemm_<phase>_32.json) into $OUT.  The best of them is what
# CLBlastOverrideParameters would set for this device (not shipped yet: no
# GPU run has tuned it).
# usage: clblast_tune.sh [SECONDS] [SIZE]   (defaults 420 and 2048: m = n = k)
set -u
OUT=${OUT:-/tmp/out}
secs=${1:-420}
n=${2:-2048}
mkdir -p "$OUT"
cd "$OUT" || exit 2
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > gpu.txt 2>&1
# phase 1 tries a fixed set of settings; later phases a random fraction of a
# larger space: whatever phases finish within the time leave their JSON
timeout "$secs" clblast_tuner_xgemm -precision 32 -m "$n" -n "$n" -k "$n" -fraction 0.005 -runs 3 > xgemm.log 2>&1
echo "tuner exit $?; $(ls clblast_xgemm_*.json 2>/dev/null | tr '\n' ' ')"
for f in clblast_xgemm_*.json; do
    [ -f "$f" ] && grep -E '"best_(kernel|time|parameters)"|"clblast_device_(name|architecture)"' "$f"
done
# the log is large: keep its head and tail
{ head -40 xgemm.log; echo ...; tail -40 xgemm.log; } > xgemm-short.log && rm -f xgemm.log
