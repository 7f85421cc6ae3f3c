#!/bin/sh
# test_gguf.sh - GGUF through the tools: bitnet-info (types, --meta, --json),
# the broken corpus (testdata/gguf/bad/EXPECTED: each file refused with its
# message, from a file and from a pipe, nothing left behind), the real
# stories260K.gguf (byte-identical round trip through .bnt, from a file and
# through pipes; verify, compare, quantize, matmul, bench --model), ternary
# tensors out to GGUF, I2_S coming back as TQ2_0, and bitnet.cpp's TL1/TL2
# listed but not converted.
. "$(dirname "$0")/lib.sh"
G=$TESTDATA/gguf
R=$TESTDATA/real/stories260K.gguf
tab=$(printf '\t')

# ---- bitnet-info ------------------------------------------------------------------
expect_rc 0 "info lists types.gguf" bitnet-info "$G/types.gguf"
expect_out '^tq2 .* tq2_0 .*\[3, 512\] .*group:256' "info: tq2_0 with its block scales"
expect_out '^tq1 .* tq1_0 .*\[2, 768\]' "info: tq1_0"
expect_out '^bf16 .* bf16 ' "info: bf16"
expect_out 'version 3, alignment 64' "info: version and alignment"
expect_rc 0 "info --meta" bitnet-info --meta "$R"
expect_out '^  gguf:tokenizer.ggml.tokens = arr:str:512:\["<unk>","<s>",.*\.\.\. (3857 bytes)$' "--meta: the vocabulary is summarised"
expect_out '^  gguf:llama.block_count = u32:5$' "--meta: a u32"
expect_out '^  gguf:llama.attention.layer_norm_rms_epsilon = f32:9.99999975e-06$' "--meta: an f32"
expect_rc 0 "info --json" bitnet-info --json "$R"
check "--json: the vocabulary key" grep -q '"gguf:tokenizer.ggml.tokens": "arr:str:512:\[' "$T/out"
check "--json: the whole vocabulary, not a summary" [ "$(grep 'gguf:tokenizer.ggml.tokens' "$T/out" | wc -c)" -gt 3857 ]
expect_rc 0 "info lists a type it does not convert" bitnet-info "$G/bad/unsupported_q4_k.gguf"
expect_out '^q .* q4_K .*(not converted here)' "info: q4_K named"
expect_rc 0 "info: i2_s" bitnet-info "$G/i2s.gguf"
expect_out '^i2s .* i2_s .*\[4, 256\] .*tensor' "info: i2_s with its tensor scale"
run sh -c 'cat "$1" | bitnet-info -' sh "$R"
check "info from a pipe" [ "$rc" -eq 0 ]
# bitnet.cpp's TL1 (38) and TL2 (39, MXFP4 in ggml): listed, sized from the layout
expect_rc 0 "info lists bitnet.cpp's TL1 and TL2" bitnet-info "$G/bad/tl1_tl2.gguf"
expect_out '^tl1  *? *\[4, 256\]  *1024  *160  *0 .*(unknown ggml type 38, size from the layout)$' "info: tl1, 160 bytes up to the next tensor"
expect_out '^tl2  *? *\[4, 256\]  *1024  *96  *0 .*(unknown ggml type 39, size from the layout)$' "info: a 39 that is not mxfp4-sized"
expect_out '^norm  *f32 .* 32  *32 ' "info: the tensor after them"
expect_out '^mx  *mxfp4 *\[4, 256\]  *1024  *544 ' "info: a 39 laid out as mxfp4 is mxfp4"
expect_rc 0 "info --json" bitnet-info --json "$G/bad/tl1_tl2.gguf"
check "--json: ggml_type and size_from_layout" sh -c 'tr -d " \n" <"$1" | grep -q "\"name\":\"tl1\",\"dtype\":\"?\",\"ggml_type\":38,\"converts_to\":null,\"size_from_layout\":true"' sh "$T/out"
expect_rc 0 "info: a TL2 tensor last in the file" bitnet-info "$G/bad/tl2_last.gguf"
expect_out '^tl2  *? .* 96  *0 .*(unknown ggml type 39, size from the layout)$' "info: sized up to the end of the file"
expect_rc 1 "convert refuses TL1 and names the code" bitnet-convert "$G/bad/tl1_tl2.gguf" -o "$T/tl.bnt"
expect_err "tensor 'tl1': unknown ggml type 38 (bitnet.cpp's tl1) is not converted" "the message names the code"
run sh -c 'cat "$1" | bitnet-convert - -o "$2"' sh "$G/bad/tl2_last.gguf" "$T/tl.bnt"
check "a last 39 from a pipe (taken as mxfp4) is refused" [ "$rc" -eq 1 ]
expect_err "ggml type mxfp4 is not supported here (code 39, also bitnet.cpp's tl2" "the pipe message names both meanings"
expect_rc 0 "verify checks the layout and the tensors it can read" bitnet-verify "$G/bad/tl1_tl2.gguf"
expect_out 'OK (gguf, 1 tensor)' "verify: the f32 tensor read, the others skipped"

# ---- the broken corpus ----------------------------------------------------------
while IFS="$tab" read -r file detail; do
    case $file in '#'* | '') continue ;; esac
    expect_rc 1 "$file refused" bitnet-convert "$G/bad/$file" -o "$T/out.bnt"
    if grep -q -F -e "$detail" "$T/err"; then ok "$file: message names '$detail'"; else
        notok "$file: stderr lacks '$detail'"; sed 's/^/#   /' "$T/err" | head -3; fi
    check "$file: no output left" [ ! -e "$T/out.bnt" ]
    run sh -c 'cat "$1" | bitnet-convert - -o "$2"' sh "$G/bad/$file" "$T/out.bnt"
    check "$file refused from a pipe" [ "$rc" -eq 1 ]
done <"$G/bad/EXPECTED"
expect_rc 1 "verify fails on bad codes" bitnet-verify "$G/bad/tq2_code3.gguf"
expect_rc 0 "verify passes a file with a type it only checks the layout of" bitnet-verify "$G/bad/unsupported_q4_k.gguf"
run sh -c 'head -c 200 "$1" | bitnet-verify -' sh "$G/bad/unsupported_q4_k.gguf"
check "from a pipe, the data of a skipped type cut short are found" [ "$rc" -eq 1 ]
expect_out 'input ends at file byte 200, inside the tensor data' "the report says where"

# ---- the real file ----------------------------------------------------------------
expect_rc 0 "stories260K.gguf -> .bnt" bitnet-convert "$R" -o "$T/s.bnt"
expect_rc 0 ".bnt -> .gguf" bitnet-convert "$T/s.bnt" -o "$T/s.gguf"
check "GGUF -> .bnt -> GGUF is byte-identical" cmp -s "$R" "$T/s.gguf"
run sh -c 'cat "$1" | bitnet-convert - -o - -f | bitnet-convert - --to gguf -o - -f > "$2"' sh "$R" "$T/p.gguf"
check "the same through pipes" [ "$rc" -eq 0 ]
check "pipes: byte-identical" cmp -s "$R" "$T/p.gguf"
expect_rc 0 "gguf -> safetensors -> gguf runs" sh -c 'bitnet-convert "$1" -o "$2/s.safetensors" && bitnet-convert "$2/s.safetensors" -o "$2/s2.gguf"' sh "$R" "$T"
expect_rc 0 "the tensors survive safetensors" bitnet-verify --compare "$R" "$T/s2.gguf"
expect_rc 0 "verify reads every tensor" bitnet-verify "$R"
expect_out 'OK (gguf, 48 tensors)' "verify: 48 tensors"
expect_rc 0 "--compare gguf with bnt" bitnet-verify --compare "$R" "$T/s.bnt"
expect_rc 0 "one tensor to .npy" bitnet-convert "$R" -t output_norm.weight -o "$T/n.npy"
expect_rc 0 "quantize a float GGUF" bitnet-quantize "$R" -o "$T/q.bnt"
expect_rc 0 "list the quantized model" bitnet-info "$T/q.bnt"
check "quantize: 37 ternary tensors" [ "$(grep -c ' t2 ' "$T/out")" -eq 37 ]
expect_rc 1 "rows of 64 cannot be TQ2_0" bitnet-convert "$T/q.bnt" -o "$T/q.gguf"
expect_err "need a multiple of 256" "the message says why"
check "nothing half written" [ ! -e "$T/q.gguf" ]
expect_rc 0 "matmul -w model.gguf:TENSOR" bitnet-matmul -w "$R:blk.0.ffn_gate.weight" -x "$R:blk.0.attn_norm.weight" -o "$T/y1.npy"
expect_rc 0 "matmul with the same weights from .bnt" bitnet-matmul -w "$T/s.bnt:blk.0.ffn_gate.weight" -x "$T/s.bnt:blk.0.attn_norm.weight" -o "$T/y2.npy"
check "matmul: same result from GGUF and .bnt" cmp -s "$T/y1.npy" "$T/y2.npy"
expect_rc 0 "bench --model on GGUF" bitnet-bench --op bitlinear --scale row --model "$R" --format csv
check "bench --model: five distinct shapes" [ "$(tail -n +2 "$T/out" | wc -l)" -eq 5 ]

# ---- ternary out to GGUF ------------------------------------------------------------
M=$TESTDATA/real/hep-bitnet-mnist-b158.safetensors
expect_rc 0 "quantize a 512x512 layer with row scales" bitnet-quantize --scale row -t layers.2.weight "$M" -o "$T/h.bnt"
expect_rc 0 "t2 -> TQ2_0" bitnet-convert -v -t layers.2.weight "$T/h.bnt" -o "$T/h.gguf"
expect_err 'f16 block scales change the scales by at most' "-v reports the f16 rounding of the scales"
expect_rc 0 "t3 -> TQ1_0" bitnet-convert -t layers.2.weight --dtype t3 "$T/h.bnt" -o "$T/h1.gguf"
expect_rc 0 "info on our TQ1_0" bitnet-info "$T/h1.gguf"
expect_out 'tq1_0 .*\[512, 512\]' "TQ1_0 written"
expect_rc 0 "codes survive TQ2_0 (scales within f16 rounding)" bitnet-verify --compare --max-abs 0.001 "$T/h.bnt:layers.2.weight" "$T/h.gguf:layers.2.weight"
expect_rc 0 "TQ1_0 and TQ2_0 hold the same weights" bitnet-verify --compare "$T/h.gguf:layers.2.weight" "$T/h1.gguf:layers.2.weight" --max-abs 0
expect_rc 0 "back to .bnt" bitnet-convert "$T/h.gguf" -o "$T/h2.bnt"
expect_rc 0 "and to GGUF again: byte-identical" sh -c 'bitnet-convert "$1" -o "$2" && cmp "$2" "$3"' sh "$T/h2.bnt" "$T/h3.gguf" "$T/h.gguf"

# ---- what the gguf Python package read from our GGUF (tests/gguf_readback.py) -------
# testdata/gguf/readback: the GGUF files our tools wrote for layers.6.weight and the
# values the package dequantized from them.  Today's tools must write the same
# bytes, and our reader must dequantize them to the package's values exactly.
RB=$G/readback
expect_rc 0 "quantize layers.6.weight (row scales)" bitnet-quantize --scale row -t layers.6.weight "$M" -o "$T/l6.bnt"
for x in "t2 tq2" "t3 tq1"; do
    dt=${x% *} ty=${x#* }
    expect_rc 0 "layers.6.weight as $dt -> GGUF" bitnet-convert -t layers.6.weight --dtype "$dt" "$T/l6.bnt" -o "$T/l6_$ty.gguf"
    check "$ty: byte-identical to the file the package read" cmp -s "$T/l6_$ty.gguf" "$RB/l6_${ty}.gguf"
    expect_rc 0 "$ty: our reader gives the package's values exactly" bitnet-verify --compare --max-abs 0 "$RB/l6_${ty}.gguf:layers.6.weight" "$RB/l6_${ty}_pkg.npy"
done
expect_rc 1 "the comparison can fail: the package's values are not the f32 layer" bitnet-verify --compare --max-abs 0 "$RB/l6_tq1_pkg.npy" "$M:layers.6.weight"

# ---- I2_S -> .bnt -> GGUF comes back as TQ2_0 (bitnet-convert(1), GGUF) ---------------
expect_rc 0 "i2s.gguf -> .bnt" bitnet-convert "$G/i2s.gguf" -o "$T/i2.bnt"
expect_rc 0 "-> .gguf" bitnet-convert "$T/i2.bnt" -o "$T/i2.gguf"
expect_rc 0 "list it" bitnet-info "$T/i2.gguf"
expect_out '^i2s  *tq2_0 *\[4, 256\]  *1024  *264 .*group:256$' "I2_S comes back as TQ2_0, one f16 scale per block"
# the tensor scale 0.7431 rounded to f16 moves each weight by at most 0.7431 * 2^-11 < 0.00037
# (a changed code would move one by 0.74 or more)
expect_rc 0 "the weights within the f16 rounding of the scale" bitnet-verify --compare --max-abs 0.00037 "$G/i2s.gguf" "$T/i2.gguf"
expect_rc 1 "but not exactly: the scale was rounded" bitnet-verify --compare --max-abs 0 "$G/i2s.gguf" "$T/i2.gguf"
expect_rc 0 "from there the round trip is byte-identical" sh -c 'bitnet-convert "$1" -o "$2" && bitnet-convert "$2" -o "$3" && cmp "$1" "$3"' sh "$T/i2.gguf" "$T/i2b.bnt" "$T/i2b.gguf"

# ---- share/convert.mk: %.bnt: %.gguf and %.gguf: %.bnt --------------------------------
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$T/mk/src"
cp "$R" "$T/mk/src/m.gguf"
expect_rc 0 "convert.mk: .gguf -> .bnt" make -s -f "$top/share/convert.mk" SRC="$T/mk/src" DST="$T/mk/out"
check "convert.mk: the .bnt is there" [ -f "$T/mk/out/m.bnt" ]
expect_rc 0 "convert.mk: .bnt -> .gguf" make -s -f "$top/share/convert.mk" SRC="$T/mk/out" DST="$T/mk/g" "$T/mk/g/m.gguf"
check "convert.mk: byte-identical round trip" cmp -s "$R" "$T/mk/g/m.gguf"

# ---- a file without tensors (the package pads its header) ---------------------------
expect_rc 0 "empty.gguf -> .bnt" bitnet-convert "$G/empty.gguf" -o "$T/e.bnt"
expect_rc 0 "-> .gguf" bitnet-convert "$T/e.bnt" -o "$T/e.gguf"
check "empty: byte-identical" cmp -s "$G/empty.gguf" "$T/e.gguf"
run sh -c 'cat "$1" | bitnet-convert - -o "$2"' sh "$G/empty.gguf" "$T/e2.bnt"
check "empty: from a pipe" [ "$rc" -eq 0 ]
