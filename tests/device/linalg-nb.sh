#!/bin/bash
# linalg-nb.sh - on the GPU machine (after `. .device/env.sh`): the block width
# of the OpenCL Cholesky (4096 x 4096 f32), the linear-algebra and matmul unit
# tests on the GPU, and matmul_f32 with the kernel each shape takes now.
set -u
D=.device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH="$PWD/$D/bin:$PATH"
for t in test_linalg test_matmul; do
    CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$D/tests/$t" > "$OUT/$t.log" 2>&1
    echo "$t: exit $? $(grep -c '^ok ' "$OUT/$t.log") passed, $(grep -c '^not ok ' "$OUT/$t.log") failed"
done
for nb in 64 128 256 512 1024; do
    echo "NB=$nb"
    BITNET_OCL_CHOL_NB=$nb timeout 60 bitnet-bench --device opencl --op cholesky --shape 4096x4096 --min-reps 5 \
        --min-time 0.2 --warmup 1 --format md 2>&1 | grep '^| cholesky'
done
timeout 100 bitnet-bench --device opencl --op matmul_f32 --shape 4096x4096 --shape 16384x16384 --tokens 1,64 \
    --keep-weights --format md 2>&1 | grep '^| matmul'
