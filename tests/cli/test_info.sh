#!/bin/sh
# test_info.sh - bitnet-info: tensor listing of every format (files and
# stdin), --meta, --json, stored/raw sizes of .bnt, broken inputs, --devices.
. "$(dirname "$0")/lib.sh"

REAL=$TESTDATA/real/fastml-jet-b158.safetensors

expect_rc 0 "lists a safetensors file" bitnet-info "$REAL"
expect_out "^$REAL: safetensors" "names the file and its format"
expect_out "^layers.1.weight  *f32  *\[32, 128\]  *4096  *16384  *16384  *1.00 none" "name, dtype, shape, elements, sizes, ratio, scales"
expect_out "^6 tensors, 6337 elements" "the total line"
expect_rc 0 "reads standard input" sh -c "bitnet-info - < '$REAL'"
expect_out "^-: safetensors" "stdin is named '-'"
expect_out "layers.2.bias" "stdin tensors listed"

expect_rc 0 "--meta" bitnet-info --meta "$REAL"
expect_out "converted_from = fastml_bit158_128_32__seed42.pt" "--meta prints the metadata"
expect_rc 0 "npy" bitnet-info "$TESTDATA/npy/good_fortran.npy"
expect_out "^array  *f32  *\[2, 3\]" "an npy lists its one array"
expect_rc 0 "rank-0 npy" bitnet-info "$TESTDATA/npy/good_be_scalar.npy"
expect_out "i16  *\[\]  *1 " "a scalar has shape [] and one element"

# .bnt: compressed sizes and ratio
expect_rc 0 "make a .bnt" bitnet-convert "$TESTDATA/real/hep-bitnet-mnist-b158.safetensors" --level 9 -o "$T/a.bnt"
expect_rc 0 "lists a .bnt" bitnet-info "$T/a.bnt"
expect_out "^$T/a.bnt: bnt" "format bnt"
check "stored bytes differ from raw bytes for compressed data" \
    awk '$1 == "layers.0.weight" { f = ($6 != $7 && $7 == 1605632) } END { exit !f }' "$T/out"
expect_rc 0 "several files" bitnet-info "$REAL" "$T/a.bnt"
check "both files listed" [ "$(grep -c '^[^ ]*: \(bnt\|safetensors\)$' "$T/out")" -eq 2 ]

# --json
expect_rc 0 "--json" bitnet-info --json "$REAL" "$TESTDATA/safetensors/good_meta.safetensors"
expect_out '"files": \[' "a files array"
expect_out '"name": "layers.0.weight"' "tensor names"
expect_out '"format": "safetensors"' "the format"
expect_out '"note": "hand made"' "metadata in JSON"
expect_out '"stored_bytes": 8192' "stored bytes"
check "shapes as arrays" sh -c "tr -d ' \n' < '$T/out' | grep -q '\"shape\":\[128,16\]'"

# errors: the first failure decides the status, the other files still listed
expect_rc 1 "a broken file" bitnet-info "$TESTDATA/safetensors/gap.safetensors" "$REAL"
expect_err "^bitnet-info: .*gap.safetensors: malformed input (safetensors: gap in the data" "the error names file and problem"
expect_out "layers.2.bias" "the next file is still listed"
expect_rc 1 "truncated npy" bitnet-info "$TESTDATA/npy/trunc_data.npy"
expect_err "truncated" "truncation reported"
expect_rc 3 "a missing file" bitnet-info "$T/nope"
expect_err "cannot open" "says it cannot open"
expect_rc 2 "no file" bitnet-info
expect_rc 2 "stdin twice" bitnet-info - -
printf 'plain text, not tensors' > "$T/t.txt"
expect_rc 1 "unknown format" bitnet-info "$T/t.txt"
expect_err "unknown format" "unknown format reported"

# devices
expect_rc 0 "--devices" bitnet-info --devices
expect_out "cpu" "the CPU is listed"
expect_rc 0 "--devices --json" bitnet-info --devices --json
expect_out "{" "JSON device list"
expect_rc 2 "--devices with a file" bitnet-info --devices "$REAL"

echo "1..$_n"
