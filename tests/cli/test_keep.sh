#!/bin/sh
# test_keep.sh - bitnet-bench --keep-weights: bitlinear and matmul_f32 keep
# each set's weights on an OpenCL device, still pass their reference checks
# (which then read the kept copy) and say so in the row's note; CPU rows and
# ops without weights are unchanged; a planted bug is still caught.
. "$(dirname "$0")/lib.sh"

printf 'leak:libpocl\nleak:libLLVM\n' >"$T/lsan.supp" # PoCL's compiler, not ours
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

FAST="--min-reps 2 --min-time 0 --warmup 1 --roofline-size 1 --max-mem 256"
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
