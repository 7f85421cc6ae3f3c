#!/bin/bash
# e2e.sh - the caller's view on the GPU machine (after `. .device/env.sh`),
# in one device call: BitLinear through the host-pointer API (weights kept)
# and fully device resident, the feed-forward block on the host CPU and the
# GPU side by side, weight quantization on both and in torch, and the CPU
# backend of this build against an earlier build's (.device/bin-base, if
# staged) in the same run.  Writes markdown tables under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=.device/bin
common="--scale row --format md --min-time 0.2"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)' > "$OUT/cpu.txt"
echo "== BitLinear, host pointers, weights kept" | tee -a "$OUT/e2e.md"
$B/bitnet-bench --device opencl --op bitlinear --shape 16384x16384 --shape 4096x14336 --tokens 1,8,64 \
    --keep-weights $common >> "$OUT/e2e.md" 2>&1
echo "== BitLinear, device resident" | tee -a "$OUT/e2e.md"
$B/bitnet-bench --device opencl --op bitlinear --shape 16384x16384 --shape 4096x14336 --tokens 1,8,64 \
    --resident $common >> "$OUT/e2e.md" 2>&1
echo "== feed-forward block 4096x14336, host CPU and GPU" | tee -a "$OUT/e2e.md"
$B/bitnet-bench --device cpu,opencl --op ffn --shape 4096x14336 --tokens 1,8,64 $common --stats \
    >> "$OUT/e2e.md" 2> "$OUT/ffn-stats.txt"
echo "== weight quantization 4096x4096 per tensor" | tee -a "$OUT/e2e.md"
$B/bitnet-bench --device cpu,opencl --op quantize_weights --shape 4096x4096 --scale tensor --format md \
    --min-time 0.2 >> "$OUT/e2e.md" 2>&1
python3 .device/t/device/torch_absmean.py >> "$OUT/e2e.md" 2>&1
if [ -x .device/bin-base/bitnet-bench ]; then
    echo "== CPU backend: this build, then the base build" | tee -a "$OUT/e2e.md"
    for b in $B .device/bin-base; do
        $b/bitnet-bench --device cpu --op bitlinear,quantize_weights,add --shape 4096x14336 --tokens 1,8 \
            --scale tensor --format md --min-time 0.2 >> "$OUT/e2e.md" 2>&1
    done
fi
cat "$OUT/e2e.md"
