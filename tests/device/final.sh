#!/bin/bash
# final.sh - one GPU-machine session (after `. .device/env.sh`): unit tests
# against NVIDIA's OpenCL, bitnet-verify --backends --full, the benchmarks the
# issues ask for, the cuBLAS bf16 baseline, and the GEMV variant sweep.
# Everything is logged under $OUT; the most important runs come first.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH="$PWD/.device/bin:$PATH"
B=bitnet-bench
step() { echo "== $* ($(date +%T))"; }
step gpu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
bitnet-info --devices > "$OUT/devices.txt" 2>&1
step unit tests on opencl:0
bash tests/device/run.sh tests > /dev/null 2>&1; cat "$OUT/unit-summary.txt"
step verify
timeout 150 bitnet-verify --backends --full --device opencl > "$OUT/verify-full.txt" 2>&1; echo "exit $?" >> "$OUT/verify-full.txt"
grep -E "FAIL|passed" "$OUT/verify-full.txt" | tail -5
step quantize
timeout 60 $B --device opencl --op copy,quantize_weights,quantize_acts --shape 4096x4096 --scale tensor --format md > "$OUT/bench-quant.md" 2> "$OUT/bench-quant.err"
cat "$OUT/bench-quant.md"
step add sum
timeout 90 $B --device opencl --op copy,add,sum --shape 16384x16384 --format md > "$OUT/bench-eltwise.md" 2> "$OUT/bench-eltwise.err"
cat "$OUT/bench-eltwise.md"
step bitlinear
timeout 150 $B --device cpu,opencl --op copy,bitlinear --shape 4096x4096 --shape 16384x16384 --tokens 1,8,64 --scale row \
    --format json -o "$OUT/bench-bitlinear.json" 2> "$OUT/bench-bitlinear.err"
echo "exit $?"
step cublas bf16
timeout 60 python3 tests/device/cublas_bf16.py 16384x16384 4096x4096 > "$OUT/cublas.txt" 2>&1; cat "$OUT/cublas.txt"
if [ -f tests/device/gemv-sweep.sh ]; then
    step gemv sweep
    timeout 130 bash tests/device/gemv-sweep.sh > "$OUT/gemv-sweep.txt" 2>&1; tail -30 "$OUT/gemv-sweep.txt"
fi
if [ -f tests/device/quant-sweep.sh ]; then
    step quantize sweep
    timeout 70 bash tests/device/quant-sweep.sh > "$OUT/quant-sweep.txt" 2>&1; tail -20 "$OUT/quant-sweep.txt"
fi
step done
