#!/bin/bash
# make.sh - writes the hand-made .npy corpus of this folder, good and broken,
# byte by byte (no NumPy, no bitnet code).  EXPECTED lists what reading each
# file must give: file<TAB>status<TAB>detail substring (for good files: shape).
set -eu
cd "$(dirname "$0")"

# npy VERSION HEADER_DICT DATA_PRINTF [LENGTH_OVERRIDE]: header padded with
# spaces and a newline so that magic + length + header is a multiple of 64.
npy() {
    local ver=$1 dict=$2 data=$3 len=${4:-}
    local pre=10; [ "$ver" != 1 ] && pre=12
    local n=$(( ${#dict} + 1 ))
    local total=$(( (pre + n + 63) / 64 * 64 ))
    local hlen=$(( total - pre ))
    [ -n "$len" ] && hlen=$len
    printf '\x93NUMPY'
    printf "\\x$(printf %02x "$ver")\\x00"
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $(((hlen >> 8) & 255)))"
    [ "$ver" != 1 ] && printf "\\x$(printf %02x $(((hlen >> 16) & 255)))\\x$(printf %02x $(((hlen >> 24) & 255)))"
    printf '%s' "$dict"
    printf "%$(( total - pre - ${#dict} - 1 ))s" ""
    printf '\n'
    printf "$data"
}

F32_1to6='\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc0\x40'

# good
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" "$F32_1to6" > good_f32_v1.npy
npy 2 "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }" "$F32_1to6" > good_f32_v2.npy
npy 3 "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }" "$F32_1to6" > good_f32_v3.npy
npy 1 "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }" "$F32_1to6" > good_fortran.npy
npy 1 "{'descr': '>i2', 'fortran_order': False, 'shape': (), }" '\x01\x02' > good_be_scalar.npy
npy 1 "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 5), }" '' > good_empty.npy
npy 1 "{\"shape\": (1,1,1,1,1,1,1,1), \"descr\": \"|i1\", \"fortran_order\": False}" '\xff' > good_rank8.npy

# broken
npy 1 "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }" '\x00\x00\x00\x00\x00\x00\x00\x00' > object.npy
{ printf '\x93NUMPZ\x01\x00'; tail -c +9 good_f32_v1.npy; } > bad_magic.npy
head -c 40 good_f32_v1.npy > trunc_header.npy
head -c $(( $(wc -c < good_f32_v1.npy) - 5 )) good_f32_v1.npy > trunc_data.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) " "$F32_1to6" > bad_dict.npy
npy 1 "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }" "$F32_1to6" > bad_bool.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000), }" "$F32_1to6" > absurd_shape.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }" "" > huge_dim.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }" '\x00\x00\x80\x3f' > rank9.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }" "$F32_1to6" > not_tuple.npy
npy 1 "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }" '\x00\x00\x00\x00\x00\x00\x00\x00' > complex.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}" "$F32_1to6" > extra_key.npy
npy 1 "{'descr': '<f4', 'shape': (6,)}" "$F32_1to6" > missing_key.npy
npy 1 "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }" '\x00\x00\x80\x3f' > structured.npy
{ printf '\x93NUMPY\x04\x00'; tail -c +9 good_f32_v1.npy; } > bad_version.npy
npy 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }" "$F32_1to6" 4000 > header_len_past_end.npy
