#!/bin/sh
# test_hf_bitnet.sh - the Hugging Face BitNet layout (u8 [out/4, in] + NAME_scale)
# read by bitnet-convert and bitnet-quantize; expected values written by numpy
# (tests/make_hf_bitnet.py) after the transformers unpacking rule; a lone 2-D
# u8 tensor passes at once and in order.
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

# ---- a lone 2-D u8 tensor passes at once, in its place ----------------------------
# safetensors written here: lone.weight (u8 [2, 3], no lone.weight_scale), mid
# (f32), then the pair p.weight (u8 [1, 4]) + p.weight_scale.  The reader knows
# from the header that lone.weight has no partner: it must not wait for one.
h='{"lone.weight":{"dtype":"U8","shape":[2,3],"data_offsets":[0,6]},"mid":{"dtype":"F32","shape":[2],"data_offsets":[6,14]},"p.weight":{"dtype":"U8","shape":[1,4],"data_offsets":[14,18]},"p.weight_scale":{"dtype":"F32","shape":[1],"data_offsets":[18,22]}}'
while [ $(( ${#h} % 8 )) -ne 0 ]; do h="$h "; done
{
    printf "\\$(printf %o $((${#h} % 256)))\\$(printf %o $((${#h} / 256)))\\000\\000\\000\\000\\000\\000"
    printf '%s' "$h"
    printf '\001\002\003\004\005\006'              # lone.weight: any bytes (a code 3 too)
    printf '\000\000\200\077\000\000\000\100'      # mid: 1.0, 2.0
    printf '\044\030\201\102'                      # p.weight: codes 0, 1, 2 only
    printf '\000\000\000\077'                      # p.weight_scale: 0.5
} >"$T/lone.safetensors"
expect_rc 0 "a lone 2-D u8 next to a pair" bitnet-convert "$T/lone.safetensors" -o "$T/lone.bnt"
expect_rc 0 "list" bitnet-info "$T/lone.bnt"
order() { sed -n '3,$p' "$T/out" | grep -v ' tensors, ' | awk '{ printf "%s:%s ", $1, $2 }'; }
check "the tensors keep their order: lone.weight, mid, p.weight" [ "$(order)" = "lone.weight:u8 mid:f32 p.weight:t2 " ]
expect_rc 0 "the lone u8 is unchanged" bitnet-verify --compare --max-abs 0 "$T/lone.bnt:lone.weight" "$T/lone.safetensors:lone.weight"
run sh -c 'cat "$1" | bitnet-convert - -o - -f | bitnet-info -' sh "$T/lone.safetensors"
check "the same from a pipe" [ "$rc" -eq 0 ]
check "from a pipe: the same order" [ "$(order)" = "lone.weight:u8 mid:f32 p.weight:t2 " ]
expect_rc 1 "--hf-bitnet on refuses the lone u8" bitnet-convert --hf-bitnet on "$T/lone.safetensors" -o "$T/on.bnt"
expect_err "tensor 'lone.weight': u8 without a 'lone.weight_scale' tensor" "the message names the missing scale"
check "nothing written" [ ! -e "$T/on.bnt" ]
