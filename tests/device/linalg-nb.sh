#!/bin/bash
# linalg-nb.sh - on the GPU machine (after `. .device/env.sh`): the OpenCL
# Cholesky (4096 x 4096 f32) at several block widths against the host's
# LAPACK and torch (cuSOLVER) in the same call; the linear-algebra and
# matmul unit tests on the GPU first.  Kernel and end-to-end medians.
set -u
D=.device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH="$PWD/$D/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_linalg test_matmul; do
    CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$D/tests/$t" > "$OUT/$t.log" 2>&1
    echo "$t: exit $? $(grep -c '^ok ' "$OUT/$t.log") passed, $(grep -c '^not ok ' "$OUT/$t.log") failed"
done
c() { timeout 60 bitnet-bench --op cholesky --shape 4096x4096 --min-reps 5 --min-time 0.2 --warmup 1 --format csv "$@" 2>&1 |
    awk -F, '$1 == "cholesky" { printf "%s: %.2f ms (%s), e2e %.2f ms\n", $3, $8, $13, $14 }'; }
for nb in ${NBS:-256 512 1024}; do
    echo "== NB=$nb"
    BITNET_OCL_CHOL_NB=$nb c --device opencl
done
echo "== host LAPACK, 16 threads"
c --device cpu --threads 16
timeout 100 python3 "$D/t/device/torch_f32.py" linalg 4096 cholesky 2>&1 | grep cholesky
