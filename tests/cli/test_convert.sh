#!/bin/sh
# test_convert.sh - bitnet-convert: safetensors -> bnt -> npy round trips with
# exact bytes, pipes, dtype casts (round to nearest even), globs, bad inputs
# with their messages and statuses, atomic output, refusal to write to a tty.
. "$(dirname "$0")/lib.sh"

REAL=$TESTDATA/real/fastml-jet-b158.safetensors
HEP=$TESTDATA/real/hep-bitnet-mnist-b158.safetensors

# ---- round trips: exact bytes ----
expect_rc 0 "safetensors -> bnt" bitnet-convert "$REAL" -o "$T/a.bnt"
expect_rc 0 "bnt -> npy of one tensor" bitnet-convert "$T/a.bnt" -t layers.1.weight -o "$T/via_bnt.npy"
expect_rc 0 "safetensors -> npy directly" bitnet-convert "$REAL" -t layers.1.weight -o "$T/direct.npy"
check "npy through .bnt equals npy written from the original (cmp)" cmp "$T/via_bnt.npy" "$T/direct.npy"
# independent check: the npy's data are the safetensors' bytes [8704, 25088)
# after the 8-byte length and the 528-byte header
tail -c +$((8 + 528 + 8704 + 1)) "$REAL" | head -c 16384 > "$T/raw.bin"
tail -c 16384 "$T/direct.npy" > "$T/npy_data.bin"
check "npy data are the original bytes" cmp "$T/raw.bin" "$T/npy_data.bin"
check "npy header is numpy's: magic, version 1.0, 64-byte aligned" \
    sh -c "head -c 8 '$T/direct.npy' | od -An -c | grep -q 'N   U   M   P   Y 001' && [ \$(( \$(wc -c < '$T/direct.npy') % 64 )) -eq 0 ]"
expect_rc 0 "bnt -> safetensors" bitnet-convert "$T/a.bnt" -o "$T/back.safetensors"
tail -c 25348 "$REAL" > "$T/d1"
tail -c 25348 "$T/back.safetensors" > "$T/d2"
check "safetensors -> bnt -> safetensors keeps every data byte" cmp "$T/d1" "$T/d2"
expect_rc 0 "bnt -> safetensors, info" bitnet-info --meta "$T/back.safetensors"
expect_out "source = $T/a.bnt" "the source is recorded"
expect_out "producer = bitnet-convert" "the producer is recorded"
expect_out "converted_from = fastml" "input metadata is carried over"

# ---- pipes ----
run sh -c "bitnet-convert '$REAL' -o - | bitnet-info -"
check "safetensors -> bnt on stdout | bitnet-info -" [ "$rc" -eq 0 ]
expect_out "layers.2.bias" "the piped .bnt lists its tensors"
expect_out "^-: bnt" "the piped output is .bnt by default"
run sh -c "cat '$REAL' | bitnet-convert - -o - --to safetensors | bitnet-convert - -o '$T/p.npy' -t layers.0.weight"
check "stdin -> safetensors on stdout -> stdin -> npy" [ "$rc" -eq 0 ]
expect_rc 0 "piped npy, direct npy" bitnet-convert "$REAL" -t layers.0.weight -o "$T/p2.npy"
check "the pipe chain gives the same bytes" cmp "$T/p.npy" "$T/p2.npy"
if [ -x "$BIN/bitnet-verify" ]; then
    run sh -c "bitnet-convert '$REAL' -o - | bitnet-verify -"
    check "bitnet-convert | bitnet-verify - accepts the stream" [ "$rc" -eq 0 ]
fi

# ---- dtype casts ----
# six f32 values, two ties for f16 and one overflow: 1+2^-11, 1+3*2^-11, 65520, 2, -2, 0.5
{ head -c 128 "$TESTDATA/npy/good_f32_v2.npy"
  printf '\000\020\200\077\000\060\200\077\000\360\177\107\000\000\000\100\000\000\000\300\000\000\000\077'; } > "$T/ties.npy"
expect_rc 0 "f32 -> f16 cast" bitnet-convert "$T/ties.npy" --dtype f16 -o "$T/ties16.npy"
printf '\000\074\002\074\000\174\000\100\000\300\000\070' > "$T/want16"
tail -c 12 "$T/ties16.npy" > "$T/got16"
check "f16 rounds to nearest even, overflow to inf" cmp "$T/want16" "$T/got16"
expect_rc 0 "f32 -> i16 cast" bitnet-convert "$TESTDATA/npy/good_f32_v1.npy" --dtype i16 -o "$T/i16.npy"
printf '\001\000\002\000\003\000\004\000\005\000\006\000' > "$T/want_i16"
tail -c 12 "$T/i16.npy" > "$T/got_i16"
check "f32 -> i16 values" cmp "$T/want_i16" "$T/got_i16"
expect_rc 0 "f32 -> bf16 into safetensors" bitnet-convert "$REAL" --dtype bf16 -o "$T/bf.safetensors"
expect_rc 0 "info bf16" bitnet-info "$T/bf.safetensors"
expect_out "layers.0.weight  *bf16" "the cast is applied"
expect_rc 1 "bf16 cannot go to npy" bitnet-convert "$T/bf.safetensors" -t layers.0.bias -o "$T/bf.npy"
expect_err "no bf16 dtype" "the bf16 refusal says why"
expect_rc 2 "float to ternary is refused" bitnet-convert "$REAL" --dtype t2 -o "$T/t.bnt"
expect_err "bitnet-quantize" "the refusal points to bitnet-quantize"

# ---- ternary and int8: dequantize for npy/safetensors ----
if [ -x "$BIN/bitnet-quantize" ]; then
    # w = [[2, -2, 0], [1, -4, 3]]: absmean d = 2, q = [[1, -1, 0], [0, -1, 1]]
    # (0.5 rounds to even, -2 and 1.5 clamp/round to -1 and 1), so w' = q * d
    { head -c 128 "$TESTDATA/npy/good_f32_v1.npy"
      printf '\000\000\000\100\000\000\000\300\000\000\000\000\000\000\200\077\000\000\200\300\000\000\100\100'; } > "$T/w.npy"
    printf '\000\000\000\100\000\000\000\300\000\000\000\000\000\000\000\000\000\000\000\300\000\000\000\100' > "$T/want_dq"
    expect_rc 0 "quantize a hand-made matrix (t2)" bitnet-quantize "$T/w.npy" -t array -o "$T/q.bnt"
    expect_rc 1 "ternary tensors are refused by npy" bitnet-convert "$T/q.bnt" -o "$T/q.npy"
    expect_err "dequantize first (bitnet-convert --dtype f32)" "the message says to dequantize with --dtype f32"
    check "and nothing is written" [ ! -e "$T/q.npy" ]
    expect_rc 1 "ternary tensors are refused by safetensors" bitnet-convert "$T/q.bnt" -o "$T/q.safetensors"
    expect_rc 0 "--dtype f32 dequantizes t2" bitnet-convert "$T/q.bnt" --dtype f32 -o "$T/dq.npy"
    tail -c 24 "$T/dq.npy" > "$T/got_dq"
    check "dequantized values are q * d" cmp "$T/want_dq" "$T/got_dq"
    expect_rc 0 "quantize as t3" bitnet-quantize "$T/w.npy" -t array --pack base3 -o "$T/q3.bnt"
    expect_rc 0 "--dtype f32 dequantizes t3" bitnet-convert "$T/q3.bnt" --dtype f32 -o "$T/dq3.npy"
    tail -c 24 "$T/dq3.npy" > "$T/got_dq3"
    check "t3 dequantizes to the same values" cmp "$T/want_dq" "$T/got_dq3"
    expect_rc 0 "t3 -> t2 -> f32 through pipes" sh -c "bitnet-convert '$T/q3.bnt' --dtype t2 -o - | bitnet-convert - --dtype f32 -o '$T/dq32.npy'"
    check "t3 -> t2 keeps the codes" cmp "$T/dq.npy" "$T/dq32.npy"
    expect_rc 0 "dequantize to bf16" bitnet-convert "$T/q.bnt" --dtype bf16 -o "$T/dq.safetensors"
    printf '\000\100\000\300\000\000\000\000\000\300\000\100' > "$T/want_bf"
    tail -c 12 "$T/dq.safetensors" > "$T/got_bf"
    check "bf16 dequantized values" cmp "$T/want_bf" "$T/got_bf"
    expect_rc 2 "ternary to an integer dtype is refused" bitnet-convert "$T/q.bnt" --dtype i8 -o "$T/x.bnt"
    expect_err "float dtype" "says a float dtype is needed"
    # int8 activations, absmax per row: row 0 has s = 127/2, q = [127, -127, 0] -> x = [2, -2, 0]; x[1][1] = -4
    expect_rc 0 "quantize activations (int8 + row scales)" bitnet-quantize "$T/w.npy" --activations -o "$T/act.bnt"
    expect_rc 0 "--dtype f32 dequantizes int8 with scales" bitnet-convert "$T/act.bnt" --dtype f32 -o "$T/da.npy"
    tail -c 24 "$T/da.npy" | head -c 12 > "$T/got_a0"
    head -c 12 "$T/want_dq" > "$T/want_a0"
    check "x = q / s on the first row" cmp "$T/want_a0" "$T/got_a0"
    tail -c 8 "$T/da.npy" | head -c 4 > "$T/got_a4"
    printf '\000\000\200\300' > "$T/want_a4"
    check "x = q / s at the row maximum" cmp "$T/want_a4" "$T/got_a4"
    expect_rc 0 "the real model quantized, then dequantized to safetensors" \
        sh -c "bitnet-quantize '$REAL' -o - | bitnet-convert - --dtype f16 -o '$T/rq.safetensors'"
fi

# ---- globs ----
expect_rc 0 "-t glob" bitnet-convert "$HEP" -t 'layers.*.weight' --exclude 'layers.6.*' --exclude '*.norm.*' -o "$T/g.safetensors"
expect_rc 0 "info glob" bitnet-info "$T/g.safetensors"
expect_out "^3 tensors" "three weights selected"
check "no bias, no norm, no layer 6" sh -c "! grep -q -e bias -e norm -e 'layers.6' '$T/out'"
expect_out "layers.0.weight" "layers.0.weight selected"
expect_rc 0 "repeated -t" bitnet-convert "$HEP" -t layers.0.bias -t 'layers.2.b*' -o "$T/g2.safetensors"
run bitnet-info "$T/g2.safetensors"
expect_out "^2 tensors" "two globs select two tensors"
expect_rc 2 "a glob matching nothing" bitnet-convert "$REAL" -t 'nothing*' -o "$T/none.bnt"
expect_err "no tensor matches" "says nothing matched"
check "no output when nothing matched" [ ! -e "$T/none.bnt" ]
expect_rc 2 "several tensors into npy" bitnet-convert "$REAL" -o "$T/many.npy"
expect_err "exactly one tensor" "npy holds one tensor"
check "no partial npy" [ ! -e "$T/many.npy" ]

# ---- --from/--to ----
expect_rc 0 "--to npy with an odd extension" bitnet-convert "$REAL" -t layers.2.bias --to npy -o "$T/x.dat"
check "--to wins over the extension" sh -c "head -c 6 '$T/x.dat' | od -An -c | grep -q 'N   U   M   P   Y'"
expect_rc 0 "format from magic bytes, not extension" bitnet-info "$T/x.dat"
cp "$T/a.bnt" "$T/misnamed.npy"
expect_rc 0 "a .bnt named .npy is read as .bnt" bitnet-convert "$T/misnamed.npy" -o "$T/m.safetensors"
expect_rc 1 "--from npy on a safetensors file" bitnet-convert --from npy "$REAL" -o "$T/y.bnt"
expect_err "bad magic" "--from forces the reader"
expect_rc 2 "--to unknown" bitnet-convert "$REAL" --to hdf5 -o "$T/y.bnt"
expect_err "unknown format 'hdf5'" "unknown --to is named"
expect_rc 2 "--dtype unknown" bitnet-convert "$REAL" --dtype f128 -o "$T/y.bnt"
expect_err "unknown dtype 'f128'" "unknown --dtype is named"
expect_rc 2 "--level out of range" bitnet-convert "$REAL" --level 12 -o "$T/y.bnt"
expect_rc 0 "--level 0 --threads 2" bitnet-convert "$REAL" --level 0 --threads 2 -o "$T/l0.bnt"
expect_rc 0 "--level 9" bitnet-convert "$REAL" --level 9 -o "$T/l9.bnt"
check "level 9 is smaller than level 0" [ "$(wc -c < "$T/l9.bnt")" -lt "$(wc -c < "$T/l0.bnt")" ]

# ---- bad inputs ----
expect_rc 3 "missing input" bitnet-convert "$T/nope.safetensors" -o "$T/y.bnt"
expect_err "^bitnet-convert: .*nope.safetensors: cannot open" "missing input is named"
printf 'hello, world, this is text\n' > "$T/text.txt"
expect_rc 1 "unknown format" bitnet-convert "$T/text.txt" -o "$T/y.bnt"
expect_err "unknown format" "unknown format message"
expect_rc 1 "broken safetensors" bitnet-convert "$TESTDATA/safetensors/overlap.safetensors" -o "$T/y.bnt"
expect_err "overlap" "overlap message"
expect_rc 1 "object npy" bitnet-convert "$TESTDATA/npy/object.npy" -o "$T/y.bnt"
expect_err "object arrays" "object dtype message"
expect_rc 2 "no -o" bitnet-convert "$REAL"
expect_rc 3 "output into a missing directory" bitnet-convert "$REAL" -o "$T/no/such/dir/y.bnt"

# ---- atomic output ----
head -c 20000 "$REAL" > "$T/trunc.safetensors"
mkdir "$T/atomic"
expect_rc 1 "truncated input fails" bitnet-convert "$T/trunc.safetensors" -o "$T/atomic/out.bnt"
expect_err "truncated" "truncation is reported"
check "no output file remains, no temporary either" [ -z "$(ls -A "$T/atomic")" ]
printf 'keep me\n' > "$T/atomic/out.bnt"
expect_rc 1 "truncated input over an existing output" bitnet-convert "$T/trunc.safetensors" -o "$T/atomic/out.bnt"
check "the existing output is untouched" sh -c "[ \"\$(cat '$T/atomic/out.bnt')\" = 'keep me' ]"
check "still no temporary" [ "$(ls -A "$T/atomic")" = out.bnt ]
run sh -c "cat '$T/trunc.safetensors' | bitnet-convert - -o '$T/atomic/p.bnt'"
check "truncated stdin fails" [ "$rc" -eq 1 ]
check "and leaves nothing" [ ! -e "$T/atomic/p.bnt" ]

# ---- terminal ----
run script -qec "$BIN/bitnet-convert '$REAL' -o -" /dev/null
check "writing binary to a terminal exits 2" [ "$rc" -eq 2 ]
check "and says so" grep -q "refusing to write binary data to a terminal" "$T/out"
run script -qec "$BIN/bitnet-convert '$REAL' -t layers.2.bias --to npy -f -o -" /dev/null
check "-f writes to a terminal anyway" [ "$rc" -eq 0 ]

echo "1..$_n"
