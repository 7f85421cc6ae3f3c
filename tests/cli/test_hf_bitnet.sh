#!/bin/sh
# test_hf_bitnet.sh - the Hugging Face BitNet layout (u8 [out/4, in] + NAME_scale)
# read by bitnet-convert and bitnet-quantize; expected values written by numpy
# (tests/make_hf_bitnet.py) after the transformers unpacking rule.
. "$(dirname "$0")/lib.sh"
H=$TESTDATA/hf
F=$H/bitnet-tiny.safetensors
expect_rc 0 "pairs become ternary tensors" bitnet-convert -v "$F" -o "$T/h.bnt"
expect_err 'Hugging Face BitNet layout \[4, 40\] u8 + layers.0.proj.weight_scale -> t2 \[16, 40\]' "-v names the pair"
expect_rc 0 "list them" bitnet-info "$T/h.bnt"
expect_out '^layers.0.proj.weight .* t2 .*\[16, 40\] .*tensor' "layer 0: t2 [16, 40], tensor scale"
expect_out '^layers.1.proj.weight .* t2 .*\[12, 9\]' "layer 1: t2 [12, 9] (f16 scale)"
expect_out '^token_ids .* u8 ' "a lone u8 passes as it is"
check "the scale tensors are gone" [ "$(grep -c '_scale' "$T/out")" -eq 0 ]
for l in 0 1; do
    n=layers.$l.proj.weight
    e=$H/layers_${l}_proj_weight
    expect_rc 0 "layer $l: --dtype f32 (scale multiplies)" bitnet-convert -t "$n" --dtype f32 "$F" -o "$T/m.npy"
    expect_rc 0 "layer $l: q * s exactly" bitnet-verify --compare "$T/m.npy" "${e}_mul.npy"
    expect_rc 0 "layer $l: --hf-scale div" bitnet-convert -t "$n" --dtype f32 --hf-scale div "$F" -o "$T/d.npy"
    expect_rc 0 "layer $l: q / s exactly" bitnet-verify --compare "$T/d.npy" "${e}_div.npy"
    expect_rc 0 "layer $l: the t2 codes dequantize to q * s" sh -c 'bitnet-convert -t "$1" --dtype f32 "$2" -o "$3" && bitnet-verify --compare "$3" "$4"' sh "$n" "$T/h.bnt" "$T/t.npy" "${e}_mul.npy"
done
expect_rc 1 "mul and div differ (the test can tell them apart)" bitnet-verify --compare "$T/m.npy" "$T/d.npy"
expect_rc 0 "--hf-bitnet off keeps the u8 tensors" bitnet-convert --hf-bitnet off "$F" -o "$T/off.bnt"
expect_rc 0 "list" bitnet-info "$T/off.bnt"
expect_out '^layers.0.proj.weight .* u8 .*\[4, 40\]' "u8 [4, 40] kept"
expect_rc 2 "--hf-bitnet takes auto, on, off" bitnet-convert --hf-bitnet maybe "$F" -o "$T/x.bnt"
expect_rc 2 "--hf-scale takes mul, div" bitnet-convert --hf-scale times "$F" -o "$T/x.bnt"
expect_rc 1 "a code 3 is refused" bitnet-convert "$H/bitnet-code3.safetensors" -o "$T/x.bnt"
expect_err 'code 3 (invalid) for row 13 column 2' "the message says where"
check "nothing half written" [ ! -e "$T/x.bnt" ]
expect_rc 0 "bitnet-quantize takes the checkpoint as it is" bitnet-quantize "$F" -o "$T/q.bnt"
expect_rc 0 "list" bitnet-info "$T/q.bnt"
expect_out '^layers.0.proj.weight .* t2 .*\[16, 40\] .*tensor' "quantize keeps the checkpoint's codes and scale"
expect_rc 0 "and the same weights" bitnet-verify --compare "$T/q.bnt:layers.0.proj.weight" "$T/h.bnt:layers.0.proj.weight"
