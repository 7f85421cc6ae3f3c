#!/bin/bash
# linalg.sh - runs on the GPU machine (after `. .device/env.sh`): the float
# products through CLBlast against the former own kernel and cuBLAS fp32, the
# linear-algebra unit tests on the GPU, and 4096 x 4096 Cholesky/QR/SVD on
# the GPU, the host's LAPACK and torch (cuSOLVER).  Logs go to $OUT.
set -u
D=.device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH="$PWD/$D/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
bitnet-info --devices > "$OUT/devices.txt" 2>&1
for t in test_linalg test_matmul test_keep; do
    CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$D/tests/$t" > "$OUT/$t.log" 2>&1
    echo "$t: exit $? $(grep -c '^ok ' "$OUT/$t.log") passed, $(grep -c '^not ok ' "$OUT/$t.log") failed"
done | tee "$OUT/unit-summary.txt"
mm="--device opencl --op matmul_f32 --shape 4096x4096 --shape 16384x16384 --tokens 1,64 --keep-weights --format md"
timeout 150 bitnet-bench $mm > "$OUT/mm-clblast.md" 2> "$OUT/mm-clblast.err"
BITNET_OCL_MATMUL=own timeout 150 bitnet-bench $mm > "$OUT/mm-own.md" 2> "$OUT/mm-own.err"
timeout 100 python3 "$D/t/device/torch_f32.py" matmul 4096x4096 16384x16384 > "$OUT/cublas-fp32.txt" 2>&1
la="--op cholesky,qr,svd --shape 4096x4096 --min-reps 3 --min-time 0.2 --warmup 1 --format md"
timeout 200 bitnet-bench --device cpu --threads 16 $la > "$OUT/linalg-cpu.md" 2> "$OUT/linalg-cpu.err"
timeout 100 bitnet-bench --device opencl --threads 16 --op cholesky --shape 4096x4096 --min-reps 5 --min-time 0.2 \
    --warmup 1 --format md > "$OUT/linalg-ocl.md" 2> "$OUT/linalg-ocl.err"
timeout 200 bitnet-bench --device opencl --threads 16 --op qr,svd --shape 4096x4096 --min-reps 1 --min-time 0.2 \
    --warmup 1 --format md >> "$OUT/linalg-ocl.md" 2>> "$OUT/linalg-ocl.err"
timeout 150 python3 "$D/t/device/torch_f32.py" linalg 4096 > "$OUT/torch-linalg.txt" 2>&1
cat "$OUT"/mm-*.md "$OUT/cublas-fp32.txt" "$OUT"/linalg-*.md "$OUT/torch-linalg.txt"
