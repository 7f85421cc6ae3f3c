#!/bin/bash
# quant-ab.sh - OpenCL weight quantization on the GPU machine (after
# `. .device/env.sh`, with .device staged): the default build against the
# same build with each BITNET_QUANT_OPTS of VARIANTS (separated by "|";
# default "-DQ_PER_CU=8"), in ROUNDS alternating rounds: kernel medians
# (profiled) per tensor and with row scales, the caller's view of device
# buffers (--resident --timer e2e) and a chain of device-resident calls
# (--resident --chain 20), and torch's unfused expression
# (tests/device/torch_absmean.py) in every round.  With UNIT=1 first
# test_quantize on the native driver.  Markdown and logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}
SHAPES=${SHAPES:-4096x4096,14336x4096,4097x4099}
VARIANTS=${VARIANTS:--DQ_PER_CU=8}
B=.device/bin/bitnet-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
if [ -n "${UNIT:-}" ]; then
    CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 .device/tests/test_quantize > "$OUT/test_quantize.log" 2>&1
    echo "test_quantize: exit $?, $(grep -c '^ok ' "$OUT/test_quantize.log") ok, $(grep -c '^not ok ' "$OUT/test_quantize.log") not ok" | tee "$OUT/unit.txt"
fi
one() { # label, opts, bench args...
    local label=$1 opts=$2
    shift 2
    echo "== $label r$r" >> "$OUT/ab.md"
    BITNET_QUANT_OPTS=$opts timeout 120 "$B" --device opencl --op quantize_weights --format md "$@" >> "$OUT/ab.md" 2>> "$OUT/stderr.txt"
}
for r in $(seq 1 "$ROUNDS"); do
    IFS='|' read -r -a vs <<< "|$VARIANTS"
    for o in "${vs[@]}"; do
        v=${o:-default}
        one "[$v] kernel" "$o" --shape "$SHAPES" --scale tensor,row --min-time 0.2
        one "[$v] e2e resident" "$o" --shape "$SHAPES" --scale tensor --resident --timer e2e --min-time 0.2 --no-check
        one "[$v] chain20" "$o" --shape 4096x4096 --scale tensor --resident --chain 20 --min-time 0.2 --no-check
    done
    python3 tests/device/torch_absmean.py 4096x4096 >> "$OUT/torch.txt" 2>&1
    python3 tests/device/torch_absmean.py 14336x4096 >> "$OUT/torch.txt" 2>&1
done
echo done
