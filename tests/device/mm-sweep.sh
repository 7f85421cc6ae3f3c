#!/bin/bash
# mm-sweep.sh - on the GPU machine (after `. .device/env.sh`): the float
# product's own kernels against CLBlast and cuBLAS fp32 (torch) in one call:
# CLBlast, the default choice, then mm_nt with each tile setting given
# (BITNET_OCL_MM_TILE=TM,TN,TK,RM,RN[,PARTS]) at the token counts given with
# it; test_matmul on the GPU first.  Kernel medians, weights kept.
#   mm-sweep.sh TOKENS:TILE ...      e.g. 64:64,64,16,4,4 8,16:8,64,32,1,4
set -u
D=.device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CMOCKA_MESSAGE_OUTPUT=TAP timeout 150 "$D/tests/test_matmul" > "$OUT/test_matmul.log" 2>&1
echo "test_matmul: exit $? $(grep -c '^ok ' "$OUT/test_matmul.log") passed, $(grep -c '^not ok ' "$OUT/test_matmul.log") failed"
shapes="${SHAPES:---shape 4096x4096 --shape 4096x14336 --shape 16384x16384}"
b() { timeout 100 $D/bin/bitnet-bench --device opencl --op matmul_f32 $shapes --keep-weights --format csv \
    --min-time 0.05 "$@" 2>&1 | awk -F, 'NR > 1 && $1 == "matmul_f32" { printf "%s t=%s %.1f us (e2e %.1f)\n", $4, $7, $8 * 1000, $14 * 1000 }'; }
echo "== CLBlast"
BITNET_OCL_MATMUL=clblast b --tokens 1,8,16,64
echo "== default"
b --tokens 1,8,16,64
for a in "$@"; do
    echo "== mm_nt ${a#*:}"
    BITNET_OCL_MATMUL=own BITNET_OCL_MM_TILE=${a#*:} b --tokens "${a%%:*}"
done
timeout 100 python3 "$D/t/device/torch_f32.py" matmul $(echo "$shapes" | sed 's/--shape //g') 2>&1 | grep cublas
