#!/bin/bash
# run.sh - runs on the GPU machine (after `. .device/env.sh`): the unit tests
# with OpenCL pointed at the GPU, the backend verification, and benchmarks.
# Logs go to $OUT.  usage: bash .device/t/device/run.sh [tests|verify|bench|all]
set -u
what=${1:-all}
D=.device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH="$PWD/$D/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
bitnet-info --devices > "$OUT/devices.txt" 2>&1
if [ "$what" = tests ] || [ "$what" = all ]; then
    pass=0; fail=0
    for t in "$D"/tests/test_*; do
        CMOCKA_MESSAGE_OUTPUT=TAP BITNET_TESTDATA="$PWD/$D/t/testdata" timeout 300 "$t" > "$OUT/$(basename "$t").log" 2>&1
        p=$(grep -c '^ok ' "$OUT/$(basename "$t").log"); f=$(grep -c '^not ok ' "$OUT/$(basename "$t").log")
        pass=$((pass + p)); fail=$((fail + f))
        echo "$(basename "$t"): $p passed, $f failed"
    done | tee "$OUT/unit-summary.txt"
fi
if [ "$what" = verify ] || [ "$what" = all ]; then
    timeout 400 bitnet-verify --backends --full --device opencl > "$OUT/verify-full.txt" 2>&1
    echo "verify exit $?" >> "$OUT/verify-full.txt"
    tail -3 "$OUT/verify-full.txt"
fi
