#!/bin/sh
# test_keep.sh - bitnet-bench --keep-weights: bitlinear and matmul_f32 keep
# each set's weights on an OpenCL device, still pass their reference checks
# (which then read the kept copy) and say so in the row's note; CPU rows and
# ops without weights are unchanged; a planted bug is still caught.
# quantize_weights keeps its float weights, or (--resident) runs on device
# buffers, checked either way; --chain times resident calls back to back and
# is refused without --resident.
. "$(dirname "$0")/lib.sh"

printf 'leak:libpocl\nleak:libLLVM\n' >"$T/lsan.supp" # PoCL's compiler, not ours
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

FAST="--min-reps 2 --min-time 0 --warmup 1 --roofline-size 1 --max-mem 4" # a few MiB of sets: enough sets, each kept on its own
bench() { bitnet-bench $FAST "$@"; }
NOTE="weights kept on the device"

expect_rc 0 "--help exits 0" bitnet-bench --help
expect_out "--keep-weights" "--help lists --keep-weights"

# the CPU keeps nothing: no note
expect_rc 0 "--keep-weights on the cpu" bench --op bitlinear,matmul_f32 --shape 17x300 --tokens 1,3 --scale row \
    --device cpu --keep-weights --format csv
check "cpu rows carry no kept note" sh -c "! grep -q '$NOTE' '$T/out'"
check "cpu rows check ok" sh -c "tail -n +2 '$T/out' | grep -c ',ok,' | grep -qx 4"

if ! bitnet-bench --list-devices 2>/dev/null | grep -q 'opencl:0'; then
    echo "# no OpenCL device: the device half is skipped"
    exit 0
fi

expect_rc 0 "--keep-weights on opencl" bench --op bitlinear,matmul_f32 --shape 17x300,64x4097 --tokens 1,7 \
    --scale tensor,group:64 --device opencl --keep-weights --format csv
check "twelve rows, all checked ok" sh -c "tail -n +2 '$T/out' | grep -c ',ok,' | grep -qx 12"
check "every row says its weights were kept" sh -c "tail -n +2 '$T/out' | grep -c '$NOTE' | grep -qx 12"

expect_rc 0 "the same without the flag" bench --op bitlinear --shape 17x300 --device opencl --scale row --format csv
check "no kept note without the flag" sh -c "! grep -q '$NOTE' '$T/out'"

expect_rc 0 "an op without weights ignores it" bench --op add --shape 300 --device opencl --keep-weights --format csv
check "add rows carry no kept note" sh -c "! grep -q '$NOTE' '$T/out'"

expect_rc 0 "JSON carries the note" bench --op matmul_f32 --shape 33x65 --device opencl --keep-weights --format json
expect_out "\"note\": \"$NOTE\"" "the JSON row's note says the weights were kept"

expect_rc 1 "a planted bug still fails the check with kept weights" \
    env BITNET_TEST_PERTURB=bitlinear "$TEST_BIN/bitnet-bench" $FAST --op bitlinear --shape 17x300 --scale row --device opencl --keep-weights --format csv
check "the row is FAIL" grep -q ',FAIL,' "$T/out"

# weight quantization: its float weights kept, or everything in device
# buffers (--resident), checked against the reference either way
expect_rc 0 "quantize_weights keeps its weights" bench --op quantize_weights --shape 17x300,5x4097 \
    --scale tensor,row --device opencl --keep-weights --format csv
check "four rows, all checked ok and kept" sh -c "tail -n +2 '$T/out' | grep ',ok,' | grep -c '$NOTE' | grep -qx 4"
for layout in 0 1; do
    expect_rc 0 "quantize_weights resident (GPU layout forced: $layout)" env BITNET_OCL_FORCE_GPU_LAYOUT=$layout \
        "$BIN/bitnet-bench" $FAST --op quantize_weights --shape 17x300,5x4097 --scale tensor,row,group:64 \
        --device opencl --resident --format csv
    check "six resident rows checked ok (layout $layout)" sh -c "tail -n +2 '$T/out' | grep -c ',ok,' | grep -qx 6"
done

# --chain: N resident calls back to back, one wait; only with --resident
expect_rc 0 "--chain with --resident" bench --op bitlinear,quantize_weights --shape 17x300 --scale tensor \
    --device opencl --resident --chain 3 --format csv
check "both rows checked ok and say they were chained" \
    sh -c "tail -n +2 '$T/out' | grep ',ok,' | grep -c 'chains of 3 calls, one wait each' | grep -qx 2"
expect_rc 2 "--chain without --resident is refused" bench --op bitlinear --shape 17x300 --device opencl --chain 3
expect_err "needs N >= 1 and --resident" "it says why"
expect_rc 2 "--chain 0 is refused" bench --op bitlinear --shape 17x300 --device opencl --resident --chain 0
