#!/bin/bash
# clblast_ab.sh - on the GPU machine (after `. .device/env.sh`): CLBlast with
# the Xgemm settings this build sets for the device (lib/opencl/blas.c)
# against CLBlast's defaults (.device/bin-untuned/bitnet-bench, built with
# CPPFLAGS=-DBN_BLAS_UNTUNED), alternating, in one call: matmul_f32 through
# CLBlast and through the own kernels, the 4096 x 4096 Cholesky at several
# block widths and the QR, with cuBLAS/cuSOLVER through torch and the host's
# LAPACK in the same call.  The GPU unit tests of the float products and
# linear algebra run first on the tuned build.  Markdown under $OUT.
set -u
D=.device
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for t in test_linalg test_matmul; do
    CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$D/tests/$t" > "$OUT/$t.log" 2>&1
    echo "$t: exit $? $(grep -c '^ok ' "$OUT/$t.log") passed, $(grep -c '^not ok ' "$OUT/$t.log") failed"
done | tee "$OUT/unit-summary.txt"
mm="--device opencl --op matmul_f32 --shape 4096x4096 --shape 4096x14336 --shape 16384x16384 --tokens 1,8,64"
mm="$mm --keep-weights --format md --min-time 0.2"
la="--device opencl --shape 4096x4096 --min-reps 3 --min-time 0.2 --warmup 1 --format md"
for r in $(seq 1 "$ROUNDS"); do
    for v in untuned tuned; do
        b=$D/bin/bitnet-bench
        [ $v = untuned ] && b=$D/bin-untuned/bitnet-bench
        for m in clblast own; do
            echo "== round $r $v: matmul_f32 BITNET_OCL_MATMUL=$m"
            BITNET_OCL_MATMUL=$m timeout 100 $b $mm 2>&1 | grep '^| matmul'
        done
        for nb in 256 512 1024; do
            echo "== round $r $v: cholesky NB=$nb"
            BITNET_OCL_CHOL_NB=$nb timeout 60 $b --op cholesky $la 2>&1 | grep '^| cholesky'
        done
        echo "== round $r $v: qr"
        timeout 60 $b --op qr $la 2>&1 | grep '^| qr'
    done
done > "$OUT/clblast-ab.md"
echo "== default choice (tuned build)" >> "$OUT/clblast-ab.md"
timeout 100 $D/bin/bitnet-bench $mm 2>&1 | grep '^| matmul' >> "$OUT/clblast-ab.md"
timeout 100 python3 "$D/t/device/torch_f32.py" matmul 4096x4096 4096x14336 16384x16384 > "$OUT/cublas-fp32.txt" 2>&1
timeout 60 $D/bin/bitnet-bench --device cpu --threads 16 --op cholesky,qr --shape 4096x4096 --min-reps 3 \
    --min-time 0.2 --warmup 1 --format md 2>&1 | grep -E '^\| (cholesky|qr)' > "$OUT/linalg-cpu.md"
cat "$OUT/clblast-ab.md" "$OUT/cublas-fp32.txt" "$OUT/linalg-cpu.md"
