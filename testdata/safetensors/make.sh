#!/bin/bash
# make.sh - writes the hand-made safetensors corpus of this folder, good and
# broken, byte by byte (no Python, no bitnet code).  EXPECTED lists what
# reading each file must give: file<TAB>status<TAB>detail substring (for good
# files: the tensor names and shapes in offset order).
set -eu
cd "$(dirname "$0")"

le64() { # n -> 8 little-endian bytes
    local n=$1 i
    for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (n >> (8 * i)) & 255 )))"; done
}
# st JSON DATA_PRINTF [LENGTH]: header padded with spaces to a multiple of 8
st() {
    local json=$1 data=$2 len=${3:-}
    local n=$(( (${#json} + 7) / 8 * 8 ))
    le64 "${len:-$n}"
    printf '%s' "$json"
    printf "%$(( n - ${#json} ))s" ""
    printf "$data"
}
F32_1to4='\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40'

# good
st '{"__metadata__":{"format":"pt","note":"hand made"},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' "$F32_1to4" > good_meta.safetensors
st '{"f64":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"f16":{"dtype":"F16","shape":[1],"data_offsets":[8,10]},"bf16":{"dtype":"BF16","shape":[1],"data_offsets":[10,12]},"i8":{"dtype":"I8","shape":[2],"data_offsets":[12,14]},"u8":{"dtype":"U8","shape":[2],"data_offsets":[14,16]},"i16":{"dtype":"I16","shape":[1],"data_offsets":[16,18]},"i32":{"dtype":"I32","shape":[1],"data_offsets":[18,22]},"i64":{"dtype":"I64","shape":[1],"data_offsets":[22,30]},"f32":{"dtype":"F32","shape":[1,1],"data_offsets":[30,34]},"empty":{"dtype":"F32","shape":[0,3],"data_offsets":[34,34]}}' \
  '\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x3c\x80\x3f\xff\x7f\x00\xff\x00\x80\x01\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff\x00\x00\x80\xbf' > good_all_dtypes.safetensors
st '{}' '' > good_empty.safetensors

# broken
st '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' "$F32_1to4" > overlap.safetensors
st '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' "$F32_1to4" > gap.safetensors
st '{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' "$F32_1to4" > not_at_zero.safetensors
st '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' "$F32_1to4" 5000 > header_past_end.safetensors
st '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}}' "$F32_1to4" > size_mismatch.safetensors
st '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},}' "$F32_1to4" > bad_json.safetensors
st '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' "$F32_1to4" > duplicate_key.safetensors
st '{"a":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}}' "$F32_1to4" > unknown_dtype.safetensors
st '{"a":{"dtype":"BOOL","shape":[16],"data_offsets":[0,16]}}' "$F32_1to4" > bool_dtype.safetensors
st '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}' "$F32_1to4" > not_covering.safetensors
st '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' '\x00\x00\x80\x3f' > trunc_data.safetensors
st '["a"]' '' > not_object.safetensors
st '{"__metadata__":{"n":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' "$F32_1to4" > meta_not_string.safetensors
st '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' "$F32_1to4" 200000000 > header_too_large.safetensors
st '{"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}' "$F32_1to4" > negative_dim.safetensors
st '{"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}}' "$F32_1to4" > reversed_offsets.safetensors
st '{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,4],"data_offsets":[0,16]}}' "$F32_1to4" > rank9.safetensors
st '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}' "$F32_1to4" > absurd_shape.safetensors
st '{"a":{"dtype":"F32","shape":[4]}}' "$F32_1to4" > missing_offsets.safetensors
{ le64 16; printf ' {"a":1}        '; } > not_brace.safetensors
head -c 5 good_meta.safetensors > trunc_length.safetensors
